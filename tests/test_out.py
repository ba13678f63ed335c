"""``out=`` on every data-producing operator
(docs/operators.md#out-writing-into-a-preallocated-array).

Every case is an operator call built for a dtype and an input shape; the tests call it without
``out`` (the reference: the operators' own tests check that against NumPy) and with an ``out``
filled with garbage first, and compare bit for bit.
"""

import math
import re
import sys
import types

import numpy as np
import pytest

import lodarrow as la
from conftest import ALL_DTYPES, FLOAT_DTYPES, NUMERIC_DTYPES, on_backend, to_host

INTS = [d for d in NUMERIC_DTYPES if d not in FLOAT_DTYPES]

#: The input shapes: sequences with an empty one, no sequence at all, two LoD levels.
BASIC, ZERO, TWO = "basic", "zero-sequences", "two-levels"
_LODS = {BASIC: [[0, 2, 2, 5, 6]], ZERO: [[0]], TWO: [[0, 1, 1, 4], [0, 2, 2, 5, 6]]}


def _values(dtype, rows, fshape=()):
    """Small exact values of ``dtype`` (distinct enough to catch a misplaced row)."""
    v = np.arange(rows * math.prod(fshape)).reshape((rows, *fshape))
    v = (v * 7 + 3) % (2 if dtype == "bool" else 11)
    return v.astype(dtype)


def _tensor(dtype, shape=BASIC, fshape=(2,)):
    lod = _LODS[shape]
    return la.LoDTensor(_values(dtype, lod[-1][-1], fshape), lod=lod)


class Case:
    """``build(dtype, shape, backend)`` -> ``call(**kw)``; ``outputs`` results per call."""

    def __init__(self, name, build, dtypes=ALL_DTYPES, shapes=(BASIC, ZERO, TWO), outputs=1,
                 op=None):
        self.name, self.build, self.dtypes, self.shapes = name, build, dtypes, shapes
        self.outputs = outputs
        self.op = op or name.split("[")[0]  # the operator its messages name


def _on(obj, backend):
    return on_backend(obj, backend)


def _pool(pool_type, **kw):
    return lambda d, s, b: (lambda **o: la.sequence_pool(_on(_tensor(d, s), b), pool_type,
                                                         **kw, **o))


def _expand_rows(d, s, b):
    y = _on(_tensor("float32", s), b)
    x = _on(_values(d, y.lod()[-1].__len__() - 1, (3,)), b)
    return lambda **o: la.sequence_expand(x, y, **o)


def _expand_blocks(d, s, b):
    y = _on(la.LoDTensor(np.zeros(7 if s == BASIC else 0), lod=[[0, 3, 3, 7]] if s == BASIC
                         else [[0]]), b)
    x = _on(la.LoDTensor(_values(d, 6, (2,)), lod=[[0, 2, 2, 6]] if s == BASIC else [[0]])
            if s == BASIC else la.LoDTensor(_values(d, 0, (2,)), lod=[[0]]), b)
    return lambda **o: la.sequence_expand(x, y, ref_level=0, **o)


def _expand_as(d, s, b):
    y = _on(la.LoDTensor(np.zeros(_LODS[s][-1][-1]), lod=_LODS[s][-1:]), b)
    x = _on(_values(d, len(_LODS[s][-1]) - 1, (2, 2)), b)
    return lambda **o: la.sequence_expand_as(x, y, **o)


def _concat(d, s, b):
    a = _on(_tensor(d, s), b)
    lod = [list(lv) for lv in _LODS[s]]
    last = lod[-1]
    lod[-1] = [v * 2 for v in last]  # twice as long: other lengths, same sequence count
    c = _on(la.LoDTensor(_values(d, lod[-1][-1], (2,))[::-1].copy(), lod=lod), b)
    return lambda **o: la.sequence_concat([a, c, a], **o)


def _slice(d, s, b):
    x = _on(_tensor(d, s), b)
    n = len(_LODS[s][-1]) - 1
    off = _on(np.array([1, 0, 0, 0][:n], dtype=np.int64), b)
    length = _on(np.array([1, 0, 2, 1][:n], dtype=np.int64), b)
    return lambda **o: la.sequence_slice(x, off, length, **o)


