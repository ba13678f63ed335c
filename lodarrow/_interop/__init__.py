"""Conversions between lodarrow and Arrow, pandas and device memory (the layer below the
operators; the tensor libraries' forms are the conversion hub's, ``lodarrow._hub``).

- ``_arrow``: ``to_arrow`` / ``from_arrow`` (and the Arrow PyCapsule producer), over
  ``_arrow_layout`` (Arrow types <-> LoD levels), ``_arrow_decode`` (the one decoder) and
  ``_arrow_nulls`` (validity and nulls);
- ``_cdevice``: the Arrow C Device interface (GPU arrays without a copy);
- ``_pandas``: pandas Series and DataFrames; ``_objects``: object columns to Arrow.

pyarrow is a dependency; every other library is imported lazily (``_optional``, which the hub
uses too), on the first conversion that needs it, so ``import lodarrow`` never imports pandas,
torch, JAX, TensorFlow, Awkward Array or PaddlePaddle.  ``LoDTensor``'s conversion methods
import these modules inside the method (docs/ARCHITECTURE.md#import-rules).
"""
