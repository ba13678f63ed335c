"""Gradient cases for lodarrow's ``la.vjp``, with PaddlePaddle 2.6's own backward kernels as the
oracle (docs/gradients.md; tests/test_grad_paddle.py compares).

Importing this module defines the cases (NumPy only, deterministic) and never imports Paddle.
Run as a script it computes, in one process for every case, Paddle's forward output and its
gradients for the case's upstream ``dout`` (static graph: ``paddle.static.gradients`` with
the loss ``sum(out * dout)``, or ``target_gradients=[dout]`` for an output with no rows,
LoDTensors fed with their LoD) and pickles them::

    python tests/grad_paddle_cases.py OUT_DIR      # writes OUT_DIR/grad_paddle.pkl

Paddle runs in a process of its own, as for tests/hub_paddle_cases.py: it cannot share one with
TensorFlow, which the main test process imports.  A case Paddle refuses is recorded with
Paddle's message; a case Paddle is known to crash on (a signal, not an exception) or has no
operator for is not run, and the reason is recorded instead.  The case ids are printed to
stderr as they run, so the last one names a crash.  About 3 s for all cases.
"""

import dataclasses
import os
import pickle
import sys
import time

import numpy as np

FLOATS = ("float32", "float64")


@dataclasses.dataclass
class Case:
    id: str
    op: str                      # lodarrow's operator name
    tensors: dict                # name -> (array, LoD offsets or None), lodarrow's order
    attrs: dict                  # lodarrow keyword arguments (Paddle's derived from them)
    diff: tuple                  # names of the differentiable tensors
    dout: np.ndarray             # upstream gradient for the (first) output
    # "paddle": equal to Paddle's forward and gradients; "fd": lodarrow departs on purpose
    # (or Paddle cannot run it), so its gradient is checked by finite differences;
    # "paddle-input": sequence_conv where Paddle's filter gradient is wrong (docs/gradients.md), the
    # input gradient is Paddle's and the filter's is checked by finite differences
    expect: str = "paddle"
    why: str = ""                # for "fd" (and oddities): the reason, from docs/operators.md / docs/gradients.md
    no_paddle: str = ""          # set: Paddle is not run (would crash / cannot express)
    out_shape: tuple = None      # the forward output's shape (dout's)


def _offsets(lengths):
    return [int(v) for v in np.concatenate([[0], np.cumsum(lengths)])]


def _lod(*levels):
    """Lengths per level (outer first) -> offsets per level."""
    return [_offsets(lv) for lv in levels]


class _Gen:
    def __init__(self):
        self.cases = []
        self._seed = 0

    def rng(self):
        self._seed += 1
        return np.random.default_rng(1000 + self._seed)

    def values(self, rng, shape, dtype, ties=False):
        if ties:
            return rng.integers(-2, 3, shape).astype(dtype)
        v = rng.standard_normal(shape)
        return v.astype(dtype)

    def add(self, id, op, tensors, attrs, diff, out_shape, dtype, rng, **kw):
        dout = self.values(rng, out_shape, dtype)
        self.cases.append(Case(id, op, tensors, attrs, tuple(diff), dout,
                               out_shape=tuple(out_shape), **kw))


# LoDs used across operators: (tag, lengths per level)
ONE = ("1lvl", [[2, 3, 1, 4]])
EMPTY = ("1lvl-empty", [[3, 0, 2, 0, 1]])
TWO = ("2lvl", [[2, 0, 2], [2, 0, 3, 1]])
FEATURES = {"D1": (1,), "D3": (3,)}


