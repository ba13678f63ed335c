"""What the loader checks about its columns before the first batch, and how extra columns
travel with a batch (docs/training.md#nulls-and-extra-columns)."""

import numpy as np
import pyarrow as pa

__all__ = ["ExtraColumn", "check_jax_x64", "null_rows"]

_WIDE = ("int64", "uint64", "float64")


class ExtraColumn:
    """How one extra column is given with each batch, decided from its Arrow type.

    Fixed-width numbers and bools become arrays of the batch's rows (in ``to``'s library);
    a column with nulls keeps its dtype, its nulls read as 0, with a bool ``<name>_mask``
    (True where valid) beside it -- never a float cast.  Any other type (strings, lists,
    structs, dictionaries) stays a ``pyarrow.Array`` of the batch's rows, whatever ``to`` is.
    """

    def __init__(self, name, arrow_type, has_nulls):
        self.name = name
        self.numeric = (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
                        or pa.types.is_boolean(arrow_type))
        self.has_nulls = bool(has_nulls) and self.numeric
        self.dtype = np.dtype(arrow_type.to_pandas_dtype()) if self.numeric else None

    def prepare(self, column):
        """The column of a table (read block or whole source) in the form :meth:`take` uses."""
        if isinstance(column, pa.ChunkedArray):
            column = (column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))
        if not self.numeric:
            return column
        valid = None
        if column.null_count:
            valid = np.asarray(column.is_valid())
            column = column.fill_null(pa.scalar(0, type=column.type))
        values = column.to_numpy(zero_copy_only=False)
        if values.dtype != self.dtype:
            values = values.astype(self.dtype)
        return values, valid

    def take(self, prepared, local, out):
        """Put the batch's rows of the column into ``out`` (a dict of the batch's arrays)."""
        if not self.numeric:
            out[self.name] = prepared.take(pa.array(local))
            return
        values, valid = prepared
        out[self.name] = values[local]
        if self.has_nulls:
            out[self.name + "_mask"] = (np.ones(len(local), bool) if valid is None
                                        else valid[local])


def check_jax_x64(columns, fn):
    """``to="jax"`` without ``jax_enable_x64`` would narrow 64-bit data silently: a
    ``ValueError`` naming the first such column (``columns``: name -> numpy dtype)."""
    from lodarrow._interop._optional import import_optional

    jax = import_optional("jax", f"{fn}(to='jax')")
    if bool(jax.config.jax_enable_x64):
        return
    for name, dtype in columns.items():
        if dtype is not None and np.dtype(dtype).name in _WIDE:
            raise ValueError(f"{fn}: column {name!r} holds {np.dtype(dtype)} data, which JAX "
                             f"narrows to 32 bits while jax_enable_x64 is off; enable it "
                             f"(jax.config.update('jax_enable_x64', True)) or cast the column "
                             f"to a 32-bit type")


def null_rows(column):
    """The positions of the null rows of a list column (an Array or ChunkedArray)."""
    if column.null_count == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.asarray(column.is_null())).astype(np.int64)
