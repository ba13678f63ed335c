"""Building a LoDTensor from Python data: Paddle's ``create_lod_tensor`` and ``from_list``.

Both end in the ``LoDTensor`` constructor (or ``set`` and ``set_recursive_sequence_lengths``),
which checks the LoD; what they add is reading lists: lengths from nested lists, rows stacked
into one array, and an error naming the first element that is not a number.
"""

import numpy as np

from lodarrow._cupy import is_cupy_array
from lodarrow._errors import _LengthMismatchError
from lodarrow._tensor import LoDTensor
from lodarrow._validation import _levels, as_int, check_dtype

__all__ = ["create_lod_tensor", "from_list"]


def create_lod_tensor(data, recursive_seq_lens, place=None):
    """Create a LoDTensor from data and recursive sequence lengths (Paddle's function).

    Parameters
    ----------
    data : numpy.ndarray, LoDTensor or list
        A NumPy (or CuPy) array is copied as is (dtype and shape kept).  A LoDTensor's data is
        copied and given the new LoD.  A list of sequences (one level only) is flattened into
        an ``(N, 1)`` array; Python ints give int64, floats float64.
    recursive_seq_lens : list of lists of int
        The lengths of every level, outermost first.
    place : CPUPlace, CUDAPlace or CUDAPinnedPlace, optional
        Where the tensor lives (default: host memory).

    Returns
    -------
    LoDTensor
        A new tensor (its data a copy) with the LoD ``recursive_seq_lens`` describes.

    Raises
    ------
    LoDError
        If the lengths are not a valid LoD for the data.  For a list whose sequence lengths
        differ from ``recursive_seq_lens`` the error is also an ``AssertionError``, as Paddle's.
    TypeError
        If ``data`` is none of the above.

    See Also
    --------
    LoDTensor : From data and offsets, or lengths (``LoDTensor.from_lengths``).
    from_list : From nested Python lists.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> b = la.create_lod_tensor(np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]]),
    ...                          [[2, 0, 3], [1, 2, 1, 0, 3]], la.CPUPlace())
    >>> b.lod()
    [[0, 2, 2, 5], [0, 1, 3, 4, 4, 7]]
    """
    if isinstance(data, LoDTensor):
        return create_lod_tensor(np.array(data), recursive_seq_lens, place)
    if isinstance(data, list):
        lengths, rows = [], []
        for seq in data:
            lengths.append(len(seq))
            rows.extend(seq)
        expected = [np.asarray(level).tolist() for level in _levels(recursive_seq_lens,
                                                                      "recursive_seq_lens")]
        if [lengths] != expected:
            raise _LengthMismatchError(
                f"data and recursive_seq_lens do not match: the sequences of data have lengths "
                f"{[lengths]}, recursive_seq_lens is {expected}"
            )
        arr = np.array(rows)
        arr = arr.reshape(arr.shape + (1,))
        tensor = LoDTensor()
        tensor.set(arr, place)
        tensor._set_lengths(recursive_seq_lens, "recursive_seq_lens")
        return tensor
    if isinstance(data, np.ndarray) or is_cupy_array(data):
        tensor = LoDTensor()
        tensor.set(data, place)
        tensor._set_lengths(recursive_seq_lens, "recursive_seq_lens")
        return tensor
    raise TypeError(f"create_lod_tensor: data should be a LoDTensor, a NumPy array or a list, "
                    f"got {type(data).__name__}")


#: How many levels ``from_list`` may add below the deepest list (all of them empty).
_MAX_EMPTY_LEVELS = 1023


def _first_bad_leaf(nested, lod_level):
    """Describe the first element of ``nested`` that is not a number or bool, or None."""
    stack = [((), nested)]
    while stack:
        path, obj = stack.pop()
        if isinstance(obj, (list, tuple)):
            stack.extend(((*path, j), child) for j, child in reversed(list(enumerate(obj))))
        elif isinstance(obj, np.ndarray):
            if obj.dtype.kind not in "biuf":
                return f"an array of dtype {obj.dtype} at position {list(path)}"
        elif not isinstance(obj, (bool, int, float, np.bool_, np.integer, np.floating)):
            return f"{obj!r} at position {list(path)} is not a number"
        elif isinstance(obj, int) and not -2**63 <= obj < 2**64:
            return f"{obj} at position {list(path)} is too large for int64"
    return None