def _pool_cases(g):
    pools = ["sum", "average", "sqrt", "max", "first", "last"]
    for dtype in FLOATS:
        for ftag, fshape in FEATURES.items():
            for ltag, lens in (ONE, EMPTY, TWO):
                for pool in pools:
                    rng = g.rng()
                    n = sum(lens[-1])
                    x = g.values(rng, (n,) + fshape, dtype)
                    g.add(f"pool-{pool}-{dtype}-{ftag}-{ltag}", "sequence_pool",
                          {"x": (x, _lod(*lens))}, {"pool_type": pool, "pad_value": 0.25},
                          ["x"], (len(lens[-1]),) + fshape, dtype, rng)
        # a feature shape of rank 2
        for pool in ("sum", "max", "last"):
            rng = g.rng()
            lens = EMPTY[1]
            x = g.values(rng, (sum(lens[-1]), 2, 2), dtype)
            g.add(f"pool-{pool}-{dtype}-F2x2-1lvl-empty", "sequence_pool",
                  {"x": (x, _lod(*lens))}, {"pool_type": pool, "pad_value": 0.0},
                  ["x"], (len(lens[-1]), 2, 2), dtype, rng)
        # ties: the gradient goes to the first row that holds the maximum
        rng = g.rng()
        lens = [[4, 3, 0, 5]]
        x = g.values(rng, (12, 2), dtype, ties=True)
        x[0:4, 0] = [1, 2, 2, 0]
        g.add(f"pool-max-{dtype}-D2-ties", "sequence_pool", {"x": (x, _lod(*lens))},
              {"pool_type": "max", "pad_value": 0.0}, ["x"], (4, 2), dtype, rng)
        # lodarrow only: "min" (docs/operators.md#pooling-min-and-any-row-count); more sequences than rows (same)
        for ltag, lens in (EMPTY, TWO):
            rng = g.rng()
            x = g.values(rng, (sum(lens[-1]), 3), dtype)
            g.add(f"pool-min-{dtype}-D3-{ltag}", "sequence_pool", {"x": (x, _lod(*lens))},
                  {"pool_type": "min", "pad_value": 0.25}, ["x"], (len(lens[-1]), 3), dtype, rng,
                  expect="fd", why="'min' is lodarrow's (docs/operators.md#pooling-min-and-any-row-count); Paddle has no MIN")
        for pool in ("sum", "max"):
            rng = g.rng()
            lens = [[0, 2, 0, 0, 0]]
            x = g.values(rng, (2, 2), dtype)
            g.add(f"pool-{pool}-{dtype}-D2-rows-lt-seqs", "sequence_pool", {"x": (x, _lod(*lens))},
                  {"pool_type": pool, "pad_value": 0.5}, ["x"], (5, 2), dtype, rng, expect="fd",
                  why="Paddle requires rows >= sequences; lodarrow drops the rule "
                      "(docs/operators.md#pooling-min-and-any-row-count)")
        for step in ("sequence_first_step", "sequence_last_step"):
            for ltag, lens in (EMPTY, TWO):
                rng = g.rng()
                x = g.values(rng, (sum(lens[-1]), 2), dtype)
                g.add(f"{step.split('_')[1]}_step-{dtype}-D2-{ltag}", step,
                      {"x": (x, _lod(*lens))}, {}, ["x"], (len(lens[-1]), 2), dtype, rng)


def _softmax_cases(g):
    for dtype in FLOATS:
        for ltag, lens in (ONE, EMPTY, TWO):
            rng = g.rng()
            n = sum(lens[-1])
            x = g.values(rng, (n, 1), dtype)
            g.add(f"softmax-{dtype}-D1-{ltag}", "sequence_softmax", {"x": (x, _lod(*lens))}, {},
                  ["x"], (n, 1), dtype, rng)
        rng = g.rng()
        lens = EMPTY[1]
        x = g.values(rng, (sum(lens[0]),), dtype)
        g.add(f"softmax-{dtype}-rank1-1lvl-empty", "sequence_softmax", {"x": (x, _lod(*lens))}, {},
              ["x"], x.shape, dtype, rng)
        # large inputs: lodarrow's softmax is max-shifted (docs/operators.md#stable-softmax)
        rng = g.rng()
        x = (g.values(rng, (6, 1), dtype) + 1000).astype(dtype)
        g.add(f"softmax-{dtype}-D1-large", "sequence_softmax", {"x": (x, _lod([2, 4]))}, {},
              ["x"], (6, 1), dtype, rng, expect="fd",
              why="stable softmax (docs/operators.md#stable-softmax): Paddle's overflows to NaN near 1000")


