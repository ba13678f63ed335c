"""The offsets scan (``lod_utils.first_bad_offset``): blocks, threads, and the errors built on it.

The scan tests blocks of ``BLOCK`` offsets branch-free and splits large arrays into one part
per thread, so the bad positions that matter are the block and part boundaries.  Every case
is checked against a NumPy reference, for the AVX2 scan (where the CPU has it), the portable
one, and one to four threads.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lodarrow as la
from lodarrow import LoDError
from lodarrow._threads import PARALLEL_MIN_WORK
from lodarrow._ext import lod_utils
from lodarrow._validation import first_bad_offset, lengths_to_offsets

BLOCK = 4096  # LA_SCAN_BLOCK in _ext/include/lod_utils.h: block b tests [1 + b*BLOCK, ...)
I64 = np.iinfo(np.int64)
SCANS = [lod_utils.first_bad_offset, lod_utils.first_bad_offset_portable]
THREADS = [1, 2, 3, 4]


def reference(off):
    """First position breaking "starts at 0, non-decreasing" (0 for empty), or -1."""
    if off.shape[0] == 0 or off[0] != 0:
        return 0
    down = np.flatnonzero(off[1:] < off[:-1])  # not np.diff(off) < 0: the diff wraps at the ends
    return int(down[0]) + 1 if down.size else -1


def increasing(n, seed=0):
    rng = np.random.default_rng(seed)
    off = np.zeros(n, dtype=np.int64)
    if n > 1:
        off[1:] = np.cumsum(rng.integers(0, 5, n - 1))
    return off


def break_at(off, positions):
    """``off`` with ``off[p] < off[p - 1]`` at every ``p`` (and nowhere else new)."""
    off = off.copy()
    for p in sorted(positions, reverse=True):
        off[p:] += 10  # keep what follows p above it ...
        off[p] = off[p - 1] - 1  # ... and drop p below its predecessor
    return off


def check_all(off):
    expected = reference(off)
    for scan in SCANS:
        for threads in THREADS:
            assert scan(off, threads) == expected, (scan.__name__, threads, expected)
    assert first_bad_offset(off) == expected


SIZES = [2, 3, BLOCK - 1, BLOCK, BLOCK + 1, BLOCK + 2, 2 * BLOCK + 1, 2 * BLOCK + 2,
         3 * BLOCK + 7, PARALLEL_MIN_WORK - 1, PARALLEL_MIN_WORK, PARALLEL_MIN_WORK + 1,
         2 * PARALLEL_MIN_WORK + 3]


@pytest.mark.parametrize("n", [0, 1, *SIZES])
def test_valid_offsets_pass(n):
    check_all(increasing(n))


@pytest.mark.parametrize("n", SIZES)
def test_every_boundary_position(n):
    """Bad at 1, at each block's first/last offset, at the halves and thirds, at the end."""
    candidates = {1, 2, n - 1, n // 2, n // 2 + 1, n // 3, 2 * n // 3 + 1}
    for b in range(1, n, BLOCK):
        candidates |= {b - 1, b, b + 1, b + BLOCK - 1}
    base = increasing(n, seed=n)
    for p in sorted(c for c in candidates if 1 <= c < n):
        check_all(break_at(base, [p]))


@pytest.mark.parametrize("n", [BLOCK + 2, 3 * BLOCK + 7, 2 * PARALLEL_MIN_WORK + 3])
def test_several_bad_blocks_report_the_first(n):
    base = increasing(n, seed=1)
    for positions in ([n - 1, 1], [n // 2 + 5, n - 2], [BLOCK + 1, BLOCK, n - 1],
                      [3, 4, 5, n // 4, n // 2, 3 * n // 4]):
        off = break_at(base, positions)
        assert reference(off) == min(positions)
        check_all(off)


@pytest.mark.parametrize("n", [1, BLOCK + 2, PARALLEL_MIN_WORK + 1])
def test_start_other_than_zero_is_position_0(n):
    for first in (1, -1, I64.min, I64.max):
        off = increasing(n)
        off[0] = first
        check_all(off)  # 0 however the rest looks


def test_extreme_values_compare_exactly():
    """The portable scan spells ``<`` as integer arithmetic: it must not wrap at the ends."""
    for seq, expected in (([0, I64.max, I64.min], 2), ([0, I64.max, I64.max], -1),
                          ([0, -1, I64.max], 1), ([0, I64.min, I64.max], 1),
                          ([0, 1, I64.max, I64.max - 1], 3), ([0, 0, 0], -1)):
        for pad in (0, BLOCK, PARALLEL_MIN_WORK):  # the pair inside a later block / part
            off = np.array([0] * pad + seq, dtype=np.int64)
            assert reference(off) == (expected + pad if expected > 0 else expected)
            check_all(off)


@given(hnp.arrays(np.int64, st.integers(0, 3 * BLOCK), elements=st.integers(I64.min, I64.max)),
       st.booleans())
def test_matches_reference_on_any_int64(off, sort):
    if sort:  # valid offsets (from 0, non-decreasing), to reach deep into the array
        off = np.maximum(np.sort(off), 0)
        off[:1] = 0
    check_all(off)


@given(st.integers(1, 3 * BLOCK), st.lists(st.integers(1, 3 * BLOCK), max_size=4),
       st.integers(0, 2**32))
def test_matches_reference_with_drops(n, drops, seed):
    base = increasing(n, seed)
    off = break_at(base, {p for p in drops if p < n})
    check_all(off)


# ------------------------------------------------------------------ the errors built on it
@pytest.mark.parametrize("p", [2, BLOCK, BLOCK + 1, PARALLEL_MIN_WORK + 17])
def test_constructor_names_level_and_position(p):
    n_seq = 2 * PARALLEL_MIN_WORK
    # Strictly increasing, so the dropped offset stays >= 0 (a negative one has its own error).
    off = break_at(increasing(n_seq + 1, seed=p) + np.arange(n_seq + 1), [p])
    data = np.zeros(int(off[-1]))
    msg = (rf"invalid LoD: lod\[0\] must be non-decreasing; first violation at position {p} "
           rf"\({off[p - 1]} > {off[p]}\)")
    # int64 arrays: built in O(1), scanned at the first read (docs/data-model.md#lod-rules)
    t = la.LoDTensor(data, lod=[off])
    deferred = msg + r" \(offsets given as arrays or taken from Arrow are checked when first"
    with pytest.raises(la.LoDError, match=deferred):
        t.lod()
    outer = np.array([0, n_seq], dtype=np.int64)
    with pytest.raises(la.LoDError, match=msg.replace(r"lod\[0\]", r"lod\[1\]")):
        la.LoDTensor(data, lod=[outer, off]).lod()
    with pytest.raises(la.LoDError, match=msg):  # a list is converted, so checked at once
        la.LoDTensor(data, lod=[off.tolist()])
    t = la.LoDTensor(data[:0])
    with pytest.raises(la.LoDError, match=msg):
        t.set_lod([off])


def test_negative_value_is_still_named_as_such():
    """A negative offset is reported as one (before any other problem of a later level)."""
    off = increasing(PARALLEL_MIN_WORK + 5)
    off[PARALLEL_MIN_WORK] = -3
    with pytest.raises(la.LoDError, match=rf"lod\[0\] has a negative value -3 at position "
                                          rf"{PARALLEL_MIN_WORK}"):
        la.LoDTensor(np.zeros(int(off[-1])), lod=[off]).lod()  # scanned at the first read
    with pytest.raises(la.LoDError, match=rf"lod\[0\] has a negative value -3 at position "
                                          rf"{PARALLEL_MIN_WORK}"):
        la.LoDTensor(np.zeros(int(off[-1])), lod=[off.tolist()])
    with pytest.raises(la.LoDError, match=r"lod\[1\] has a negative value -3"):
        la.LoDTensor(np.zeros(int(off[-1])), lod=[[0, 5, 1], off])


@pytest.mark.parametrize("read", [
    lambda t: t.lod(), lambda t: t.recursive_sequence_lengths(), lambda t: t[0],
    lambda t: t.to_list(), lambda t: la.sequence_pool(t, "sum"), lambda t: t.to_arrow(),
    lambda t: la.sequence_reverse(t),
])
def test_offsets_given_as_arrays_are_never_read_unchecked(read):
    """O(1) construction: every path that reads the structure runs the deferred scan first."""
    off = np.array([0, 3, 1, 4], dtype=np.int64)
    t = la.LoDTensor(np.arange(4.0), lod=[off])       # no error yet: O(1) bounds hold
    assert "<invalid>" in repr(t)
    assert not t.has_valid_recursive_sequence_lengths()
    with pytest.raises(la.LoDError, match=r"lod\[0\] must be non-decreasing; first violation "
                                          r"at position 2 \(3 > 1\)"):
        read(t)


def test_offsets_given_as_arrays_keep_the_o1_checks():
    """The checks that cost O(1) still run at construction."""
    with pytest.raises(la.LoDError, match=r"lod\[0\] must start at 0"):
        la.LoDTensor(np.arange(4.0), lod=[np.array([1, 4], dtype=np.int64)])
    with pytest.raises(la.LoDError, match=r"ends at 3 but the data has 4 rows"):
        la.LoDTensor(np.arange(4.0), lod=[np.array([0, 3], dtype=np.int64)])
    with pytest.raises(la.LoDError, match=r"lod\[0\] ends at 1 but level 1 has 2 sequences"):
        la.LoDTensor(np.arange(4.0), lod=[np.array([0, 1], dtype=np.int64),
                                          np.array([0, 2, 4], dtype=np.int64)])


def test_valid_lod_does_not_look_at_signs():
    t = la.LoDTensor(np.zeros(7), lod=[[0, 2, 2], [0, 3, 7]])
    assert t.lod() == [[0, 2, 2], [0, 3, 7]]


def test_lengths_negative_comes_before_overflow():
    big = I64.max // 2 + 1
    with pytest.raises(la.LoDError, match=r"lengths\[0\] has a negative length -1 at position 3"):
        lengths_to_offsets([[big, big, 1, -1]], "lengths")
    with pytest.raises(la.LoDError, match=r"lengths\[0\] sums past int64 \(overflow\): the "
                                          r"lengths up to position 1 add up"):
        lengths_to_offsets([[big, big, 1]], "lengths")
    (off,) = lengths_to_offsets([[big - 1, big]], "lengths")
    assert off.tolist() == [0, big - 1, I64.max]


@given(st.lists(st.integers(0, 2**62), max_size=20))
def test_lengths_kernel_matches_cumsum(lengths):
    arr = np.array(lengths, dtype=np.int64)
    out = np.empty(arr.shape[0] + 1, dtype=np.int64)
    bad, overflow = lod_utils.lengths_to_offsets(arr, out)
    sums = np.cumsum([0] + [int(x) for x in lengths], dtype=object)
    over = [i for i, s in enumerate(sums[1:]) if s > I64.max]
    assert bad == -1
    assert overflow == (over[0] if over else -1)
    if not over:
        assert out.tolist() == [int(s) for s in sums]


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
    """A large array's offsets are scanned once, at the first read; a small array's during
    the conversion (cheaper than deferring); a small bad one is left to the first read, which
    names the problem, once."""
    import lodarrow._interop._arrow as arrow_module
    import lodarrow._tensor as tensor_module

    calls = []
    real = tensor_module.lod_problem
    monkeypatch.setattr(tensor_module, "lod_problem",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    n = arrow_module.EAGER_SCAN_MAX
    big = la.from_arrow(_arrow_with_offsets(np.arange(n + 1), n_values=n))
    assert calls == []  # conversion does not scan a large array
    assert big._unchecked
    assert len(big) == n and big.lod()[0][-1] == n and big[3].to_list() == [3]
    assert la.sequence_pool(big, "sum").data[:3].tolist() == [0, 1, 2]
    assert len(calls) == 1 and not big._unchecked
    t = la.from_arrow(_arrow_with_offsets([0, 1, 3]))
    assert not t._unchecked  # scanned while converting: valid
    assert t.lod() == [[0, 1, 3]] and t.to_list() == [[0], [1, 2]] and len(t) == 2
    assert t[1].to_list() == [1, 2] and la.sequence_pool(t, "sum").data.tolist() == [0, 3]
    assert len(calls) == 1
    bad = la.from_arrow(_arrow_with_offsets([0, 3, 1]))  # converting never raises
    assert bad._unchecked
    for _ in range(3):
        with pytest.raises(LoDError, match=r"non-decreasing; first violation at position 2 "
                                           r"\(3 > 1\).*checked when first read"):
            bad.to_list()
    assert len(calls) == 2


def test_the_eager_scan_matches_the_deferred_one():
    """Every small array the conversion finds in order passes the full LoD check too (decode
    makes the levels meet and the last end at the data's rows), and one it does not is
    refused at the first read."""
    import pyarrow as pa

    from lodarrow._validation import lod_problem

    rng = np.random.default_rng(7)
    seen = []  # whether each converted array was left to the first read
    for k in range(300):
        depth = 1 + k % 3
        arr = pa.array(np.arange(12, dtype=np.float32))
        for _ in range(depth):
            n = int(rng.integers(1, 6))
            cuts = np.sort(rng.integers(0, len(arr) + 1, n + 1))
            cuts[0], cuts[-1] = 0, len(arr)
            if k % 4 == 0 and n >= 2:  # a decreasing offset
                cuts[1], cuts[2] = max(cuts[1], cuts[2]), min(cuts[1], cuts[2])
                cuts[1] += cuts[1] == cuts[2]
            narrow = k % 2 == 1
            off = pa.py_buffer(cuts.astype(np.int32 if narrow else np.int64))
            typ = pa.list_(arr.type) if narrow else pa.large_list(arr.type)
            try:  # pyarrow checks the O(1) rules of each level
                arr = pa.Array.from_buffers(typ, n, [None, off], children=[arr])
            except pa.ArrowInvalid:
                break
            if k % 5 == 0 and len(arr) > 1:
                arr = arr.slice(1)
        else:
            try:
                t = la.from_arrow(arr)
            except ValueError:
                continue  # refused by the O(1) checks
            seen.append(t._unchecked)
            problem = lod_problem(list(t._offsets), t._data.shape[0])
            if not t._unchecked:
                assert problem is None, (k, arr)
            elif problem is not None:
                with pytest.raises(LoDError):
                    t.lod()
    assert len(seen) > 200 and 10 < sum(seen) < len(seen) - 10


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
