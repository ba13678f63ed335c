"""The Pythonic surface of LoDTensor: construction, views, iteration, NumPy interop, places."""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from lodarrow import LoDError
from strategies import lod_lengths, lod_tensors

from conftest import ALL_DTYPES, cuda_only, cuda_unavailable_reason, on_backend, run_python


def _y():
    return la.LoDTensor(np.arange(14).reshape(7, 2), [[0, 2, 3], [0, 2, 4, 7]])


# ---------------------------------------------------------------- construction
def test_constructor_lod_and_lengths_agree():
    a = la.LoDTensor(np.arange(7), lod=[[0, 2, 3], [0, 2, 4, 7]])
    b = la.LoDTensor.from_lengths(np.arange(7), [[2, 1], [2, 2, 3]])
    assert a.equals(b) and a == b
    with pytest.raises(TypeError, match="not both"):
        la.LoDTensor(np.arange(7), lod=[[0, 7]], lengths=[[7]])
    with pytest.raises(LoDError, match=r"lengths\[0\] \(the last level\) ends at 6"):
        la.LoDTensor(np.arange(7), lengths=[[6]])


def test_constructor_does_not_copy_unless_asked():
    arr = np.arange(6.0)
    assert la.LoDTensor(arr, [[0, 6]]).data is arr
    assert not np.shares_memory(la.LoDTensor(arr, [[0, 6]], copy=True).data, arr)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype(dtype):
    t = la.LoDTensor(np.zeros((4, 3), dtype=dtype), [[0, 1, 4]])
    assert t.dtype == np.dtype(dtype) and t.feature_shape == (3,)


@pytest.mark.parametrize("bad", [np.zeros(3, dtype=np.complex64), np.array(["a"]),
                                 np.zeros(2, dtype="datetime64[s]"), np.zeros(2, dtype=np.uint32)])
def test_unsupported_dtypes_are_type_errors(bad):
    with pytest.raises(TypeError, match="is not supported"):
        la.LoDTensor(bad)


def test_rank0_rejected():
    with pytest.raises(ValueError, match="rank >= 1"):
        la.LoDTensor(np.float32(3))


def test_properties():
    y = _y()
    assert y.lod_level == 2 and len(y) == 2
    assert y.num_sequences() == 2 and y.num_sequences(1) == 3 and y.num_sequences(-1) == 3
    assert [o.tolist() for o in y.offsets] == [[0, 2, 3], [0, 2, 4, 7]]
    assert [l.tolist() for l in y.lengths] == [[2, 1], [2, 2, 3]]
    assert y.feature_shape == (2,) and y.ndim == 2
    assert y.place == la.CPUPlace() and repr(y.place) == "Place(cpu)"
    assert all(o.dtype == np.int64 and not o.flags.writeable for o in y.offsets)
    with pytest.raises(IndexError, match="level 5 is out of range"):
        y.num_sequences(5)
    with pytest.raises(ValueError, match="no LoD levels"):
        la.LoDTensor(np.arange(3)).num_sequences()


def test_nbytes_counts_data_and_offsets(backend):
    # 7 rows of 2 int64 values, then 3 + 4 int64 offsets
    assert on_backend(_y(), backend).nbytes == 7 * 2 * 8 + (3 + 4) * 8
    half = la.LoDTensor(np.zeros((5, 3), np.float16), lengths=[[2, 0, 3]])
    assert on_backend(half, backend).nbytes == 5 * 3 * 2 + 4 * 8
    assert on_backend(la.LoDTensor(np.zeros(4, np.int8)), backend).nbytes == 4
    flags = la.LoDTensor(np.zeros((0, 9), bool), lod=[[0, 0, 0]])
    assert on_backend(flags, backend).nbytes == 3 * 8
    strided = la.LoDTensor(np.zeros((10, 4))[::2, 1:3], lengths=[[5]])
    assert strided.nbytes == 5 * 2 * 8 + 2 * 8  # the tensor's own values, not the base's
    assert la.LoDTensor().nbytes == 0


def test_offsets_are_read_only():
    y = _y()
    with pytest.raises(ValueError, match="read-only"):
        y.offsets[0][1] = 5