def _expand_cases(g):
    for dtype in FLOATS:
        for ftag, fshape in FEATURES.items():
            # x without LoD, y one level (rows repeated; a zero count drops the row)
            rng = g.rng()
            ylens = [2, 0, 3, 1]
            x = g.values(rng, (4,) + fshape, dtype)
            y = np.zeros((6, 1), dtype)
            g.add(f"expand-{dtype}-{ftag}-plainx-1lvl-empty", "sequence_expand",
                  {"x": (x, None), "y": (y, _lod(ylens))}, {"ref_level": -1}, ["x"],
                  (6,) + fshape, dtype, rng)
            # x with a LoD (empty sequence), y two levels, ref_level 0: whole blocks repeated
            rng = g.rng()
            xlens = [2, 0, 1]
            x = g.values(rng, (3,) + fshape, dtype)
            ylod = _lod([3, 0, 2], [1, 1, 1, 2, 1])
            y = np.zeros((6, 1), dtype)
            rows = 3 * 2 + 0 + 2 * 1
            g.add(f"expand-{dtype}-{ftag}-lodx-ref0", "sequence_expand",
                  {"x": (x, _lod(xlens)), "y": (y, ylod)}, {"ref_level": 0}, ["x"],
                  (rows,) + fshape, dtype, rng)
            # x without LoD, y two levels, its last level
            rng = g.rng()
            x = g.values(rng, (5,) + fshape, dtype)
            g.add(f"expand-{dtype}-{ftag}-plainx-2lvl-last", "sequence_expand",
                  {"x": (x, None), "y": (y, ylod)}, {"ref_level": -1}, ["x"],
                  (6,) + fshape, dtype, rng)
            # expand_as
            rng = g.rng()
            x = g.values(rng, (5,) + fshape, dtype)
            ylens = [1, 0, 3, 2, 0]
            y = np.zeros((6, 2), dtype)
            g.add(f"expand_as-{dtype}-{ftag}-1lvl-empty", "sequence_expand_as",
                  {"x": (x, None), "y": (y, _lod(ylens))}, {}, ["x"], (6,) + fshape, dtype, rng)