def _nesting_depth(obj):
    if isinstance(obj, (list, tuple)):
        return 1 + max((_nesting_depth(child) for child in obj), default=0)
    if isinstance(obj, np.ndarray):
        return obj.ndim
    return 0


def from_list(nested, dtype=None, lod_level=None):
    """Build a LoDTensor from nested Python lists (the inverse of :meth:`LoDTensor.to_list`).

    Parameters
    ----------
    nested : list
        ``lod_level`` levels of lists, then the rows (scalars, or nested lists / arrays of the
        feature shape).
    dtype : dtype, optional
        The data's dtype; NumPy's inference by default (float64 when there are no rows).
    lod_level : int, optional
        How many list levels are sequences.  By default every level but the innermost scalars
        (``from_list([[1, 2], [3]])`` has one level of scalar rows).

    Returns
    -------
    LoDTensor
        The rows as one array, with one LoD level per list level above them, on the CPU.

    Raises
    ------
    TypeError
        If ``nested`` is not a list, ``dtype`` is no supported NumPy dtype, or a row holds
        something other than numbers or bools (the message names its position).
    ValueError
        If ``lod_level`` is negative or asks for list levels that ``nested`` does not have (a
        scalar where a list belongs), or the rows do not share one shape.

    See Also
    --------
    LoDTensor.to_list : The inverse.
    create_lod_tensor : From data and sequence lengths (Paddle's function).

    Examples
    --------
    >>> import lodarrow as la
    >>> la.from_list([[[1, 2], [3]], [], [[4]]]).lod()
    [[0, 2, 2, 3], [0, 2, 3, 4]]
    """
    if not isinstance(nested, (list, tuple, np.ndarray)):
        raise TypeError(f"from_list: nested must be a list, got {type(nested).__name__}")
    if dtype is not None:
        try:
            dtype = np.dtype(dtype)
        except Exception:
            raise TypeError(f"from_list: dtype must be a NumPy dtype (or its name), "
                            f"got {dtype!r}") from None
        check_dtype(dtype, "from_list: dtype")
    if lod_level is None:
        lod_level = max(_nesting_depth(nested) - 1, 0)
    lod_level = as_int(lod_level, "from_list: lod_level")
    if lod_level < 0:
        raise ValueError(f"from_list: lod_level must be >= 0, got {lod_level}")
    # Levels deeper than the lists are possible only when they are all empty; bound them so a
    # huge lod_level fails at once instead of allocating its levels.
    if lod_level > _MAX_EMPTY_LEVELS and lod_level > (depth := _nesting_depth(nested)):
        raise ValueError(f"from_list: lod_level={lod_level} is deeper than nested, whose lists "
                         f"nest {depth} deep; pass lod_level <= {depth}")
    lengths = [[] for _ in range(lod_level)]
    rows = []

    def walk(seq, k, path):
        if k == lod_level:
            rows.append(seq)
            return
        if not isinstance(seq, (list, tuple, np.ndarray)):
            raise ValueError(f"from_list: expected a list at depth {k} (position {path}), "
                             f"got {seq!r}")
        lengths[k].append(len(seq))
        for j, child in enumerate(seq):
            walk(child, k + 1, path + [j])

    if lod_level == 0:
        rows = list(nested)
    else:
        for i, seq in enumerate(nested):
            walk(seq, 0, [i])
    try:
        data = np.array(rows, dtype=dtype)
    except ValueError as exc:
        where = _first_bad_leaf(nested, lod_level)
        if where is not None:
            raise TypeError(f"from_list: {where}") from None
        raise ValueError(f"from_list: the rows do not share one shape ({exc})") from None
    except (TypeError, OverflowError) as exc:
        where = _first_bad_leaf(nested, lod_level)
        raise TypeError(f"from_list: {where or exc}") from None
    if data.dtype == object or data.dtype.kind in "USVMmOc":
        where = _first_bad_leaf(nested, lod_level)
        raise TypeError(f"from_list: {where or f'dtype {data.dtype} is not supported'}; "
                        f"nested must hold numbers (or bools) only")
    if data.ndim == 0:
        data = data.reshape(0)
    return LoDTensor(data, lengths=lengths) if lod_level else LoDTensor(data)