def _column(d, s, b):
    return _on(_tensor(d, s, fshape=(1,)), b)


def _erase(d, s, b):
    x = _column(d, s, b)
    return lambda **o: la.sequence_erase(x, [3, 0], **o)


def _enumerate(d, s, b):
    x = _column(d, s, b)
    return lambda **o: la.sequence_enumerate(x, 3, pad_value=1, **o)


def _mask(d, s, b):
    lengths = _on(np.array([[3, 0], [1, 5], [-1, 2]][:0 if s == ZERO else 3]), b)
    return lambda **o: la.sequence_mask(lengths, maxlen=4 if s == ZERO else None, dtype=d, **o)


def _scatter(d, s, b):
    n = 0 if s == ZERO else 4
    x = _on(_values(d, n, (2, 3)), b)
    lod = [[0]] if s == ZERO else [[0, 2, 2, 5]]
    ids = _on(la.LoDTensor(np.array([0, 5, 2, 2, 4])[:lod[0][-1]].reshape(-1, 1), lod=lod), b)
    upd = _on(la.LoDTensor(np.ones((lod[0][-1], 1), bool), lod=lod), b)  # casts to any dtype
    return lambda **o: la.sequence_scatter(x, ids, upd, **o)


def _pad(d, s, b):
    x = _on(_tensor(d, s), b)
    return lambda **o: la.sequence_pad(x, np.zeros((), d), maxlen=4, **o)


def _unpad(d, s, b):
    n = len(_LODS[s][-1]) - 1
    x = _on(_values(d, n * 4, (2,)).reshape(n, 4, 2), b)
    length = _on(np.array([2, 0, 4, 1][:n], dtype=np.int64), b)
    return lambda **o: la.sequence_unpad(x, length, **o)


def _reshape(d, s, b):
    x = _on(_tensor(d, s, fshape=(4,)), b)
    return lambda **o: la.sequence_reshape(x, 2, **o)


def _conv(d, s, b):
    x = _on(_tensor(d, s, fshape=(2,)), b)
    w = _on(np.arange(18, dtype=np.float64).reshape(6, 3) / 4, b)
    return lambda **o: la.sequence_conv(x, w, bias=np.ones(3) if b == "cpu" else None, **o)


def _topk(d, s, b):
    if s == ZERO:
        x = la.LoDTensor(np.zeros(0, d), lod=[[0]])
        r = c = la.LoDTensor(np.zeros(0), lod=[[0]])
    else:  # sequences of 1 x 2 x 3, 2 x 0 x 3, 2 x 2 x 2 values (channel_num 2)
        x = la.LoDTensor(_values(d, 12 + 8), lod=[[0, 12, 12, 20]])
        r = la.LoDTensor(np.zeros(4), lod=[[0, 2, 2, 4]])
        c = la.LoDTensor(np.zeros(5), lod=[[0, 3, 3, 5]])
        x = la.LoDTensor(_values(d, 20), lod=[[0, 12, 12, 20]])
    return lambda **o: la.sequence_topk_avg_pooling(_on(x, b), _on(r, b), _on(c, b), [1, 3],
                                                     2, **o)


def _simple(op, fshape=(2,)):
    return lambda d, s, b: (lambda **o: op(_on(_tensor(d, s, fshape=fshape), b), **o))