def _layout_cases(g):
    for dtype in FLOATS:
        for ftag, fshape in FEATURES.items():
            for ltag, lens in (ONE, EMPTY):
                n = sum(lens[0])
                # pad (maxlen None and larger than the longest)
                for maxlen in (None, 6):
                    rng = g.rng()
                    x = g.values(rng, (n,) + fshape, dtype)
                    p = maxlen or max(lens[0])
                    g.add(f"pad-{dtype}-{ftag}-{ltag}-maxlen{maxlen}", "sequence_pad",
                          {"x": (x, _lod(*lens))},
                          {"pad_value": np.array([0.5], dtype), "maxlen": maxlen}, ["x"],
                          (len(lens[0]), p) + fshape, dtype, rng)
                # reverse
                rng = g.rng()
                x = g.values(rng, (n,) + fshape, dtype)
                g.add(f"reverse-{dtype}-{ftag}-{ltag}", "sequence_reverse", {"x": (x, _lod(*lens))},
                      {}, ["x"], (n,) + fshape, dtype, rng)
                # slice
                rng = g.rng()
                x = g.values(rng, (n,) + fshape, dtype)
                off = np.array([[min(1, l)] for l in lens[0]], np.int64)
                ln = np.array([[l - o - (l > 2)] for l, (o,) in zip(lens[0], off)], np.int64)
                g.add(f"slice-{dtype}-{ftag}-{ltag}", "sequence_slice",
                      {"x": (x, _lod(*lens)), "offset": (off, None), "length": (ln, None)}, {},
                      ["x"], (int(ln.sum()),) + fshape, dtype, rng)
                # concat of two and three inputs with the same number of sequences
                for k in (2, 3):
                    rng = g.rng()
                    ts = {}
                    total = 0
                    for i in range(k):
                        li = list(np.roll(lens[0], i))
                        ts[f"x{i}"] = (g.values(rng, (sum(li),) + fshape, dtype), _lod(li))
                        total += sum(li)
                    g.add(f"concat{k}-{dtype}-{ftag}-{ltag}", "sequence_concat", ts, {},
                          list(ts), (total,) + fshape, dtype, rng)
            # unpad: x [B, L, *F], lengths with zeros
            for lengths in ([2, 0, 3, 1], [3, 3, 1]):
                rng = g.rng()
                x = g.values(rng, (len(lengths), 4) + fshape, dtype)
                g.add(f"unpad-{dtype}-{ftag}-{'-'.join(map(str, lengths))}", "sequence_unpad",
                      {"x": (x, None), "length": (np.array(lengths, np.int64), None)}, {}, ["x"],
                      (sum(lengths),) + fshape, dtype, rng)
            # reshape: [N, D] -> new_dim
            rng = g.rng()
            d = fshape[0] * 2
            x = g.values(rng, (6, d), dtype)
            newd = 3 if d == 6 else 1
            g.add(f"reshape-{dtype}-D{d}-to{newd}", "sequence_reshape",
                  {"x": (x, _lod([2, 0, 3, 1]))}, {"new_dim": newd}, ["x"],
                  (6 * d // newd, newd), dtype, rng)
        rng = g.rng()
        x = g.values(rng, (6, 4), dtype)
        g.add(f"reshape-{dtype}-D4-to2-empty", "sequence_reshape", {"x": (x, _lod([0, 4, 2]))},
              {"new_dim": 2}, ["x"], (12, 2), dtype, rng)
        # lod_reset / lod_append
        for ftag, fshape in FEATURES.items():
            rng = g.rng()
            x = g.values(rng, (6,) + fshape, dtype)
            g.add(f"lod_reset-{dtype}-{ftag}-target", "lod_reset", {"x": (x, _lod([3, 3]))},
                  {"target_lod": [0, 1, 1, 6]}, ["x"], (6,) + fshape, dtype, rng)
            rng = g.rng()
            x = g.values(rng, (6,) + fshape, dtype)
            y = np.zeros((6, 1), dtype)
            g.add(f"lod_reset-{dtype}-{ftag}-y2lvl", "lod_reset",
                  {"x": (x, None), "y": (y, _lod([1, 2], [2, 0, 4]))}, {}, ["x"],
                  (6,) + fshape, dtype, rng)
            # (x without LoD: appending to a LoD makes an inconsistent one, which Paddle does
            # not check and lodarrow refuses, docs/operators.md#nothing-undefined)
            rng = g.rng()
            x = g.values(rng, (6,) + fshape, dtype)
            g.add(f"lod_append-{dtype}-{ftag}", "lod_append", {"x": (x, None)},
                  {"level": [0, 2, 2, 6]}, ["x"], (6,) + fshape, dtype, rng)
        # departures: two levels where Paddle refuses (docs/operators.md#multi-level-input), one concat input
        for op, extra in (("sequence_reverse", {}), ("sequence_pad", {"pad_value": 0.0})):
            rng = g.rng()
            lens = TWO[1]
            x = g.values(rng, (sum(lens[-1]), 2), dtype)
            shape = ((len(lens[-1]), max(lens[-1]), 2) if op == "sequence_pad"
                     else x.shape)
            if op == "sequence_pad":
                extra = {"pad_value": np.array([0.0], dtype), "maxlen": None}
            g.add(f"{op.split('_')[1]}-{dtype}-D2-2lvl", op, {"x": (x, _lod(*lens))}, extra, ["x"],
                  shape, dtype, rng, expect="fd",
                  why="two levels: Paddle refuses, lodarrow acts on the last (docs/operators.md#multi-level-input)")
        rng = g.rng()
        lens = TWO[1]
        ts = {f"x{i}": (g.values(rng, (sum(lens[-1]) + 2 * i, 2), dtype),
                        _lod(lens[0], [lens[1][0] + i, lens[1][1], lens[1][2] + i, lens[1][3]]))
              for i in range(2)}
        g.add(f"concat2-{dtype}-D2-2lvl-shared-outer", "sequence_concat", ts, {}, list(ts),
              (sum(lens[-1]) * 2 + 2, 2), dtype, rng, expect="fd",
              why="2-level inputs sharing their outer level: Paddle's result is undefined, "
                  "lodarrow concatenates the last level (docs/operators.md#nothing-undefined, #multi-level-input)")
        # two levels where lodarrow acts on the last level and Paddle refuses (departure 6)
        rng = g.rng()
        lens = TWO[1]
        n = sum(lens[-1])
        x = g.values(rng, (n, 2), dtype)
        off = np.array([[min(1, l)] for l in lens[-1]], np.int64)
        ln = np.array([[l - o] for l, (o,) in zip(lens[-1], off)], np.int64)
        g.add(f"slice-{dtype}-D2-2lvl", "sequence_slice",
              {"x": (x, _lod(*lens)), "offset": (off, None), "length": (ln, None)}, {}, ["x"],
              (int(ln.sum()), 2), dtype, rng, expect="fd",
              why="two levels: Paddle refuses, lodarrow acts on the last (docs/operators.md#multi-level-input)")
        rng = g.rng()
        x = g.values(rng, (n, 2), dtype)
        g.add(f"reshape-{dtype}-D2-2lvl", "sequence_reshape", {"x": (x, _lod(*lens))},
              {"new_dim": 1}, ["x"], (2 * n, 1), dtype, rng, expect="fd",
              why="two levels: Paddle refuses, lodarrow acts on the last (docs/operators.md#multi-level-input)")
        # outputs with no rows at all
        rng = g.rng()
        x = g.values(rng, (5, 2), dtype)
        zeros = np.zeros((3, 1), np.int64)
        g.add(f"slice-{dtype}-D2-all-zero-length", "sequence_slice",
              {"x": (x, _lod([2, 0, 3])), "offset": (np.array([[1], [0], [3]]), None),
               "length": (zeros, None)}, {}, ["x"], (0, 2), dtype, rng)
        rng = g.rng()
        x = g.values(rng, (3, 2), dtype)
        g.add(f"expand_as-{dtype}-D2-all-zero", "sequence_expand_as",
              {"x": (x, None), "y": (np.zeros((0, 1), dtype), _lod([0, 0, 0]))}, {}, ["x"],
              (0, 2), dtype, rng)
        # lod_reset: y a plain int32 array of offsets; x with two levels replaced
        rng = g.rng()
        x = g.values(rng, (6, 2), dtype)
        g.add(f"lod_reset-{dtype}-D2-y-plain-offsets", "lod_reset",
              {"x": (x, _lod([2, 4])), "y": (np.array([0, 3, 3, 6], np.int32), None)}, {},
              ["x"], (6, 2), dtype, rng)
        rng = g.rng()
        x = g.values(rng, (6, 2), dtype)
        g.add(f"lod_reset-{dtype}-D2-2lvl-x-target", "lod_reset",
              {"x": (x, _lod([1, 2], [2, 0, 4]))}, {"target_lod": [0, 5, 6]}, ["x"], (6, 2),
              dtype, rng)
        rng = g.rng()
        x = g.values(rng, (4, 2), dtype)
        g.add(f"concat1-{dtype}-D2", "sequence_concat", {"x0": (x, _lod([1, 3]))}, {}, ["x0"],
              (4, 2), dtype, rng, expect="fd",
              why="a single input: Paddle refuses, lodarrow returns a copy (docs/operators.md#fewer-restrictions)")
        rng = g.rng()
        x = g.values(rng, (2, 4, 2), dtype)
        g.add(f"unpad-{dtype}-D2-all-zero", "sequence_unpad",
              {"x": (x, None), "length": (np.array([0, 0], np.int64), None)}, {}, ["x"], (0, 2),
              dtype, rng, expect="fd", no_paddle="Paddle 2.6 crashes (SIGFPE) on all-zero lengths",
              why="all-zero lengths: Paddle crashes, lodarrow returns an empty output "
                  "(docs/operators.md#nothing-undefined)")


def _scatter_cases(g):
    for dtype in FLOATS:
        for w in (1, 4):
            for tag, idlens, ids in (("dups", [3, 0, 2], [0, 2, 0, 1, 1]),
                                     ("short", [2, 1], [3, 3, 0])):
                rng = g.rng()
                n = len(idlens) + 1
                x = g.values(rng, (n, w), dtype)
                index = np.array(ids, np.int64).reshape(-1, 1) % w
                upd = g.values(rng, (len(ids), 1), dtype)  # Paddle wants the ids' LoD on it
                g.add(f"scatter-{dtype}-W{w}-{tag}", "sequence_scatter",
                      {"input": (x, None), "index": (index, _lod(idlens)),
                       "updates": (upd, _lod(idlens))},
                      {}, ["input", "updates"], (n, w), dtype, rng)


def _conv_cases(g):
    configs = [
        # (tag, D, F, context_start, context_length, lens, trainable padding)
        ("c3s-1", 2, 3, -1, 3, [2, 0, 3, 1], False),
        ("c3s-1-pad", 2, 3, -1, 3, [2, 0, 3, 1], True),
        ("c2s0", 1, 2, 0, 2, [3, 1, 2], False),
        ("c3s-2-pad", 3, 2, -2, 3, [4, 1, 0, 2], True),
        ("c4s-1-pad", 2, 2, -1, 4, [3, 2, 4], True),
        ("c1s0", 3, 2, 0, 1, [2, 0, 3], False),
        ("c2s1-long", 2, 2, 1, 2, [3, 4, 5], False),
        ("c2s1-long-pad", 2, 2, 1, 2, [3, 4, 5], True),
    ]
    # Paddle's filter gradient is wrong when context_start > 0 and a non-empty sequence is no
    # longer than context_start (docs/gradients.md): the input gradient is still compared to Paddle's.
    bug = [
        ("c2s1-short", 2, 2, 1, 2, [1, 3, 2], False),
        ("c2s2-short", 1, 2, 2, 2, [2, 4, 1, 3], False),
        ("c3s1-short", 2, 2, 1, 3, [1, 3], False),
    ]
    # with trainable padding the same shapes get Paddle's right filter gradient
    configs.append(("c3s1-short-pad", 2, 2, 1, 3, [1, 3], True))
    configs.append(("c2s2-short-pad", 1, 2, 2, 2, [2, 4, 1, 3], True))
    for dtype in FLOATS:
        rng = g.rng()
        lens = TWO[1]
        n = sum(lens[-1])
        g.add(f"conv-c3s-1-2lvl-{dtype}", "sequence_conv",
              {"x": (g.values(rng, (n, 2), dtype), _lod(*lens)),
               "filter": (g.values(rng, (6, 2), dtype), None)},
              {"context_start": -1, "context_length": 3}, ["x", "filter"], (n, 2), dtype, rng,
              expect="fd", why="two levels: Paddle refuses, lodarrow convolves within the last "
                               "(docs/operators.md#multi-level-input)")
        # bias: Paddle's sequence_conv layer adds it after the operator (elementwise_add)
        rng = g.rng()
        g.add(f"conv-c3s-1-bias-{dtype}", "sequence_conv",
              {"x": (g.values(rng, (6, 2), dtype), _lod([2, 0, 4])),
               "filter": (g.values(rng, (6, 3), dtype), None),
               "bias": (g.values(rng, (3,), dtype), None)},
              {"context_start": -1, "context_length": 3}, ["x", "filter", "bias"], (6, 3), dtype,
              rng, **({} if dtype == "float32" else dict(
                  expect="fd", why="float64 sequence_conv: Paddle 2.6's CPU kernel is float32 "
                                   "only (docs/operators.md#sequence_conv), it refuses")))
        for (tag, d, f, cs, cl, lens, pad), is_bug in [(c, False) for c in configs] + \
                [(c, True) for c in bug]:
            rng = g.rng()
            n = sum(lens)
            ts = {"x": (g.values(rng, (n, d), dtype), _lod(lens)),
                  "filter": (g.values(rng, (cl * d, f), dtype), None)}
            diff = ["x", "filter"]
            if pad:
                up, down = max(0, -cs), max(0, cs + cl - 1)
                ts["padding_data"] = (g.values(rng, (up + down, d), dtype), None)
                diff.append("padding_data")
            kw = {}
            if dtype == "float64":
                kw = dict(expect="fd", why="float64 sequence_conv: Paddle 2.6's CPU kernel is "
                                           "float32 only (docs/operators.md#sequence_conv), it refuses")
            elif is_bug:
                kw = dict(expect="paddle-input", why="Paddle's filter gradient is wrong here "
                          "(context_start > 0, a sequence no longer than context_start); the "
                          "filter gradient is checked by finite differences")
            g.add(f"conv-{tag}-{dtype}", "sequence_conv", ts,
                  {"context_start": cs, "context_length": cl}, diff, (n, f), dtype, rng, **kw)


def _topk_cases(g):
    for dtype in FLOATS:
        rng = g.rng()
        rows, cols, ch = np.array([2, 1, 3]), np.array([3, 4, 1]), 2
        sizes = ch * rows * cols
        x = g.values(rng, (int(sizes.sum()), 1), dtype)
        g.add(f"topk-{dtype}", "sequence_topk_avg_pooling",
              {"x": (x, _lod(sizes)), "row": (np.zeros((int(rows.sum()), 1), dtype), _lod(rows)),
               "col": (np.zeros((int(cols.sum()), 1), dtype), _lod(cols))},
              {"topks": [1, 2, 5], "channel_num": ch}, ["x"], (int(rows.sum()), 3 * ch), dtype,
              rng, expect="fd",
              no_paddle="Paddle 2.6 registers no sequence_topk_avg_pooling operator",
              why="not runnable in any installable Paddle (docs/operators.md#sequence_topk_avg_pooling)")


def build_cases():
    g = _Gen()
    _pool_cases(g)
    _softmax_cases(g)
    _expand_cases(g)
    _layout_cases(g)
    _scatter_cases(g)
    _conv_cases(g)
    _topk_cases(g)
    ids = [c.id for c in g.cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return g.cases


CASES = build_cases()


# ------------------------------------------------------------------------ Paddle's side
def _build(paddle, case, v):
    """The Paddle graph of ``case``; ``v`` maps tensor names to static data variables."""
    snn = paddle.static.nn
    from paddle.base.layer_helper import LayerHelper
    op, a = case.op, case.attrs
    if op == "sequence_pool":
        return snn.sequence_pool(v["x"], a["pool_type"], is_test=False, pad_value=a["pad_value"])
    if op == "sequence_first_step":
        return snn.sequence_first_step(v["x"])
    if op == "sequence_last_step":
        return snn.sequence_last_step(v["x"])
    if op == "sequence_softmax":
        return snn.sequence_softmax(v["x"])
    if op == "sequence_expand":
        return snn.sequence_expand(v["x"], v["y"], ref_level=a["ref_level"])
    if op == "sequence_expand_as":
        return snn.sequence_expand_as(v["x"], v["y"])
    if op == "sequence_pad":
        # pad_value is not differentiable: fed as data (see run_case)
        pv = paddle.static.data("pad_value__", [1], str(case.dout.dtype))
        return snn.sequence_pad(v["x"], pv, maxlen=a["maxlen"])[0]
    if op == "sequence_unpad":
        return snn.sequence_unpad(v["x"], v["length"])
    if op == "sequence_concat":
        return snn.sequence_concat([v[k] for k in case.tensors])
    if op == "sequence_slice":
        return snn.sequence_slice(v["x"], v["offset"], v["length"])
    if op == "sequence_reverse":
        return snn.sequence_reverse(v["x"])
    if op == "sequence_reshape":
        return snn.sequence_reshape(v["x"], a["new_dim"])
    if op == "sequence_scatter":
        return snn.sequence_scatter(v["input"], v["index"], v["updates"])
    if op in ("lod_reset", "lod_append"):
        helper = LayerHelper(op)
        out = helper.create_variable_for_type_inference(dtype=v["x"].dtype)
        inputs = {"X": v["x"]}
        attrs = {"append": op == "lod_append"}
        if "y" in v:
            inputs["Y"] = v["y"]
        else:
            attrs["target_lod"] = list(a["target_lod"] if op == "lod_reset" else a["level"])
        helper.append_op(type="lod_reset", inputs=inputs, outputs={"Out": out}, attrs=attrs)
        return out
    if op == "sequence_conv":
        helper = LayerHelper("sequence_conv")
        out = helper.create_variable_for_type_inference(dtype=v["x"].dtype)
        inputs = {"X": [v["x"]], "Filter": [v["filter"]]}
        if "padding_data" in v:
            inputs["PaddingData"] = [v["padding_data"]]
        helper.append_op(type="sequence_conv", inputs=inputs, outputs={"Out": out},
                         attrs={"contextStride": 1, "contextStart": a["context_start"],
                                "contextLength": a["context_length"],
                                "paddingTrainable": "padding_data" in v})
        if "bias" in v:  # as the sequence_conv layer adds its bias
            out = paddle.add(out, v["bias"])
        return out
    raise AssertionError(op)


def _lod_tensor(core, place, arr, lod):
    t = core.LoDTensor()
    t.set(np.ascontiguousarray(arr), place)
    if lod:
        t.set_lod(lod)
    return t


def run_case(paddle, exe, case, place):
    """Paddle's forward and gradients for ``case``: a dict (status "ok" or "refused")."""
    core = paddle.base.core
    main, startup = paddle.static.Program(), paddle.static.Program()
    try:
        with paddle.static.program_guard(main, startup):
            v = {}
            for name, (arr, lod) in case.tensors.items():
                shape = list(arr.shape)
                if lod and not case.out_shape[0]:  # the output's static shape follows
                    shape[0] = -1
                v[name] = paddle.static.data(name, shape, str(arr.dtype),
                                             lod_level=len(lod) if lod else 0)
                v[name].stop_gradient = name not in case.diff
            out = _build(paddle, case, v)
            dout = paddle.static.data("dout__", ([-1] + list(case.dout.shape[1:])
                                                 if case.out_shape[0] else list(out.shape)),
                                      str(case.dout.dtype))
            # the loss sum(out * dout): its gradient w.r.t. out is dout, carrying out's LoD
            # (fed as target_gradients, dout would come without one, and some backward
            # kernels read the LoD of the output's gradient: sequence_unpad's crashes)
            if case.out_shape[0]:
                loss = paddle.sum(out * dout)
                grads = paddle.static.gradients([loss], [v[n] for n in case.diff])
            else:  # an empty output: Paddle's sum refuses it, so dout is fed directly
                grads = paddle.static.gradients([out], [v[n] for n in case.diff],
                                                target_gradients=[dout])
        feed = {n: _lod_tensor(core, place, arr, lod) for n, (arr, lod) in case.tensors.items()}
        feed["dout__"] = case.dout
        if case.op == "sequence_pad":
            feed["pad_value__"] = np.asarray(case.attrs["pad_value"], case.dout.dtype).reshape(1)
        fetch = [out] + [g for g in grads if g is not None]
        with paddle.static.scope_guard(paddle.static.Scope()):
            exe.run(startup)
            got = exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)
    except Exception as exc:  # Paddle refuses the case: record its message
        msg = str(exc).strip().splitlines()
        msg = [m for m in msg if m.strip() and not m.startswith(("---", "  File", "C++ Traceback",
                                                                 "Python Traceback"))]
        return {"status": "refused", "reason": f"{type(exc).__name__}: "
                                               + " | ".join(msg[-3:])[:600]}
    res = {"status": "ok", "out": (np.array(got[0]), got[0].lod()), "grads": {}}
    it = iter(got[1:])
    for name, g in zip(case.diff, grads):
        if g is None:
            res["grads"][name] = None
        else:
            t = next(it)
            res["grads"][name] = (np.array(t), t.lod())
    return res


def conv_filter_by_linearity(paddle, exe, case, place):
    """d sum(out * dout) / d filter from Paddle's own forward: the output is linear in the
    filter, so entry (i, j) is the loss with the unit filter e_ij (exact, no step size)."""
    filt = case.tensors["filter"][0]
    want = np.zeros(filt.shape, np.float64)
    for i in range(filt.shape[0]):
        for j in range(filt.shape[1]):
            unit = np.zeros_like(filt)
            unit[i, j] = 1
            c = dataclasses.replace(case, tensors=dict(case.tensors, filter=(unit, None)),
                                    diff=("x",))
            r = run_case(paddle, exe, c, place)
            if r["status"] != "ok":
                return None
            want[i, j] = np.sum(r["out"][0].astype(np.float64) * case.dout)
    return want


def main(argv):
    out_dir = argv[1]
    os.environ.setdefault("GLOG_minloglevel", "2")
    t0 = time.perf_counter()
    import paddle
    paddle.enable_static()
    place = paddle.CPUPlace()
    exe = paddle.static.Executor(place)
    results = {"paddle": paddle.__version__}
    for case in CASES:
        if case.no_paddle:
            results[case.id] = {"status": "not run", "reason": case.no_paddle}
            continue
        print(case.id, file=sys.stderr, flush=True)  # the last one names a crash
        r = run_case(paddle, exe, case, place)
        if case.expect == "paddle-input" and r["status"] == "ok":
            r["filter_by_linearity"] = conv_filter_by_linearity(paddle, exe, case, place)
        results[case.id] = r
    results["seconds"] = time.perf_counter() - t0
    path = os.path.join(out_dir, "grad_paddle.pkl")
    with open(path + ".tmp", "wb") as f:
        pickle.dump(results, f)
    os.replace(path + ".tmp", path)
    print(f"{len(CASES)} cases, {results['seconds']:.1f} s, written to {path}")


if __name__ == "__main__":
    os.environ.setdefault("GLOG_minloglevel", "2")
    main(sys.argv)
