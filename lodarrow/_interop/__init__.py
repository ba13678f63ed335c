"""Conversions between lodarrow and other libraries' array and tensor models.

Every target library is imported lazily, on the first conversion that needs it, so
``import lodarrow`` never imports torch, JAX, TensorFlow, Awkward Array or PaddlePaddle.
"""
