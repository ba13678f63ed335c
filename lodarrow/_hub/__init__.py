"""The conversion hub: LoDTensors to and from tensor libraries' ragged forms (docs/interop.md).

- ``_torch``: varlen (``cu_seqlens``), nested jagged and padded tensors;
- ``_jax``: values with segment ids / group sizes, or a padded batch;
- ``_tf``: ``tf.RaggedTensor``; ``_awkward``: Awkward Arrays; ``_paddle``: Paddle's LoDTensor;
- ``_dense``: dense arrays handed to torch / JAX / TensorFlow through DLPack;
- ``_common``: the checks and helpers they share.

The hub sits above the operators and the table layer (docs/ARCHITECTURE.md#the-layers): its
padded forms are built with ``sequence_pad`` / ``sequence_unpad`` and it reads table columns,
so it imports both; nothing below imports it, but ``LoDTensor``'s conversion methods
(``to_torch``, ``to_jax``, ...), which import their module inside the method.  Each target
library is imported lazily (``lodarrow._interop._optional``) on the first conversion.
"""
