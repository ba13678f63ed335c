"""A real elastic resume (docs/training.md#resuming): ``torch.distributed`` with the gloo
backend on 127.0.0.1, a fresh interpreter per rank (as torchrun starts them), ``DataLoader``
workers, batches padded to a multiple of 64 under a token budget.  4 ranks x 2 workers under
torchdata's ``StatefulDataLoader`` checkpoint at a random step and stop; 2 ranks x 2 workers
resume from that ``StatefulDataLoader`` state (another world: the workers agree on the step
received) and stop again at a random step, saving the loader's own state
(``dataset.loader_state``); 3 ranks x 3 workers under a plain ``DataLoader`` finish the epoch.
Across the three runs every sequence of the epoch is received exactly once, every run gives
each rank as many steps, no batch's slots (padding included) exceed the token budget, and
every batch's values are its rows' (tests/training_dist_worker.py is one rank)."""

import json
import os
import secrets
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not (dist.is_available() and dist.is_gloo_available()):
    pytest.skip("torch.distributed has no gloo backend in this build", allow_module_level=True)

import lodarrow as la  # noqa: E402
from conftest import run_python  # noqa: E402

WORKER = Path(__file__).with_name("training_dist_worker.py")
N = 3000
KW = {"max_tokens": 1024, "balance": "tokens", "row_groups": 2, "seed": 9,
      "pad_to_multiple_of": 64}
#: One run (all its ranks) must finish within this: a hung collective fails the test.
RUN_TIMEOUT = 120


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two files: equal row groups in one, very different sizes in the other; sequence ``i``
    holds ``i, i + 1, ...`` and its label is ``i``."""
    rng = np.random.default_rng(2)
    lengths = np.clip(rng.lognormal(3.2, 0.9, N), 1, 600).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    starts = np.repeat(np.arange(N, dtype=np.int64) - offsets[:-1], lengths)
    values = (starts + np.arange(offsets[-1])).astype(np.int32)
    table = pa.table({"ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
                      "label": np.arange(N, dtype=np.int64)})
    folder = tmp_path_factory.mktemp("dist")
    pq.write_table(table.slice(0, 2000), folder / "part-0.parquet", row_group_size=500)
    with pq.ParquetWriter(folder / "part-1.parquet", table.schema) as w:
        at = 2000
        for size in (700, 40, 260):
            w.write_table(table.slice(at, size))
            at += size
    return str(folder), lengths


def _launch(tmp, path, runs, seed):
    """Run ``runs`` one after the other (tests/training_dist_worker.py, bounded in time) and
    return each run's records, one per rank."""
    config = {"path": path, "kw": KW, "out": str(tmp), "seed": seed, "timeout": 60,
              "run_timeout": RUN_TIMEOUT, "runs": [
                  {"name": name, "world": world, "num_workers": workers, "stop": stop,
                   "loader": kind}
                  for name, world, workers, stop, kind in runs]}
    (tmp / "config.json").write_text(json.dumps(config))
    env = {"OMP_NUM_THREADS": "1"}  # as torchrun sets it
    if os.path.isdir("/sys/class/net/lo"):
        env["GLOO_SOCKET_IFNAME"] = "lo"  # loopback, whatever the hostname resolves to
    try:
        proc = run_python([WORKER, tmp / "config.json"], env=env, cwd=tmp,
                          timeout=len(runs) * RUN_TIMEOUT + 60)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the launcher did not finish (seed {seed}):\n{exc.output}\n{exc.stderr}")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"a run failed (seed {seed}):\n{log}"
    assert "batch_loader" not in log, f"the loader warned:\n{log}"
    return [[json.loads((tmp / name / f"rank-{r}.json").read_text()) for r in range(world)]
            for name, world, _, _, _ in runs]


def test_checkpoint_stop_resume_on_other_worlds_and_worker_counts(corpus, tmp_path):
    path, lengths = corpus
    seed = secrets.randbits(32)
    why = f"(seed {seed})"
    plan = [("run1-4ranks-2workers-stateful", 4, 2, True, "stateful"),
            ("run2-2ranks-2workers-stateful", 2, 2, True, "stateful"),
            ("run3-3ranks-3workers", 3, 3, False, "plain")]
    runs = _launch(tmp_path, path, plan, seed)
    cursor = 0
    state = None
    for (name, world, workers, stop, _), ranks in zip(plan, runs):
        steps = [len(r["rows"]) for r in ranks]
        assert len(set(steps)) == 1, f"{name}: unequal steps per rank {steps} {why}"
        assert all(r["steps_all_ranks"] == steps for r in ranks), why
        assert all(r["start"] == cursor for r in ranks), f"{name}: resumed elsewhere {why}"
        assert all(not r["bad"] for r in ranks), f"{name}: batches whose values are not " \
                                                  f"their rows' {why}"
        for r in ranks:
            assert all(c <= KW["max_tokens"] or len(rows) == 1
                       for c, rows in zip(r["costs"], r["rows"])), f"{name}: budget {why}"
            assert all(len(rows) for rows in r["rows"]), f"{name}: an empty batch {why}"
        lens = {r["len"] for r in ranks}
        assert len(lens) == 1, why
        if stop:
            assert 1 <= steps[0] <= max(lens.pop() - cursor - 1, 1), why
            states = [_position(r["state"]) for r in ranks]
            assert all(s == states[0] for s in states), f"{name}: ranks saved different " \
                                                        f"states {why}"
            assert states[0]["cursor"] == cursor + steps[0]
            state = states[0]
        else:
            assert cursor + steps[0] == lens.pop(), f"{name}: the epoch did not end {why}"
        cursor += steps[0]
    assert state["segments"] == [[4, 0], [2, _position(runs[0][0]["state"])["cursor"]]], why
    received = np.array([row for ranks in runs for r in ranks for b in r["rows"] for row in b])
    counts = np.bincount(received, minlength=N)
    assert counts.max() == 1, f"sequences received twice: {np.flatnonzero(counts > 1)[:20]} {why}"
    assert counts.min() == 1, f"sequences never received: {np.flatnonzero(counts == 0)[:20]} {why}"
    # the first run delivered exactly what the uninterrupted 4-rank plan has in its first steps
    first = runs[0]
    for r, rec in enumerate(first):
        loader = la.batch_loader(path, "ids", num_replicas=4, rank=r, **KW)
        plan_rows = loader.plan()
        for s, rows in enumerate(rec["rows"]):
            assert np.array_equal(plan_rows[s], rows), f"run 1 rank {r} step {s} {why}"


def _position(saved):
    """The loader's position a checkpoint holds (a StatefulDataLoader's: as the loader's)."""
    if saved["kind"] == "stateful":
        from lodarrow._training._torch import stateful_loader_state

        return stateful_loader_state(saved["state"])
    return saved["state"]
