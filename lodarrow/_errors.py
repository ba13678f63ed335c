"""lodarrow's exceptions.  Each subclasses a builtin so ``except ValueError`` keeps working."""

__all__ = ["LoDError", "BackendError"]


class LoDError(ValueError):
    """An invalid LoD: offsets that do not start at 0, decrease, or do not chain between levels.

    Messages name the argument, the level, the first offending position and the values found.
    """


class BackendError(RuntimeError):
    """A device is requested that this process cannot provide (CuPy missing, no CUDA GPU)."""


class _NegativeLoDError(LoDError, TypeError):
    """A negative length or offset.

    Paddle's binding rejects these with ``TypeError`` (its lengths are unsigned); lodarrow's
    rule is a ``LoDError``.  This class is both, so either ``except`` clause catches it.
    """


class _LengthMismatchError(LoDError, AssertionError):
    """``create_lod_tensor`` sequences whose lengths disagree with ``recursive_seq_lens``.

    Paddle raises ``AssertionError`` here; this is also a ``LoDError``.
    """
