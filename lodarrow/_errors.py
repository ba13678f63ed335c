"""lodarrow's exceptions.  Each subclasses a builtin so ``except ValueError`` keeps working."""

__all__ = ["LoDError", "BackendError", "RegularLevelWarning"]


class LoDError(ValueError):
    """An invalid LoD: offsets that do not start at 0, decrease, or do not chain between levels.

    Messages name the argument, the level, the first offending position and the values found.
    """


class BackendError(RuntimeError):
    """A device is requested that this process cannot provide (CuPy missing, no CUDA GPU)."""


class RegularLevelWarning(UserWarning):
    """A list column read without ``lod_level`` whose innermost list level is regular.

    Every list of that level has the same length ``d >= 2``: most likely a ``FixedSizeList``
    feature dimension that pandas object columns, Spark or DuckDB turned into plain lists, so
    an operator would treat each feature vector as a sequence.  The message names the column,
    ``d`` and the spelling that reads the level as features,
    ``col(name, lod_level=k, feature_shape=(d,))``; an explicit ``lod_level`` silences it
    (docs/tables.md#one-meaning-everywhere).

    Examples
    --------
    >>> import warnings, pyarrow as pa, lodarrow as la
    >>> spark_like = pa.table({"emb": [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0]]]})
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     _ = la.apply(spark_like, la.sequence_pool, input=la.col("emb"), pool_type="sum",
    ...                  out="s")
    >>> seen[0].category.__name__
    'RegularLevelWarning'
    >>> la.apply(spark_like, la.sequence_pool, pool_type="sum", out="s",
    ...          input=la.col("emb", lod_level=1, feature_shape=(2,))).column("s").to_pylist()
    [[4.0, 6.0], [5.0, 6.0]]
    """


# Shown as ``lodarrow.LoDError`` etc. (where users import them from).
LoDError.__module__ = BackendError.__module__ = RegularLevelWarning.__module__ = "lodarrow"


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


@_shown_as(TypeError)
class ArgumentError(TypeError, ValueError):
    """A missing or unusable argument: ``TypeError`` as Paddle's documentation says, and the
    ``ValueError`` Paddle's Python layer raises.  Either ``except`` clause catches it."""
