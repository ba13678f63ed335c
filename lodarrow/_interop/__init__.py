"""Conversions between lodarrow and other libraries' array and tensor models.

- ``_arrow``: ``to_arrow`` / ``from_arrow`` (and the Arrow PyCapsule producer), over
  ``_arrow_layout`` (Arrow types <-> LoD levels), ``_arrow_decode`` (the one decoder) and
  ``_arrow_nulls`` (validity and nulls);
- ``_cdevice``: the Arrow C Device interface (GPU arrays without a copy);
- ``_pandas``: pandas Series and DataFrames; ``_dense``: dense arrays through DLPack.

pyarrow is a dependency; every other target library is imported lazily (``_optional``), on the
first conversion that needs it, so ``import lodarrow`` never imports pandas, torch, JAX,
TensorFlow, Awkward Array or PaddlePaddle.  ``LoDTensor``'s conversion methods import these
modules inside the method (docs/ARCHITECTURE.md#import-rules).
"""
