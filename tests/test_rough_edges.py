"""Rough edges a new user hits: no hang, no unchecked structure, errors that say what to do."""

import re
import traceback

import numpy as np
import pytest

import lodarrow as la
from lodarrow import LoDError


# ---------------------------------------------------------------- public exception names
def _formatted(exc):
    return "".join(traceback.format_exception_only(type(exc), exc))


@pytest.mark.parametrize("call, bases", [
    (lambda: la.LoDTensor(np.zeros(1), lengths=[[-1]]), (LoDError, TypeError)),
    (lambda: la.create_lod_tensor([[1, 2], [3]], [[1, 2]], la.CPUPlace()),
     (LoDError, AssertionError)),
])
def test_private_error_classes_show_public_names(call, bases):
    with pytest.raises(bases[0]) as info:
        call()
    exc = info.value
    assert all(isinstance(exc, b) for b in bases)  # either except clause still catches it
    shown = _formatted(exc)
    assert shown.startswith("lodarrow.LoDError: "), shown
    assert "_Negative" not in shown and "_Length" not in shown
    assert repr(exc).startswith("LoDError(")


def test_argument_error_shows_as_type_error():
    with pytest.raises(TypeError) as info:
        la.lod_reset(la.LoDTensor(np.zeros(2)))
    assert isinstance(info.value, ValueError)  # Paddle's Python layer raises ValueError
    assert _formatted(info.value).startswith("TypeError: lod_reset: y and target_lod")


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
    assert "pip install 'lodarrow[pandas]'" in proc.stdout


# ---------------------------------------------------------------- structure never read unchecked
def _arrow_with_offsets(offsets, n_values=3):
    import pyarrow as pa

    off = np.asarray(offsets, dtype=np.int64)
    return pa.Array.from_buffers(pa.large_list(pa.int64()), off.shape[0] - 1,
                                 [None, pa.py_buffer(off)],
                                 children=[pa.array(np.arange(n_values, dtype=np.int64))])


_READERS = {
    "to_list": lambda t: t.to_list(),
    "lengths": lambda t: t.lengths,
    "offsets": lambda t: t.offsets,
    "lod": lambda t: t.lod(),
    "recursive_sequence_lengths": lambda t: t.recursive_sequence_lengths(),
    "getitem": lambda t: t[0],
    "slice": lambda t: t[0:1],
    "take": lambda t: t.take([0]),
    "np.array": lambda t: np.array(t),
    "numpy": lambda t: t.numpy(),
    "data": lambda t: t.data,
    "iter": lambda t: [s for s in t],
    "list": lambda t: list(t),
    "len": lambda t: len(t),
    "num_sequences": lambda t: t.num_sequences(),
    "to_arrow": lambda t: t.to_arrow(),
    "operator": lambda t: la.sequence_pool(t, "sum"),
}


@pytest.mark.parametrize("reader", list(_READERS))
@pytest.mark.parametrize("offsets", [[0, 3, 1], [0, 2, 1, 3]])
def test_decreasing_arrow_offsets_are_never_read(reader, offsets):
    t = la.from_arrow(_arrow_with_offsets(offsets))  # O(1): accepted, the scan is deferred
    with pytest.raises(LoDError, match=r"must be non-decreasing; first violation at position"):
        _READERS[reader](t)
    # the verdict is cached and every path keeps refusing
    with pytest.raises(LoDError, match="non-decreasing"):
        t.lod()
    assert t.has_valid_recursive_sequence_lengths() is False
    assert "invalid" in repr(t) and "invalid" in str(t)  # printing never raises


def test_the_scan_runs_once(monkeypatch):
    import lodarrow._tensor as tensor_module

    calls = []
    real = tensor_module.lod_problem
    monkeypatch.setattr(tensor_module, "lod_problem",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    t = la.from_arrow(_arrow_with_offsets([0, 1, 3]))
    assert calls == []  # conversion does not scan
    assert t.lod() == [[0, 1, 3]] and t.to_list() == [[0], [1, 2]] and len(t) == 2
    assert t[1].to_list() == [1, 2] and la.sequence_pool(t, "sum").data.tolist() == [0, 3]
    assert len(calls) == 1
    bad = la.from_arrow(_arrow_with_offsets([0, 3, 1]))
    for _ in range(3):
        with pytest.raises(LoDError):
            bad.to_list()
    assert len(calls) == 2


def test_a_valid_arrow_tensor_reads_normally():
    t = la.from_arrow(_arrow_with_offsets([0, 2, 2, 3]))
    assert t.lod() == [[0, 2, 2, 3]] and t.recursive_sequence_lengths() == [[2, 0, 1]]
    assert [s.to_list() for s in t] == [[0, 1], [], [2]]
    assert np.array(t).tolist() == [0, 1, 2] and t.lengths[0].tolist() == [2, 0, 1]


def test_set_lod_then_set_keeps_paddle_behaviour_but_refuses_reads():
    t = la.LoDTensor()
    t.set(np.arange(5.0).reshape(5, 1), la.CPUPlace())
    t.set_lod([[0, 2, 5]])
    t.set(np.zeros((4, 1)), la.CPUPlace())
    assert t.lod() == [[0, 2, 5]]  # Paddle: lod() reports the LoD as set
    assert t.recursive_sequence_lengths() == [[2, 3]]
    assert t.has_valid_recursive_sequence_lengths() is False
    assert np.array(t).shape == (4, 1)  # Paddle: the data as set
    for read in (lambda: t.to_list(), lambda: t[1], lambda: list(t), lambda: t.take([0]),
                 lambda: t[0:1]):
        with pytest.raises(LoDError, match="ends at 5 but the data has 4 rows"):
            read()