# ---------------------------------------------------------------- views and iteration
def test_index_drops_a_level_and_shares_memory():
    y = _y()
    first, second = y[0], y[1]
    assert first.lod() == [[0, 2, 4]] and second.lod() == [[0, 3]]
    np.testing.assert_array_equal(second.data, np.arange(8, 14).reshape(3, 2))
    assert np.shares_memory(first.data, y.data) and np.shares_memory(second.data, y.data)
    assert y[-1].equals(second)
    assert y[0][1].lod() == [] and y[0][1].shape() == [2, 2]
    np.testing.assert_array_equal(y[1][0].data, [[8, 9], [10, 11], [12, 13]])


def test_slices_keep_levels():
    y = _y()
    s = y[1:]
    assert s.lod() == [[0, 1], [0, 3]] and np.shares_memory(s.data, y.data)
    assert y[0:0].lod() == [[0], [0]] and y[0:0].shape() == [0, 2]
    assert y[:].equals(y)
    assert y[::-1].lod() == [[0, 1, 3], [0, 3, 5, 7]]
    np.testing.assert_array_equal(y[::-1].data, np.concatenate([y.data[4:], y.data[:4]]))


def test_take_and_masks():
    y = _y()
    swapped = y.take([1, 0])
    assert swapped.lod() == [[0, 1, 3], [0, 3, 5, 7]]
    np.testing.assert_array_equal(swapped.data, np.concatenate([y.data[4:], y.data[:4]]))
    first = y[np.array([True, False])]
    assert first.lod() == [[0, 2], [0, 2, 4]]
    np.testing.assert_array_equal(first.data, y.data[:4])
    assert y.take([1, 1]).lod() == [[0, 1, 2], [0, 3, 6]]
    np.testing.assert_array_equal(y.take([1, 1]).data, np.concatenate([y.data[4:]] * 2))
    assert y.take([]).lod() == [[0], [0]]
    with pytest.raises(IndexError, match="index 2 at position 1 is out of range"):
        y.take([0, 2])
    with pytest.raises(IndexError, match="boolean mask must have shape"):
        y[np.array([True])]
    with pytest.raises(TypeError, match="must be integers"):
        y.take([0.5])


def test_index_errors():
    y = _y()
    with pytest.raises(IndexError, match="index 2 is out of range for a LoDTensor of 2 sequences"):
        y[2]
    with pytest.raises(IndexError, match="index -3"):
        y[-3]
    with pytest.raises(TypeError, match="indices must be integers"):
        y["a"]


def test_plain_tensor_indexing_and_iteration():
    p = la.LoDTensor(np.arange(6).reshape(3, 2))
    assert len(p) == 3
    np.testing.assert_array_equal(p[1], [2, 3])
    assert p[1:].shape() == [2, 2]
    assert [r.tolist() for r in p] == [[0, 1], [2, 3], [4, 5]]


def test_iteration_yields_sequences():
    y = _y()
    assert [s.lod() for s in y] == [[[0, 2, 4]], [[0, 3]]]


def test_zero_sequence_and_all_empty_tensors():
    z = la.LoDTensor(np.zeros((0, 3), dtype=np.float32), [[0]])
    assert len(z) == 0 and list(z) == [] and z.to_list() == []
    e = la.LoDTensor(np.zeros((0,), dtype=np.int8), lengths=[[2, 0], [0, 0]])
    assert e.to_list() == [[[], []], []]
    assert e[0].lod() == [[0, 0, 0]] and e[1].lod() == [[0]]
    assert la.from_list(e.to_list(), dtype="int8", lod_level=2).equals(e)


def test_offsets_past_2_31():
    # A zero-width feature axis gives 2**31 + 10 rows without memory: offsets must be int64.
    n = 2**31 + 10
    t = la.LoDTensor(np.empty((n, 0), dtype=np.float32), lengths=[[2**31, 10]])
    assert t.lod() == [[0, 2**31, n]]
    assert t[1].shape() == [10, 0] and t[0].shape() == [2**31, 0]
    with pytest.raises(LoDError, match=f"ends at {n - 1} but the data has {n} rows"):
        la.LoDTensor(np.empty((n, 0), dtype=np.float32), lod=[[0, 2**31 + 2, n - 1]])