CASES = [
    Case("sequence_pool[sum]", _pool("sum"), NUMERIC_DTYPES),
    Case("sequence_pool[average]", _pool("average", pad_value=2), NUMERIC_DTYPES),
    Case("sequence_pool[max]", _pool("max"), ALL_DTYPES),
    Case("sequence_pool[first]", _pool("first", pad_value=1), ALL_DTYPES),
    Case("sequence_pool[min, index]", _pool("min", return_index=True), ALL_DTYPES, outputs=2),
    Case("sequence_first_step", _simple(la.sequence_first_step), op="sequence_pool"),
    Case("sequence_last_step", _simple(la.sequence_last_step), op="sequence_pool"),
    Case("sequence_softmax", _simple(la.sequence_softmax, (1,)), NUMERIC_DTYPES),
    Case("sequence_expand[rows]", _expand_rows),
    Case("sequence_expand[blocks]", _expand_blocks, shapes=(BASIC, ZERO)),
    Case("sequence_expand_as", _expand_as, shapes=(BASIC, ZERO)),
    Case("sequence_reverse", _simple(la.sequence_reverse)),
    Case("sequence_concat", _concat),
    Case("sequence_slice", _slice),
    Case("sequence_erase", _erase, NUMERIC_DTYPES),
    Case("sequence_enumerate", _enumerate),
    Case("sequence_mask", _mask, shapes=(BASIC, ZERO)),
    Case("sequence_scatter", _scatter, NUMERIC_DTYPES, shapes=(BASIC, ZERO)),
    Case("sequence_pad", _pad, outputs=2),
    Case("sequence_unpad", _unpad, shapes=(BASIC, ZERO)),
    Case("sequence_reshape", _reshape),
    Case("sequence_conv", _conv, NUMERIC_DTYPES),
    Case("sequence_topk_avg_pooling", _topk, NUMERIC_DTYPES, shapes=(BASIC, ZERO)),
]
_BY_NAME = {c.name: c for c in CASES}


def _params(dtypes=None, shapes=None):
    for case in CASES:
        for d in case.dtypes if dtypes is None else [x for x in dtypes if x in case.dtypes]:
            for s in case.shapes if shapes is None else [x for x in shapes if x in case.shapes]:
                yield pytest.param(case.name, d, s, id=f"{case.name}-{d}-{s}")


def _results(r):
    return r if isinstance(r, tuple) else (r,)


def _garbage_like(a):
    """An array of ``a``'s shape, dtype and device holding values no kernel writes here."""
    xp = sys.modules["cupy"] if type(a).__module__.startswith("cupy") else np
    g = xp.empty(a.shape, a.dtype)
    if a.dtype.kind == "f":
        g.fill(np.nan)
    elif a.dtype.kind == "b":
        g.fill(True)
    else:
        g.fill(np.iinfo(a.dtype).max - 1)
    return g


def _bits(a):
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _same(got, want, backend):
    got, want = to_host(got, backend), to_host(want, backend)
    assert got.data.dtype == want.data.dtype
    assert got.data.shape == want.data.shape
    np.testing.assert_array_equal(got.data, want.data)
    np.testing.assert_array_equal(_bits(got.data), _bits(want.data))
    assert got.lod() == want.lod()


def test_every_data_producing_operator_has_a_case():
    """A new operator needs a case here; lod_reset and lod_append share their input's data."""
    ops = {n for n in la._ops.__all__} - {"lod_reset", "lod_append"}
    assert ops == {c.name.split("[")[0] for c in CASES}


@pytest.mark.parametrize("name, dtype, shape", list(_params()))
def test_out_gives_the_same_result(name, dtype, shape, backend):
    case = _BY_NAME[name]
    call = case.build(dtype, shape, backend)
    want = _results(call())
    outs = tuple(_garbage_like(w.data) for w in want)
    got = _results(call(out=outs if case.outputs > 1 else outs[0]))
    assert len(got) == len(want)
    for g, w, o in zip(got, want, outs):
        assert g.data is o
        _same(g, w, backend)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.outputs > 1])
@pytest.mark.parametrize("which", [0, 1])
def test_a_none_entry_is_allocated(name, which):
    call = _BY_NAME[name].build("float32", BASIC, "cpu")
    want = call()
    outs = [None, None]
    outs[which] = _garbage_like(want[which].data)
    got = call(out=tuple(outs))
    assert got[which].data is outs[which]
    assert got[1 - which].data is not None
    for g, w in zip(got, want):
        _same(g, w, "cpu")


# --- errors: raised before out is written ---------------------------------------------------

