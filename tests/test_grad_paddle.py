"""``la.vjp``'s gradients against PaddlePaddle 2.6's own backward kernels (docs/gradients.md).

tests/grad_paddle_cases.py defines the cases (NumPy only) and, run once per session in a
process of its own (Paddle cannot share one with TensorFlow, which the main test process
imports), computes Paddle's forward outputs and gradients for them.  Every case is compared
here: float64 to 1e-12 relative, float32 to 1e-5, relative to the largest magnitude of the
reference (so exact zeros must come out as zeros up to that).

Where lodarrow departs from Paddle on purpose (docs/operators.md#departures-from-paddle, or a case Paddle cannot
run), the case's ``expect`` is "fd" and the gradient is compared with central finite
differences of lodarrow's own forward in float64: the exact derivative of what lodarrow
computes.  Paddle's sequence_conv filter gradient is wrong when context_start > 0 and a
non-empty sequence is no longer than context_start (without trainable padding); those cases
("paddle-input") compare the input gradient with Paddle's and the filter gradient with finite
differences, and test_paddle_conv_filter_gradient_is_wrong_there checks the claim itself.
"""

import dataclasses
import importlib.util
import os
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

import lodarrow as la
from grad_paddle_cases import CASES

HERE = pathlib.Path(__file__).resolve().parent
BY_ID = {c.id: c for c in CASES}
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}
#: Finite differences (central, step H in float64): truncation and rounding stay below 1e-7
#: of the gradient's scale on these cases; a wrong gradient is off by O(1).
H = 1e-6
FD_RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-6}

#: docs/gradients.md#what-is-differentiable: every differentiable operator, each of which must have cases.
DIFFERENTIABLE = {
    "sequence_pool", "sequence_first_step", "sequence_last_step", "sequence_softmax",
    "sequence_expand", "sequence_expand_as", "sequence_pad", "sequence_unpad",
    "sequence_concat", "sequence_slice", "sequence_reverse", "sequence_reshape", "lod_reset",
    "lod_append", "sequence_scatter", "sequence_conv", "sequence_topk_avg_pooling",
}