# ---------------------------------------------------------------- lists
def test_to_list_and_from_list():
    y = _y()
    assert y.to_list() == [[[[0, 1], [2, 3]], [[4, 5], [6, 7]]], [[[8, 9], [10, 11], [12, 13]]]]
    back = la.from_list(y.to_list(), dtype=y.dtype, lod_level=2)
    assert back.equals(y)
    assert la.from_list([[1, 2], [3]]).lod() == [[0, 2, 3]]
    assert la.from_list([1, 2, 3]).lod_level == 0
    with pytest.raises(ValueError, match="do not share one shape"):
        la.from_list([[[1, 2]], [[3]]], lod_level=1)
    with pytest.raises(ValueError, match=r"expected a list at depth 1 \(position \[0, 0\]\)"):
        la.from_list([[1, 2]], lod_level=2)
    with pytest.raises(TypeError, match="must be a list"):
        la.from_list(3)


@given(lod_tensors())
def test_hypothesis_to_list_from_list_round_trip(t):
    back = la.from_list(t.to_list(), dtype=t.dtype, lod_level=t.lod_level)
    if t.data.shape[0] == 0:  # no rows: the feature shape is not in the lists
        assert back.lod() == t.lod()
    else:
        assert back.equals(t)


@given(st.integers(1, 3).flatmap(lambda n: lod_lengths(n)))
def test_hypothesis_lengths_offsets_round_trip(lengths_rows):
    lengths, rows = lengths_rows
    t = la.LoDTensor(np.zeros(rows), lengths=lengths)
    assert t.recursive_sequence_lengths() == lengths
    u = la.LoDTensor(np.zeros(rows), lod=t.lod())
    assert u.recursive_sequence_lengths() == lengths
    assert all(o[0] == 0 and np.all(np.diff(o) >= 0) for o in t.offsets)


# ---------------------------------------------------------------- NumPy protocol
def test_array_protocol():
    y = _y()
    assert np.asarray(y) is y.data
    a = np.array(y)
    assert not np.shares_memory(a, y.data)
    np.testing.assert_array_equal(np.asarray(y, dtype=np.float32), y.data.astype(np.float32))
    assert y.__array__(copy=False) is y.data
    with pytest.raises(ValueError, match="needs a copy"):
        y.__array__(dtype=np.float32, copy=False)
    assert not np.shares_memory(y.__array__(copy=True), y.data)
    assert y.numpy() is y.data


def test_equals_is_exact():
    a = la.LoDTensor(np.array([1.0, np.nan]), [[0, 2]])
    assert a.equals(la.LoDTensor(np.array([1.0, np.nan]), [[0, 2]]))
    assert not a.equals(la.LoDTensor(np.array([1.0, np.nan]), [[0, 1, 2]]))
    assert not a.equals(la.LoDTensor(np.array([1.0, np.nan], dtype=np.float32), [[0, 2]]))
    assert not a.equals(np.array([1.0, np.nan]))
    assert (a == 3) is False
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_repr():
    assert repr(_y()) == ("LoDTensor(lod=[[0, 2, 3], [0, 2, 4, 7]], shape=(7, 2), dtype=int64, "
                          "place=Place(cpu))")


# ---------------------------------------------------------------- places
def test_cpu_place_round_trips():
    y = _y()
    assert y.to("cpu") is y and y.cpu() is y and y.to(la.CPUPlace()) is y
    with pytest.raises(TypeError, match="place must be"):
        y.to("tpu")


def test_cuda_place_checks_device_id():
    with pytest.raises(TypeError, match="device_id must be an integer"):
        la.CUDAPlace("0")
    with pytest.raises(ValueError, match="device_id must be >= 0"):
        la.CUDAPlace(-1)


def test_cuda_place_says_what_is_missing():
    reason = cuda_unavailable_reason()
    if reason is None:  # a usable GPU: the places are made, nothing is missing
        assert la.CUDAPlace(0).is_cuda and not la.CUDAPinnedPlace().is_cuda
        return
    match = "needs CuPy" if "CuPy" in reason else "needs a CUDA GPU"
    with pytest.raises(la.BackendError, match=match):
        la.CUDAPlace(0)
    with pytest.raises(la.BackendError, match=match):
        _y().cuda()
    with pytest.raises(la.BackendError, match=match):
        la.CUDAPinnedPlace()