def _bad_outs(want):
    """``(description, out array, exception, message pattern)`` for one result ``want``."""
    a = want.data
    other = np.dtype(np.float32) if a.dtype != np.float32 else np.dtype(np.float64)
    wide = np.empty((*a.shape[:-1], a.shape[-1] * 2) if a.ndim else (2,), a.dtype)
    readonly = np.empty(a.shape, a.dtype)
    readonly.flags.writeable = False
    yield "list", a.tolist(), TypeError, r"must be a numpy\.ndarray"
    yield "tensor", want, TypeError, r"for a LoDTensor pass its \.data"
    yield "dtype", np.empty(a.shape, other), TypeError, (f"has dtype {other} but the result is "
                                                         f"{a.dtype}; out= never casts")
    yield "shape", np.empty((a.shape[0] + 1, *a.shape[1:]), a.dtype), ValueError, (
        rf"has shape \({a.shape[0] + 1},.* but the result has shape \({a.shape[0]},")
    if a.ndim and a.shape[-1] > 0 and a.size:
        yield "strided", wide[..., ::2], ValueError, r"is not C-contiguous"
    yield "read-only", readonly, ValueError, r"is read-only"


def _error_params():
    for case in CASES:
        want = _results(case.build("float64" if "float64" in case.dtypes else "int64",
                                   BASIC, "cpu")())
        for k, w in enumerate(want):
            for what, *_ in _bad_outs(w):
                yield pytest.param(case.name, k, what, id=f"{case.name}-out{k}-{what}")


@pytest.mark.parametrize("name, k, what", list(_error_params()))
def test_a_bad_out_is_refused_by_name(name, k, what):
    case = _BY_NAME[name]
    call = case.build("float64" if "float64" in case.dtypes else "int64", BASIC, "cpu")
    want = _results(call())
    _, bad, exc, pattern = next(b for b in _bad_outs(want[k]) if b[0] == what)
    label = f"out[{k}]" if case.outputs > 1 else "out"
    before = bad.copy() if isinstance(bad, np.ndarray) else None
    outs = [None] * case.outputs
    outs[k] = bad
    with pytest.raises(exc, match=rf"^{case.op}: {re.escape(label)} .*{pattern}"):
        call(out=tuple(outs) if case.outputs > 1 else bad)
    if before is not None:
        np.testing.assert_array_equal(_bits(bad), _bits(before))  # untouched


def test_several_outputs_need_a_tuple_of_one_entry_each():
    x = _tensor("float64")
    with pytest.raises(TypeError, match=r"sequence_pad: out must be a tuple of 2 entries"):
        la.sequence_pad(x, 0.0, out=np.empty((4, 2, 2)))
    with pytest.raises(ValueError, match=r"sequence_pad: out has 1 entries but the call has 2"):
        la.sequence_pad(x, 0.0, out=(np.empty((4, 3, 2)),))
    with pytest.raises(TypeError, match=r"sequence_pool: out must be a tuple of 2 entries .* "
                                        r"with return_index=True"):
        la.sequence_pool(x, "max", return_index=True, out=np.empty((4, 2)))
    with pytest.raises(TypeError, match=r"sequence_pool: out must be a numpy\.ndarray .*a "
                                        r"tuple only where the operator has several outputs"):
        la.sequence_pool(x, "max", out=(np.empty((4, 2)),))


def test_erase_checks_everything_but_the_row_count_before_its_kernel(monkeypatch):
    x = _tensor("int64", fshape=(1,))
    from lodarrow._backends import cpu

    def fail(*args):
        raise AssertionError("the kernel ran before out was checked")

    monkeypatch.setitem(cpu.KERNELS, "erase", fail)
    with pytest.raises(TypeError, match=r"sequence_erase: out has dtype int32"):
        la.sequence_erase(x, [3], out=np.empty((5, 1), np.int32))
    readonly = np.empty((5, 1), np.int64)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match=r"sequence_erase: out is read-only"):
        la.sequence_erase(x, [3], out=readonly)
    monkeypatch.undo()
    bad = np.full((6, 1), 9, np.int64)
    with pytest.raises(ValueError, match=r"sequence_erase: out has shape \(6, 1\) but the "
                                         r"result has shape \(5, 1\)"):
        la.sequence_erase(x, [3], out=bad)
    assert (bad == 9).all()


class _FakeCupyArray:
    """What ``lodarrow._backends.is_cupy_array`` sees as a ``cupy.ndarray`` on device 1."""

    device = types.SimpleNamespace(id=1)
    dtype = np.dtype(np.float64)
    shape = (4, 2)