@pytest.fixture(scope="session")
def paddle_results(tmp_path_factory):
    """Paddle's outputs and gradients for every case, computed once in a process of its own."""
    if importlib.util.find_spec("paddle") is None:
        pytest.skip("PaddlePaddle is not installed (the [test] extra installs 2.6)")
    out_dir = tmp_path_factory.mktemp("grad_paddle")
    env = dict(os.environ, GLOG_minloglevel="2", PYTHONPATH=os.pathsep.join(
        [str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    run = subprocess.run([sys.executable, str(HERE / "grad_paddle_cases.py"), str(out_dir)],
                         cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=300)
    # on a crash, the last case id printed to stderr names the case
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    with open(out_dir / "grad_paddle.pkl", "rb") as f:
        results = pickle.load(f)
    assert results["paddle"].startswith("2.6"), results["paddle"]
    return results


# ------------------------------------------------------------------------ lodarrow's side
def _arg(arr, lod):
    return la.LoDTensor(arr, lod=lod) if lod else arr


def _call(case, tensors):
    """(op, args, kwargs, {tensor name: position of its gradient in the pullback's tuple})."""
    t = {n: _arg(*v) for n, v in tensors.items()}
    a, op = case.attrs, getattr(la, case.op)
    if case.op == "sequence_conv":
        args = [t["x"], t["filter"], a["context_start"], a["context_length"], 1]
        pos = {"x": 0, "filter": 1}
        # padding_data and bias positional, so that the pullback returns their gradients
        if "padding_data" in t or "bias" in t:
            args.append(t.get("padding_data"))
            pos["padding_data"] = 5
        if "bias" in t:
            args.append(t["bias"])
            pos["bias"] = 6
        return op, args, {}, pos
    if case.op == "sequence_concat":
        return op, [[t[n] for n in case.tensors]], {}, {n: (0, i) for i, n in enumerate(t)}
    names = list(case.tensors)
    kwargs = dict(a)
    if case.op == "sequence_pad":
        kwargs["pad_value"] = np.asarray(a["pad_value"])
    return op, [t[n] for n in names], kwargs, {n: names.index(n) for n in case.diff}


def _grad_at(grads, where):
    if isinstance(where, tuple):
        return grads[where[0]][where[1]]
    return grads[where]


def lodarrow_vjp(case, tensors=None):
    """lodarrow's forward output and its gradients (by tensor name) for ``case.dout``."""
    op, args, kwargs, pos = _call(case, tensors or case.tensors)
    result, pullback = la.vjp(op, *args, **kwargs)
    out = result[0] if isinstance(result, tuple) else result
    grads = pullback(case.dout)
    return out, {n: _grad_at(grads, pos[n]) for n in case.diff}


def lodarrow_loss(case, tensors):
    """sum(forward(tensors) * dout) in float64."""
    op, args, kwargs, _ = _call(case, tensors)
    result = op(*args, **kwargs)
    out = result[0] if isinstance(result, tuple) else result
    return float(np.sum(np.asarray(out.data, np.float64) * case.dout.astype(np.float64)))


def finite_differences(case, name):
    """d sum(out * dout) / d tensor ``name`` by central differences of lodarrow's forward, every
    float input cast to float64 (exact for the float32 data, which float64 holds)."""
    t64 = {n: ((arr.astype(np.float64) if arr.dtype.kind == "f" else arr), lod)
           for n, (arr, lod) in case.tensors.items()}
    if case.op == "sequence_pad":
        case = _with_attrs(case, pad_value=np.asarray(case.attrs["pad_value"], np.float64))
    arr, lod = t64[name]
    grad = np.zeros(arr.shape)
    for i in np.ndindex(arr.shape):
        plus, minus = arr.copy(), arr.copy()
        plus[i] += H
        minus[i] -= H
        grad[i] = (lodarrow_loss(case, dict(t64, **{name: (plus, lod)}))
                   - lodarrow_loss(case, dict(t64, **{name: (minus, lod)}))) / (2 * H)
    return grad


def _with_attrs(case, **attrs):
    return dataclasses.replace(case, attrs=dict(case.attrs, **attrs))


def _data(g):
    return np.asarray(g.data if isinstance(g, la.LoDTensor) else g)


def assert_close(got, want, rtol, what):
    """``got`` equal to ``want`` (shape, dtype, values within ``rtol`` of want's scale)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, reference {want.shape}"
    if want.size == 0:
        return
    scale = max(float(np.max(np.abs(want))), np.finfo(np.float64).tiny)
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    at = np.unravel_index(np.argmax(np.abs(got.astype(np.float64) - want)), want.shape)
    assert err <= rtol * scale, (f"{what}: max abs error {err:.3g} ({err / scale:.3g} of the "
                                 f"scale {scale:.3g}) > {rtol:g}, first worst at {at}: "
                                 f"{got[at]!r} vs {want[at]!r}")


# ------------------------------------------------------------------------ the comparisons
PADDLE = [c for c in CASES if c.expect in ("paddle", "paddle-input")]
FD = [c for c in CASES if c.expect == "fd"]
CONV_BUG = [c for c in CASES if c.expect == "paddle-input"]


@pytest.mark.parametrize("case", PADDLE, ids=lambda c: c.id)
def test_forward_equals_paddle(case, paddle_results):
    r = paddle_results[case.id]
    assert r["status"] == "ok", f"the case file says Paddle runs {case.id}: {r.get('reason')}"
    out, _ = lodarrow_vjp(case)
    want, want_lod = r["out"]
    assert out.dtype == want.dtype
    assert out.lod() == want_lod
    assert_close(out.data, want, RTOL[want.dtype], f"{case.id} forward")


# (the filter of the "paddle-input" cases: test_conv_filter_gradient_by_finite_differences)
@pytest.mark.parametrize("case, name", [(c, n) for c in PADDLE for n in c.diff
                                        if not (c.expect == "paddle-input" and n == "filter")],
                         ids=lambda v: v.id if hasattr(v, "id") else v)
def test_gradient_equals_paddle(case, name, paddle_results):
    r = paddle_results[case.id]
    assert r["status"] == "ok", f"the case file says Paddle runs {case.id}: {r.get('reason')}"
    _, grads = lodarrow_vjp(case)
    arr, lod = case.tensors[name]
    g = grads[name]
    assert g is not None, f"{case.id}: no gradient for {name}"
    if lod:  # the contract: a gradient has its input's LoD (Paddle's carries it too)
        assert isinstance(g, la.LoDTensor) and g.lod() == lod
        assert r["grads"][name][1] in ([], lod)
    assert _data(g).dtype == arr.dtype
    want = r["grads"][name][0]
    assert want.dtype == arr.dtype
    assert_close(_data(g), want, RTOL[arr.dtype], f"{case.id} d{name}")


@pytest.mark.parametrize("case, name", [(c, n) for c in FD for n in c.diff],
                         ids=lambda v: v.id if hasattr(v, "id") else v)
def test_departure_gradient_by_finite_differences(case, name, paddle_results):
    # lodarrow departs from Paddle here on purpose (case.why, from docs/operators.md), or Paddle cannot
    # run the case: the gradient must be the exact derivative of lodarrow's own forward.
    r = paddle_results[case.id]
    if case.no_paddle:
        assert r["status"] == "not run"
    elif "softmax" in case.id:  # Paddle's unshifted softmax overflows
        assert r["status"] == "ok" and not np.all(np.isfinite(r["out"][0]))
    elif "shared-outer" not in case.id:  # (Paddle's 2-level concat runs, undefined)
        assert r["status"] == "refused", f"Paddle ran {case.id}: the departure is gone"
    out, grads = lodarrow_vjp(case)
    arr, lod = case.tensors[name]
    g = grads[name]
    assert g is not None, f"{case.id}: no gradient for {name}"
    if lod:
        assert isinstance(g, la.LoDTensor) and g.lod() == lod
    assert _data(g).dtype == arr.dtype
    assert np.all(np.isfinite(_data(g)))
    assert_close(_data(g), finite_differences(case, name), FD_RTOL[arr.dtype],
                 f"{case.id} d{name} vs finite differences")


@pytest.mark.parametrize("case", CONV_BUG, ids=lambda c: c.id)
def test_conv_filter_gradient_by_finite_differences(case, paddle_results):
    _, grads = lodarrow_vjp(case)
    assert_close(_data(grads["filter"]), finite_differences(case, "filter"),
                 FD_RTOL[case.dout.dtype], f"{case.id} dfilter vs finite differences")


@pytest.mark.parametrize("case", CONV_BUG, ids=lambda c: c.id)
def test_paddle_conv_filter_gradient_is_wrong_there(case, paddle_results):
    """docs/gradients.md's claim: Paddle's filter gradient differs from the derivative of its own forward
    (computed by the case script exactly, the output being linear in the filter) and of
    lodarrow's (finite differences), which agree with each other."""
    r = paddle_results[case.id]
    assert r["status"] == "ok"
    fd = finite_differences(case, "filter")
    own = r["filter_by_linearity"]
    assert_close(own, fd, 1e-5, f"{case.id}: Paddle's forward derivative vs lodarrow's")
    paddle_grad = r["grads"]["filter"][0].astype(np.float64)
    err = np.max(np.abs(paddle_grad - fd))
    assert err > 1e-2 * np.max(np.abs(fd)), f"{case.id}: Paddle's filter gradient is right"


def test_cases_cover_every_differentiable_operator():
    ops = {c.op for c in CASES}
    assert ops == DIFFERENTIABLE, (DIFFERENTIABLE - ops, ops - DIFFERENTIABLE)
    for op in DIFFERENTIABLE:
        dtypes = {str(c.dout.dtype) for c in CASES if c.op == op}
        assert dtypes == {"float32", "float64"}, (op, dtypes)
    pools = {c.attrs["pool_type"] for c in CASES if c.op == "sequence_pool"}
    assert pools == {"sum", "average", "sqrt", "max", "min", "first", "last"}
    # two levels and empty sequences against Paddle itself, not only by finite differences
    assert any(len(c.tensors["x"][1]) == 2 for c in PADDLE if c.op == "sequence_pool")
    assert any(0 in np.diff(c.tensors["x"][1][-1]) for c in PADDLE if c.op == "sequence_conv")


def test_every_case_has_a_paddle_result(paddle_results):
    missing = [c.id for c in CASES if c.id not in paddle_results]
    assert not missing
    ok = [c.id for c in CASES if paddle_results[c.id]["status"] == "ok"]
    assert len(ok) >= len(PADDLE)