@cuda_only
def test_cuda_round_trip(backend):
    import cupy

    y = _y()
    g = y.cuda()
    assert isinstance(g.data, cupy.ndarray) and g.place == la.CUDAPlace(0)
    assert g.lod() == y.lod() and g.cpu().equals(y)
    np.testing.assert_array_equal(np.array(g), y.data)
    with pytest.raises(ValueError, match="without a copy"):
        g.__array__(copy=False)
    assert g._device_offsets_for(0) is g._device_offsets_for(0)
    p = y.to(la.CUDAPinnedPlace())
    assert isinstance(p.data, np.ndarray) and p.equals(y)
    t = la.LoDTensor()
    t.set(y.data, la.CUDAPlace(0))
    assert isinstance(t.data, cupy.ndarray)
    assert g.__cuda_array_interface__["shape"] == (7, 2)


# ---------------------------------------------------------------- build and import hygiene
def test_compiled_kernels_are_loaded():
    import importlib.machinery

    from lodarrow._ext import lod_utils

    assert lod_utils.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert type(lod_utils.first_bad_offset).__name__ in ("cython_function_or_method",
                                                          "builtin_function_or_method")


#: Symbols a module compiled with OpenMP imports from its runtime: GNU libgomp, LLVM libomp,
#: MSVC's vcomp.
_OPENMP_RUNTIME_SYMBOLS = (b"GOMP_parallel", b"__kmpc_fork_call", b"_vcomp_fork")


def test_openmp_enabled_matches_the_build():
    """openmp_enabled() says what the compiled kernels do: True exactly when they call into
    an OpenMP runtime (read from the extension files, not from lodarrow)."""
    import importlib
    import importlib.machinery
    import pkgutil

    import lodarrow._ext

    linked = {}
    for info in pkgutil.iter_modules(lodarrow._ext.__path__):
        module = importlib.import_module(f"lodarrow._ext.{info.name}")
        if module.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            with open(module.__file__, "rb") as fh:
                blob = fh.read()
            linked[info.name] = any(sym in blob for sym in _OPENMP_RUNTIME_SYMBOLS)
    assert len(linked) >= 2, linked
    assert la.openmp_enabled() is any(linked.values()), linked


def test_import_does_not_pull_optional_modules():
    code = ("import sys, lodarrow; bad = [m for m in ('pandas', 'cupy', 'pyarrow.parquet', "
            "'polars', 'matplotlib', 'rich') if m in sys.modules]; print(bad); "
            "sys.exit(1 if bad else 0)")
    proc = run_python(["-c", code])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("offsets", [None, [np.array([0, 1, 3], dtype=np.int64)]])
def test_derive_sets_every_slot_from_trusted_sets(offsets):
    """``_derive`` repeats ``_from_trusted``'s slot set-up for speed: a slot added to one and
    not the other would leave operator results half-built."""
    slots = [s for s in la.LoDTensor.__slots__ if s != "__weakref__"]
    t = la.LoDTensor(np.arange(3.0), lod=[[0, 1, 3]])
    derived = t._derive(np.zeros(3), offsets)
    trusted = la.LoDTensor._from_trusted(np.zeros(3), [np.array([0, 1, 3], dtype=np.int64)])
    for slot in slots:
        assert hasattr(trusted, slot), slot
        assert hasattr(derived, slot), slot
        assert type(getattr(derived, slot)) is type(getattr(trusted, slot)), slot
    assert derived.lod() == trusted.lod() == [[0, 1, 3]]


# ---------------------------------------------------------------- no hang
def test_huge_lod_level_fails_at_once():
    from conftest import run_python

    code = ("import lodarrow as la\n"
            "try:\n"
            "    la.from_list([[1]], lod_level=2**62)\n"
            "except ValueError as e:\n"
            "    print('ValueError:', e)\n")
    proc = run_python(["-c", code], timeout=60)  # a hang is a subprocess.TimeoutExpired
    assert proc.returncode == 0, proc.stderr
    assert "lod_level=4611686018427387904 is deeper than nested" in proc.stdout


def test_lod_level_deeper_than_the_lists_still_works_when_all_empty():
    t = la.from_list([], lod_level=3)
    assert t.lod() == [[0], [0], [0]] and t.data.shape == (0,)
    assert la.from_list([[]], lod_level=3).lod() == [[0, 0], [0], [0]]
    with pytest.raises(ValueError, match=r"expected a list at depth 2 \(position \[0, 0, 0\]\)"):
        la.from_list([[[1]]], lod_level=3)