_FakeCupyArray.__name__ = "ndarray"
_FakeCupyArray.__module__ = "cupy._core.core"


def test_an_out_on_another_device_is_a_value_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    x = _tensor("float64")
    with pytest.raises(ValueError, match=r"sequence_reverse: out is on the GPU \(cuda:1\) but "
                                         r"the data is on the CPU"):
        la.sequence_reverse(x, out=_FakeCupyArray())
    with pytest.raises(ValueError, match=r"sequence_pad: out\[1\] is on the GPU"):
        la.sequence_pad(x, 0.0, out=(None, _FakeCupyArray()))


@pytest.mark.parametrize("backend", [pytest.param("cuda", marks=pytest.mark.cuda)])
def test_a_host_out_for_gpu_data_is_a_value_error(backend):
    from conftest import cuda_unavailable_reason

    if cuda_unavailable_reason():
        pytest.skip(cuda_unavailable_reason())
    x = on_backend(_tensor("float64"), backend)
    with pytest.raises(ValueError, match=r"sequence_reverse: out is on the CPU but the data is "
                                         r"on the GPU \(cuda:0\)"):
        la.sequence_reverse(x, out=np.empty((6, 2)))


# --- overlap with an input ------------------------------------------------------------------

def test_in_place_softmax_equals_the_out_of_place_one(backend):
    x = on_backend(la.LoDTensor(np.array([0.5, 2.0, -1.0, 3.0, 3.0, 7.0]),
                                lod=[[0, 2, 2, 5, 6]]), backend)
    want = la.sequence_softmax(x)
    got = la.sequence_softmax(x, out=x.data)
    assert got.data is x.data
    _same(got, want, backend)


@pytest.mark.parametrize("name", ["sequence_reverse", "sequence_enumerate", "sequence_conv",
                                  "sequence_reshape", "sequence_pool[sum]", "sequence_slice"])
@pytest.mark.parametrize("shift", [0, 1, -1])
def test_out_overlapping_the_input_data(name, shift):
    """The input's data lives inside a buffer and ``out`` is a window of the same buffer,
    shifted by ``shift`` rows: the result must not see what the kernel already wrote."""
    case = _BY_NAME[name]
    x = _tensor("float64", fshape=(1,))
    n = x.data.shape[0]
    call = {"sequence_reverse": la.sequence_reverse,
            "sequence_enumerate": lambda t, **o: la.sequence_enumerate(t, 1, **o),
            "sequence_conv": lambda t, **o: la.sequence_conv(t, np.ones((3, 1)), **o),
            "sequence_reshape": lambda t, **o: la.sequence_reshape(t, 1, **o),
            "sequence_pool[sum]": lambda t, **o: la.sequence_pool(t, "sum", **o),
            "sequence_slice": lambda t, **o: la.sequence_slice(
                t, [0, 0, 1, 0], [2, 0, 2, 1], **o)}[case.name]
    want = call(x)
    m = want.data.shape[0]
    buf = np.full(n + m + 2, np.nan)
    start = 1
    buf[start:start + n] = x.data[:, 0]
    inside = la.LoDTensor(buf[start:start + n].reshape(n, 1), lod=x.lod())
    out = buf[start + shift:start + shift + m].reshape(m, 1)
    assert np.may_share_memory(out, inside.data)
    got = call(inside, out=out)
    assert got.data is out
    _same(got, want, "cpu")


def test_concat_into_one_of_its_inputs():
    a = _tensor("int32")
    b = la.LoDTensor(_values("int32", 12, (2,)), lod=[[0, 4, 4, 10, 12]])
    want = la.sequence_concat([a, b])
    buf = np.zeros((18, 2), np.int32)
    buf[:12] = b.data
    b_in = la.LoDTensor(buf[:12], lod=b.lod())
    got = la.sequence_concat([a, b_in], out=buf)
    assert got.data is buf
    _same(got, want, "cpu")


