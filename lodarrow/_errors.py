"""lodarrow's exceptions.  Each subclasses a builtin so ``except ValueError`` keeps working."""

__all__ = ["LoDError", "BackendError"]


class LoDError(ValueError):
    """An invalid LoD: offsets that do not start at 0, decrease, or do not chain between levels.

    Messages name the argument, the level, the first offending position and the values found.
    """


class BackendError(RuntimeError):
    """A device is requested that this process cannot provide (CuPy missing, no CUDA GPU)."""


# LoDError and BackendError are shown as ``lodarrow.LoDError`` (where users import them from).
LoDError.__module__ = BackendError.__module__ = "lodarrow"


def _shown_as(public):
    """Make a private subclass print as ``public`` in tracebacks and reprs.

    The private classes exist only for their extra builtin base (Paddle raises that builtin at
    the same place); users should see, and look up, the public name.
    """

    def decorate(cls):
        cls.__name__ = cls.__qualname__ = public.__qualname__
        cls.__module__ = public.__module__
        return cls

    return decorate


@_shown_as(LoDError)
class _NegativeLoDError(LoDError, TypeError):
    """A negative length or offset.

    Paddle's binding rejects these with ``TypeError`` (its lengths are unsigned); lodarrow's
    rule is a ``LoDError``.  This class is both, so either ``except`` clause catches it.
    """


@_shown_as(LoDError)
class _LengthMismatchError(LoDError, AssertionError):
    """``create_lod_tensor`` sequences whose lengths disagree with ``recursive_seq_lens``.

    Paddle raises ``AssertionError`` here; this is also a ``LoDError``.
    """