# ---------------------------------------------------------------- messages that say what to do
@pytest.mark.parametrize("nested, where", [
    ([[1, None], [3]], r"None at position \[0, 1\] is not a number"),
    ([[1, 2], [3, "a"]], r"'a' at position \[1, 1\] is not a number"),
    ([[[1.0], [None]]], r"None at position \[0, 1, 0\] is not a number"),
    ([[1, 2**70]], r"1180591620717411303424 at position \[0, 1\] is too large for int64"),
])
def test_from_list_names_the_bad_element(nested, where):
    with pytest.raises(TypeError, match=where):
        la.from_list(nested)


@pytest.mark.parametrize("dtype, match", [("foo", "dtype must be a NumPy dtype"),
                                          ("complex64", "dtype complex64 is not supported")])
def test_from_list_bad_dtype(dtype, match):
    with pytest.raises(TypeError, match=match):
        la.from_list([[1]], dtype=dtype)


def test_from_list_lod_level_must_be_an_integer():
    with pytest.raises(TypeError, match="lod_level must be an integer, got str"):
        la.from_list([[1]], lod_level="1")


@pytest.mark.parametrize("kw", ["lod", "lengths"])
def test_length_too_large_for_int64(kw):
    level = [0, 2**70] if kw == "lod" else [1, 2**70]
    with pytest.raises(LoDError, match=rf"{kw}\[0\]: value {2**70} at position 1 is too large "
                                       r"for int64"):
        la.LoDTensor(np.zeros(1), **{kw: [level]})


@pytest.mark.parametrize("lengths, pos", [([2**62, 2**62], 1), ([1, 2**63 - 1, 5], 1),
                                          ([3, 2**62, 2**62 - 1, 2**62], 2)])
def test_length_sum_overflow_says_overflow(lengths, pos):
    with pytest.raises(LoDError, match=rf"lengths\[0\] sums past int64 \(overflow\): the lengths "
                                       rf"up to position {pos}"):
        la.LoDTensor(np.zeros(1), lengths=[lengths])
    with pytest.raises(LoDError, match="overflow"):
        la.create_lod_tensor(np.zeros((1, 1)), [lengths], la.CPUPlace())


def test_length_sum_up_to_int64_max_is_no_overflow():
    from lodarrow._validation import lengths_to_offsets

    (offsets,) = lengths_to_offsets([[2**62, 2**62 - 1, 0]])
    assert offsets.tolist() == [0, 2**62, 2**63 - 1, 2**63 - 1]


@pytest.mark.parametrize("kw, flat", [("lod", [0, 2, 5]), ("lengths", [2, 3]),
                                      ("lod", np.array([0, 2, 5]))])
def test_flat_level_suggests_nesting(kw, flat):
    shown = ", ".join(str(int(v)) for v in flat)
    with pytest.raises(ValueError, match=re.escape(f"pass {kw}=[[{shown}]]")):
        la.LoDTensor(np.zeros(5), **{kw: flat})


def test_flat_level_in_set_lod_and_create_lod_tensor():
    t = la.LoDTensor()
    t.set(np.zeros((5, 1)), la.CPUPlace())
    with pytest.raises(ValueError, match=re.escape("pass lod=[[0, 2, 5]]")):
        t.set_lod([0, 2, 5])
    with pytest.raises(ValueError, match=re.escape("pass recursive_seq_lens=[[2, 3]]")):
        la.create_lod_tensor(np.zeros((5, 1)), [2, 3], la.CPUPlace())


@pytest.mark.parametrize("op", [lambda x: la.sequence_pool(x, "sum"),
                                lambda x: la.sequence_reverse(x)])
def test_ragged_python_list_points_to_from_list(op):
    with pytest.raises(ValueError, match=r"is a ragged list .* lodarrow\.from_list"):
        op([[1.0, 2.0], [3.0]])


def test_ragged_data_points_to_from_list():
    with pytest.raises(TypeError, match="use lodarrow.from_list"):
        la.LoDTensor([[1.0, 2.0], [3.0]])


def test_to_pandas_without_pandas_names_the_extra():
    from conftest import run_python

    code = ("import sys\n"
            "sys.modules['pandas'] = None  # as if pandas were not installed\n"
            "import numpy as np, lodarrow as la\n"
            "try:\n"
            "    la.LoDTensor(np.arange(3), [[0, 3]]).to_pandas()\n"
            "except ModuleNotFoundError as e:\n"
            "    print(type(e).__name__, e.name, e)\n")
    proc = run_python(["-c", code], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ModuleNotFoundError pandas ")
    assert "pip install -e '.[pandas]'" in proc.stdout
