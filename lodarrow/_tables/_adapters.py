"""Table adapters: read Arrow columns out of any table kind and put result columns back.

``apply`` works on one model (docs/tables.md): a table is a set of Arrow columns of equal
length.  Each adapter gives a table kind's columns as Arrow data without copying where the
kind allows, and builds a result *of the same kind* in which every column it did not produce
is the caller's own object (zero-copy, schema and field metadata kept).

pandas and polars are imported lazily: only when a table of that kind is seen.
"""

import sys

import numpy as np
import pyarrow as pa

from lodarrow._interop._arrow_layout import FIXED, type_chain
from lodarrow._interop._objects import objects_to_arrow
from lodarrow._validation import SUPPORTED_DTYPES

__all__ = ["adapt", "objects_to_arrow", "is_pandas_frame", "is_polars_frame", "list_levels",
           "representable"]

_VALUE_TYPES = frozenset(pa.from_numpy_dtype(np.dtype(d)) for d in SUPPORTED_DTYPES)


def list_levels(arrow_type):
    """``(kinds, leaf)``: the list nesting of a type, outermost first, and its leaf type.

    ``kinds`` holds "list", "large_list", "list_view", "large_list_view" or the int size of
    a fixed-size list (:func:`lodarrow._interop._arrow_layout.type_chain`, in this shape).
    Extension types are read as their storage.
    """
    chain, leaf = type_chain(arrow_type)
    return [size if kind == FIXED else kind for kind, size in chain], leaf


def variable_levels(arrow_type):
    """How many variable-size list levels the type has, counting a fixed-size list above
    the last of them (a level of uniform lengths), as ``from_arrow`` reads it."""
    kinds, _ = list_levels(arrow_type)
    last = max((i for i, k in enumerate(kinds) if isinstance(k, str)), default=-1)
    return last + 1


def representable(arrow_type):
    """Whether a column of this type can be a LoDTensor (numeric or bool values under any
    list nesting; dictionary-encoded values count as their values)."""
    _, leaf = list_levels(arrow_type)
    if pa.types.is_dictionary(leaf):
        leaf = leaf.value_type
    return leaf in _VALUE_TYPES


def is_pandas_frame(obj):
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def is_polars_frame(obj):
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, pl.DataFrame)


class ArrowAdapter:
    """A ``pyarrow.Table`` or ``RecordBatch`` (and Arrow stream producers, read as a Table)."""

    __slots__ = ("table", "schema", "n_rows")

    def __init__(self, table):
        self.table = table
        self.schema = table.schema
        self.n_rows = table.num_rows

    def names(self):
        return self.schema.names

    def column(self, name, fn):
        i = self.schema.get_field_index(name)
        if i < 0:
            raise KeyError(f"{fn}: no column {name!r}; the columns are {self.schema.names}")
        return self.table.column(i), False

    def finish(self, new):
        """The table with the ``new`` columns (name -> (pa.Field, pa.Array)) replaced in place
        or appended."""
        table = self.table
        schema = self.schema
        # out names are distinct: the input schema's indices hold; a Table's and a
        # RecordBatch's set_column / append_column keep the schema's metadata and the other
        # fields as they are
        for name, (field, arr) in new.items():
            i = schema.get_field_index(name)
            if i >= 0:
                table = table.set_column(i, field, arr)
            else:
                table = table.append_column(field, arr)
        return table


class PandasAdapter:
    """A pandas DataFrame: ``pd.ArrowDtype`` columns are read zero-copy; object columns of
    lists / NumPy arrays are converted (:func:`objects_to_arrow`); new columns are
    ``pd.ArrowDtype``."""

    __slots__ = ("frame", "n_rows")

    def __init__(self, frame):
        self.frame = frame
        self.n_rows = len(frame)

    def names(self):
        return list(self.frame.columns)

    def column(self, name, fn):
        import pandas as pd

        frame = self.frame
        if name not in frame.columns:
            raise KeyError(f"{fn}: no column {name!r}; the columns are {list(frame.columns)}")
        series = frame[name]
        if isinstance(series, pd.DataFrame):
            raise ValueError(f"{fn}: the DataFrame has several columns named {name!r}")
        return series_to_arrow(series, name, fn)

    def finish(self, new):
        import pandas as pd

        out = self.frame.copy(deep=False)
        for name, (_, arr) in new.items():
            out[name] = pd.Series(pd.arrays.ArrowExtensionArray(arr), index=out.index,
                                  name=name, copy=False)
        return out


def series_to_arrow(series, name, fn):
    """``(arrow data, from_objects)`` of a pandas Series (zero-copy for ``pd.ArrowDtype``)."""
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, pd.ArrowDtype):
        return series.array.__arrow_array__(), False
    if dtype == object:
        return objects_to_arrow(series.to_numpy(dtype=object), name, fn), True
    try:
        return pa.array(series, from_pandas=False), False
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise TypeError(f"{fn}: column {name!r} of dtype {dtype} cannot be read as Arrow "
                        f"data ({exc})") from None


class PolarsAdapter:
    """A polars DataFrame: columns are read through ``Series.to_arrow`` and results added with
    ``with_columns`` (the other columns stay polars' own)."""

    __slots__ = ("frame", "n_rows")

    def __init__(self, frame):
        self.frame = frame
        self.n_rows = frame.height

    def names(self):
        return self.frame.columns

    def column(self, name, fn):
        if name not in self.frame.columns:
            raise KeyError(f"{fn}: no column {name!r}; the columns are {self.frame.columns}")
        return self.frame.get_column(name).to_arrow(), False

    def finish(self, new):
        import polars as pl

        return self.frame.with_columns([pl.Series(name, arr) for name, (_, arr) in new.items()])


def adapt(table, fn):
    """The adapter of ``table`` (``TypeError`` naming the accepted kinds otherwise)."""
    if isinstance(table, (pa.Table, pa.RecordBatch)):
        return ArrowAdapter(table)
    if is_pandas_frame(table):
        return PandasAdapter(table)
    if is_polars_frame(table):
        return PolarsAdapter(table)
    if hasattr(table, "__arrow_c_stream__"):
        return ArrowAdapter(pa.table(table))
    raise TypeError(f"{fn}: table must be a pyarrow Table or RecordBatch, a pandas or polars "
                    f"DataFrame, or an object with __arrow_c_stream__, got "
                    f"{type(table).__name__}")