def test_pad_out_overlapping_its_input_and_each_other():
    x = _tensor("float64", fshape=())
    want = la.sequence_pad(x, 0.0)
    buf = np.zeros(16)
    buf[:6] = x.data
    inside = la.LoDTensor(buf[:6], lod=x.lod())
    padded, length = la.sequence_pad(inside, 0.0, out=(buf[2:14].reshape(4, 3), None))
    _same(padded, want[0], "cpu")
    _same(length, want[1], "cpu")
    ints = la.LoDTensor(x.data.astype(np.int64), lod=x.lod())
    want = la.sequence_pool(ints, "max", return_index=True)
    both = np.zeros(8, np.int64)  # out[0] and out[1] overlap: out[1] goes through a temporary
    got = la.sequence_pool(ints, "max", return_index=True, out=(both[:4], both[2:6]))
    _same(got[1], want[1], "cpu")


@pytest.mark.parametrize("dtype", ["float64", "int32", "float16"])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_scatter_into_its_own_input(dtype, as_tensor, backend):
    x = on_backend(_values(dtype, 4, (2, 3)), backend)
    lod = [[0, 2, 2, 5]]
    ids = on_backend(la.LoDTensor(np.array([[0], [5], [2], [2], [4]]), lod=lod), backend)
    upd = on_backend(la.LoDTensor(np.ones((5, 1), np.int8), lod=lod), backend)
    want = la.sequence_scatter(x.copy(), ids, upd)
    inp = la.LoDTensor(x) if as_tensor else x
    got = la.sequence_scatter(inp, ids, upd, out=x)
    assert got.data is x
    _same(got, want, backend)


def test_scatter_into_its_own_input_copies_nothing(monkeypatch):
    from lodarrow._backends import cpu

    x = np.zeros((3, 4))
    kernel = cpu.KERNELS["scatter"]

    def spy(out, src, *args):
        assert src is out and np.shares_memory(out, x)  # no temporary, no copy of the rows
        return kernel(out, src, *args)

    monkeypatch.setitem(cpu.KERNELS, "scatter", spy)
    ids = la.LoDTensor(np.array([[0], [3], [1]]), lod=[[0, 2, 3]])
    upd = la.LoDTensor(np.array([[1.5], [2.5], [4.0]]), lod=[[0, 2, 3]])
    assert la.sequence_scatter(x, ids, upd, out=x).data is x
    np.testing.assert_array_equal(x, [[1.5, 0, 0, 2.5], [0, 4.0, 0, 0], [0, 0, 0, 0]])


def test_scatter_into_its_updates():
    x = np.zeros((2, 3))
    flat = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    ids = la.LoDTensor(np.array([[0], [1], [2]]), lod=[[0, 2, 3]])
    upd = la.LoDTensor(flat[:3].reshape(3, 1), lod=[[0, 2, 3]])
    want = la.sequence_scatter(x, ids, upd)
    out = flat.reshape(2, 3)
    got = la.sequence_scatter(x, ids, upd, out=out)
    assert got.data is out
    _same(got, want, "cpu")


def test_erase_without_tokens_copies_into_out():
    x = _tensor("int16", fshape=(1,))
    out = np.full((6, 1), -5, np.int16)
    got = la.sequence_erase(x, [], out=out)
    assert got.data is out
    _same(got, la.sequence_erase(x, []), "cpu")


def test_out_is_reused_across_calls():
    out = np.empty((4, 2))
    for k in range(3):
        x = la.LoDTensor(_values("float64", 6, (2,)) + k, lod=_LODS[BASIC])
        got = la.sequence_pool(x, "max", out=out)
        assert got.data is out
        _same(got, la.sequence_pool(x, "max"), "cpu")


def test_lod_reset_and_lod_append_take_no_out():
    with pytest.raises(TypeError, match="out"):
        la.lod_reset(_tensor("float64"), target_lod=[0, 6], out=np.empty((6, 2)))
    with pytest.raises(TypeError, match="out"):
        la.lod_append(_tensor("float64"), [0, 6], out=np.empty((6, 2)))


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_out_is_keyword_only_after_paddles_parameters(name):
    import inspect

    op = getattr(la, _BY_NAME[name].name.split("[")[0])
    params = list(inspect.signature(op).parameters.values())
    assert params[-1].name == "out" and params[-1].kind is inspect.Parameter.KEYWORD_ONLY
    assert params[-1].default is None
    assert params[-2].name == "name"
