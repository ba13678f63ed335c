"""Tables: several LoDTensors of equal top-level length as the columns of one ``pa.Table``."""

import warnings
from collections.abc import Mapping

import pyarrow as pa

from lodarrow._interop._arrow import from_arrow, to_arrow
from lodarrow._tables._adapters import representable
from lodarrow._tensor import LoDTensor

__all__ = ["to_table", "from_table"]


def to_table(tensors):
    """Put LoDTensors side by side as the columns of a ``pyarrow.Table`` (zero-copy).

    Parameters
    ----------
    tensors : mapping of str to LoDTensor
        Column name -> tensor.  Every tensor must have the same number of top-level sequences
        (rows, for a tensor without LoD); each becomes a column as :meth:`LoDTensor.to_arrow`
        gives it.

    Returns
    -------
    pyarrow.Table
        One column per entry of ``tensors``, in order, one row per top-level sequence.

    Raises
    ------
    TypeError
        If ``tensors`` is not a mapping, a name is not a string or a value not a LoDTensor.
    ValueError
        If the tensors differ in top-level length (the message names both columns).

    See Also
    --------
    from_table : The inverse: a table's columns as LoDTensors.
    write_parquet : Write the columns to a Parquet file.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.arange(5.0), lengths=[[2, 3]])
    >>> y = la.LoDTensor(np.array([1, 0]))
    >>> la.to_table({"x": x, "y": y}).to_pydict()
    {'x': [[0.0, 1.0], [2.0, 3.0, 4.0]], 'y': [1, 0]}
    """
    if not isinstance(tensors, Mapping):
        raise TypeError(f"to_table: tensors must be a mapping of column name -> LoDTensor, "
                        f"got {type(tensors).__name__}")
    names, arrays = [], []
    first = None
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"to_table: column names must be strings, got {name!r}")
        if not isinstance(t, LoDTensor):
            raise TypeError(f"to_table: column {name!r} must be a LoDTensor, "
                            f"got {type(t).__name__}")
        arr = to_arrow(t)
        if first is None:
            first = (name, len(arr))
        elif len(arr) != first[1]:
            raise ValueError(f"to_table: column {name!r} has {len(arr)} top-level sequences but "
                             f"column {first[0]!r} has {first[1]}; all columns need the same "
                             f"number")
        names.append(name)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, names=names)


def from_table(table, columns=None, *, nulls="error"):
    """Read the columns of a table as LoDTensors.

    Parameters
    ----------
    table : pyarrow.Table, pyarrow.RecordBatch or Arrow stream producer
        Anything with ``__arrow_c_stream__`` (a polars DataFrame, a DuckDB result) is read
        through ``pyarrow.table``.
    columns : str or list of str, optional
        The columns to read.  None: every column that can be a LoDTensor; the others
        (strings, structs, timestamps ...) are skipped with one ``UserWarning`` naming them
        and their types.
    nulls : {"error", "empty"}, default "error"
        Passed to :func:`lodarrow.from_arrow` for every column.

    Returns
    -------
    LoDTensor or dict of str to LoDTensor
        A LoDTensor when ``columns`` is a string, or when it is None and the table has exactly
        one column; otherwise a dict name -> LoDTensor in the requested order (a list of names
        always gives a dict, and so does a table of several columns of which one is left after
        skipping).  A column of one chunk is converted zero-copy; several chunks are joined.

    Raises
    ------
    TypeError
        If ``table`` is not a table, or ``columns`` not a string or a list of strings; or a
        column asked for by name cannot be a LoDTensor (the message names it and its type).
    KeyError
        If a requested column does not exist.
    ValueError
        If ``columns`` repeats a name, or a column holds nulls (see ``nulls``).

    See Also
    --------
    to_table : The inverse: LoDTensors as the columns of a table.
    apply : Run an operator on a table's columns, the result as new columns.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> tab = pa.table({"x": [[1, 2], [3]], "y": [[0.5], []]})
    >>> la.from_table(tab, "x").lod()
    [[0, 2, 3]]
    >>> sorted(la.from_table(tab))
    ['x', 'y']
    """
    if not isinstance(table, (pa.Table, pa.RecordBatch)):
        if not hasattr(table, "__arrow_c_stream__"):
            raise TypeError(f"from_table: table must be a pyarrow Table or RecordBatch, or "
                            f"export __arrow_c_stream__, got {type(table).__name__}")
        table = pa.table(table)
    names, single = select_columns(table.schema.names, columns, "from_table")
    names = representable_columns(table.schema, names, columns is None, "from_table")
    return columns_to_tensors(table, names, single, nulls)


def representable_columns(schema, names, implicit, fn):
    """The ``names`` whose columns can be LoDTensors (docs/tables.md, Files).

    ``implicit`` (no columns asked for): the others are dropped with one ``UserWarning``;
    else every name is kept, and reading one that cannot be a LoDTensor is the conversion's
    ``TypeError``, which names the column and its type.
    """
    if not implicit:
        return names
    keep, skipped = [], []
    for name in names:
        t = schema.field(name).type
        if representable(t):
            keep.append(name)
        else:
            skipped.append(f"{name!r} ({t})")
    if skipped:
        warnings.warn(f"{fn}: skipped {len(skipped)} column(s) that cannot be LoDTensors: "
                      f"{', '.join(skipped)}; pass columns=[...] to choose the columns",
                      UserWarning, stacklevel=3)
    return keep


def select_columns(available, columns, fn):
    """Validate ``columns`` against the ``available`` names.

    Returns ``(names, single)``: the names to read, and whether the caller returns one tensor.
    """
    available = list(available)
    if columns is None:
        return available, len(available) == 1
    if isinstance(columns, str):
        wanted, single = [columns], True
    elif isinstance(columns, (list, tuple)):
        wanted, single = list(columns), False
        for c in wanted:
            if not isinstance(c, str):
                raise TypeError(f"{fn}: columns must be strings, got {c!r}")
        seen = set()
        for c in wanted:
            if c in seen:
                raise ValueError(f"{fn}: column {c!r} is requested twice")
            seen.add(c)
    else:
        raise TypeError(f"{fn}: columns must be a string or a list of strings, "
                        f"got {type(columns).__name__}")
    for c in wanted:
        if c not in available:
            raise KeyError(f"{fn}: no column {c!r}; the columns are {available}")
    return wanted, single


def columns_to_tensors(table, names, single, nulls, **layout):
    """Convert the named columns of a Table / RecordBatch (one tensor if ``single``).

    ``layout`` (``lod_level`` / ``feature_shape``) is passed to ``from_arrow`` when given.
    """
    schema_names = table.schema.names
    kw = {k: v for k, v in layout.items() if v is not None}
    out = {}
    for name in names:
        column = table.column(schema_names.index(name))
        try:
            out[name] = from_arrow(column, nulls=nulls, **kw)
        except (TypeError, ValueError) as exc:
            if type(exc) not in (TypeError, ValueError):
                raise
            raise type(exc)(f"column {name!r}: {exc}") from None
    if single and names:
        return out[names[0]]
    return out
