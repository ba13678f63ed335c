"""Resume through PyTorch's loaders (docs/training.md#resuming): torchdata's
``StatefulDataLoader`` saves and restores the dataset from ``.torch()`` mid-epoch, with and
without workers (which prefetch past what the loop received); a plain ``DataLoader`` resumes
from the counter the training loop keeps (``dataset.set_epoch(e, start_step=s)``), with another
worker count.  Each time the batches after the resume are exactly the uninterrupted run's."""

import functools
import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

pytestmark = [
    # torchdata 0.11 calls an API torch 2.13 deprecates (not lodarrow's)
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),
    # 3 workers on a 2-core runner: on purpose (a worker count that divides nothing)
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]

N = 900
KW = {"max_tokens": 384, "balance": "tokens", "row_groups": 1, "seed": 3, "to": "torch",
      "extra_columns": ["label"]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two files of several row groups; sequence ``i`` holds ``i, i + 1, ...``, label ``i``."""
    rng = np.random.default_rng(5)
    lengths = np.clip(rng.lognormal(2.8, 0.8, N), 1, 200).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = (np.repeat(np.arange(N) - offsets[:-1], lengths) + np.arange(offsets[-1]))
    table = pa.table({"ids": pa.ListArray.from_arrays(pa.array(offsets),
                                                      pa.array(values.astype(np.int32))),
                      "label": np.arange(N, dtype=np.int64)})
    folder = tmp_path_factory.mktemp("stateful")
    pq.write_table(table.slice(0, 500), folder / "a.parquet", row_group_size=100)
    pq.write_table(table.slice(500), folder / "b.parquet", row_group_size=150)
    return str(folder)


def _loader(path, **kw):
    return la.batch_loader(path, "ids", **{**KW, **kw})


def _same(got, expected):
    """The batches ``got`` are ``expected``, one for one, every array equal."""
    assert len(got) == len(expected)
    for k, (a, b) in enumerate(zip(got, expected)):
        assert a.keys() == b.keys(), k
        for key in a:
            assert torch.equal(a[key], b[key]), f"batch {k}: {key} differs"


def _check_values(batches):
    for b in batches:
        rows, lengths = b["rows"].numpy(), b["lengths"].numpy()
        assert np.array_equal(b["label"].numpy(), rows)
        for k, row in enumerate(rows):
            assert np.array_equal(b["values"][k, :lengths[k]].numpy(),
                                  np.arange(row, row + lengths[k]))


@pytest.fixture(scope="module")
def uninterrupted(corpus):
    """The whole epoch 0, in plan order (one process, no workers)."""
    batches = list(_loader(corpus))
    rows = np.concatenate([b["rows"].numpy() for b in batches])
    assert np.array_equal(np.sort(rows), np.arange(N))
    _check_values(batches)
    return batches


@pytest.mark.parametrize("num_workers, k", [(0, 1), (0, 9), (2, 1), (2, 4), (2, 11), (3, 2)])
def test_stateful_dataloader_resumes_exactly(corpus, uninterrupted, num_workers, k):
    dl = stateful.StatefulDataLoader(_loader(corpus).torch(), batch_size=None,
                                     num_workers=num_workers)
    it = iter(dl)
    head = [next(it) for _ in range(k)]
    state = json.loads(json.dumps(dl.state_dict()))  # a checkpoint goes through a file
    del it, dl
    again = stateful.StatefulDataLoader(_loader(corpus).torch(), batch_size=None,
                                        num_workers=num_workers)
    again.load_state_dict(state)
    rest = list(again)
    _same(head, uninterrupted[:k])
    _same(rest, uninterrupted[k:])


def test_stateful_dataloader_checkpoint_twice_and_next_epoch(corpus, uninterrupted):
    """Save, resume, save again later, resume again: still the uninterrupted epoch; the epoch
    after it (``set_epoch(1)``) is another order of the same sequences."""
    got = []
    state = None
    for stop in (3, 8, None):
        dl = stateful.StatefulDataLoader(_loader(corpus).torch(), batch_size=None,
                                         num_workers=2)
        if state is not None:
            dl.load_state_dict(state)
        it = iter(dl)
        for b in it:
            got.append(b)
            if stop is not None and len(got) == stop:
                break
        state = json.loads(json.dumps(dl.state_dict()))
        del it, dl
    _same(got, uninterrupted)
    dataset = _loader(corpus).torch()
    dataset.set_epoch(1)
    second = list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2))
    rows = [b["rows"].numpy() for b in second]
    assert np.array_equal(np.sort(np.concatenate(rows)), np.arange(N))
    assert not all(len(a) == len(b["rows"]) and np.array_equal(a, b["rows"].numpy())
                   for a, b in zip(rows, uninterrupted))


@pytest.mark.parametrize("before, after", [(2, 3), (3, 1), (2, 0), (0, 2)])
def test_user_kept_counter_with_another_worker_count(corpus, before, after):
    """A plain DataLoader: the loop counts the batches it received; after a restart
    ``dataset.set_epoch(epoch, start_step=count)`` with another worker count gives exactly
    the batches not yet received, in order."""
    epoch = 2
    dataset = _loader(corpus).torch()
    dataset.set_epoch(epoch)
    whole = list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=before))
    assert len(whole) == len(dataset)
    _check_values(whole)
    k = len(whole) // 3
    dataset = _loader(corpus).torch()
    dataset.set_epoch(epoch)
    received = 0
    it = iter(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=before))
    for _ in range(k):
        next(it)
        received += 1  # the counter the training loop keeps (and checkpoints)
    del it
    restarted = _loader(corpus).torch()
    restarted.set_epoch(epoch, start_step=received)
    rest = list(torch.utils.data.DataLoader(restarted, batch_size=None, num_workers=after))
    _same(rest, whole[k:])


def test_persistent_workers_follow_set_epoch_and_start_step(corpus, uninterrupted):
    """Persistent workers outlive the epoch: set_epoch (with a start step) still reaches
    them; each pass is the plan of the epoch it was set to."""
    dataset = _loader(corpus).torch()
    dl = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                     persistent_workers=True)
    # (a comprehension, not list(dl): list() asks len(dl), and a persistent DataLoader
    # compares each pass with the length asked for in the pass before, a warning when the
    # epochs differ in length)
    dataset.set_epoch(0, start_step=5)
    _same([b for b in dl], uninterrupted[5:])
    dataset.set_epoch(1)
    one = [b for b in dl]
    reference = _loader(corpus)
    reference.set_epoch(1)
    _same(one, list(reference))
    dataset.set_epoch(0)
    _same([b for b in dl], uninterrupted)


def _log_warnings(path, worker_id):
    """A worker_init_fn: every warning of the worker (each time) is a line of ``path``."""
    def show(message, category, filename, lineno, file=None, line=None):
        with open(path, "a") as f:
            f.write(f"worker {worker_id}: {category.__name__}: {message}\n")

    warnings.resetwarnings()
    warnings.simplefilter("always")
    warnings.showwarning = show


def test_persistent_workers_warn_once_when_an_epoch_repeats(corpus, uninterrupted, tmp_path):
    """A second pass without set_epoch (or a resume) is the same batches again: the workers
    (other processes: their warnings go to their stderr) warn once; not after set_epoch."""
    log = tmp_path / "warnings.txt"
    dataset = _loader(corpus).torch()
    dl = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                     persistent_workers=True,
                                     worker_init_fn=functools.partial(_log_warnings, log))
    _same([b for b in dl], uninterrupted)
    assert not log.exists()
    _same([b for b in dl], uninterrupted)  # the same epoch again, as the warning says
    _same([b for b in dl], uninterrupted)
    dataset.set_epoch(1)
    assert len([b for b in dl]) == len(dataset)
    del dl
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and "UserWarning: batch_loader: epoch 0 is iterated again" in lines[0]


# --- StatefulDataLoader where options meet: another world, another worker count ------------

def _world_run(corpus, before, after, workers, stop, **kw):
    """``before`` ranks under StatefulDataLoader stop after ``stop`` steps; ``after`` ranks
    resume from rank 0's StatefulDataLoader state with the same worker count; every rank's
    rows, all runs together."""
    got, states = [], []
    for r in range(before):
        dl = stateful.StatefulDataLoader(
            _loader(corpus, num_replicas=before, rank=r, **kw).torch(), batch_size=None,
            num_workers=workers)
        it = iter(dl)
        for _ in range(stop):
            got.append(next(it)["rows"].numpy())
        states.append(json.loads(json.dumps(dl.state_dict())))
        del it, dl
    steps = set()
    for r in range(after):
        dl = stateful.StatefulDataLoader(
            _loader(corpus, num_replicas=after, rank=r, **kw).torch(), batch_size=None,
            num_workers=workers)
        dl.load_state_dict(states[0])
        rest = [b["rows"].numpy() for b in dl]
        steps.add(len(rest))
        got.extend(rest)
    assert len(steps) == 1, "unequal steps per rank after the resume"
    return np.concatenate(got)


@pytest.mark.parametrize("before, after, workers, stop", [(4, 2, 2, 5), (2, 3, 1, 4),
                                                          (3, 1, 2, 3), (2, 3, 0, 2)])
def test_stateful_dataloader_resumes_on_another_world_exactly_once(corpus, before, after,
                                                                   workers, stop):
    """A StatefulDataLoader state saved on one num_replicas resumes on another: each worker
    holds only its own next step, so the workers agree on the step the loop had received;
    the rest of the epoch is planned for the new world.  Every sequence exactly once."""
    rows = _world_run(corpus, before, after, workers, stop, pad_to_multiple_of=16)
    assert np.array_equal(np.sort(rows), np.arange(N))


def test_stateful_dataloader_refuses_another_worker_count_and_says_what_works(corpus,
                                                                             uninterrupted):
    dataset = _loader(corpus).torch()
    dl = stateful.StatefulDataLoader(dataset, batch_size=None, num_workers=2)
    it = iter(dl)
    head = [next(it) for _ in range(5)]
    state = json.loads(json.dumps(dl.state_dict()))
    del it, dl
    other = stateful.StatefulDataLoader(_loader(corpus).torch(), batch_size=None,
                                        num_workers=3)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match=r"saved with num_workers=2.*same worker count only"
                                         r".*dataset\.loader_state"):
        next(iter(other))
    # what works: the loader's own state, with any DataLoader and worker count
    for workers in (3, 0):
        loader = _loader(corpus)
        loader.load_state_dict(dataset.loader_state(state))
        rest = list(torch.utils.data.DataLoader(loader.torch(), batch_size=None,
                                                num_workers=workers))
        _same(head, uninterrupted[:5])
        _same(rest, uninterrupted[5:])


@pytest.mark.parametrize("every", [3, 7])
def test_loader_state_counts_the_steps_since_torchdatas_snapshot(corpus, uninterrupted,
                                                                 every):
    """With ``snapshot_every_n_steps`` above 1 torchdata keeps the workers' states of its last
    snapshot and the steps since; the loader state counts both."""
    dataset = _loader(corpus).torch()
    dl = stateful.StatefulDataLoader(dataset, batch_size=None, num_workers=2,
                                     snapshot_every_n_steps=every)
    it = iter(dl)
    for _ in range(8):
        next(it)
    state = json.loads(json.dumps(dl.state_dict()))
    del it, dl
    assert dataset.loader_state(state)["cursor"] == 8
    same = stateful.StatefulDataLoader(_loader(corpus).torch(), batch_size=None,
                                       num_workers=2, snapshot_every_n_steps=every)
    same.load_state_dict(state)
    _same(list(same), uninterrupted[8:])


_TRAIN_AND_DIE = """
import os, sys, time, torch, lodarrow as la
out = sys.argv[1] if len(sys.argv) > 1 else None

def note(worker_id):
    with open(f"{out}.{worker_id}", "w") as f:
        f.write(str(os.getpid()))

if __name__ == "__main__":  # (forkserver workers import this module)
    loader = la.batch_loader(sys.argv[2], "ids", max_tokens=65536, to="torch", progress=False)
    dl = torch.utils.data.DataLoader(loader.torch(), batch_size=None, num_workers=2,
                                     worker_init_fn=note, multiprocessing_context=sys.argv[3])
    for k, batch in enumerate(dl):
        if k == 2:
            open(out, "w").close()
        time.sleep(0.2)  # the workers fill the pipe meanwhile
"""


@pytest.mark.parametrize("start", ["fork", "forkserver"])
def test_workers_end_when_the_training_process_is_killed(corpus, tmp_path, start):
    """``kill -9`` of the training process: its DataLoader workers end too (a batch crossing
    by value can fill the pipe; a worker would otherwise wait at exit forever), also under
    ``forkserver``, where a worker's parent is the fork server, which outlives the trainer."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import lodarrow

    rng = np.random.default_rng(0)  # batches of 256 KiB: more than a pipe holds
    lengths = rng.integers(100, 500, 6000)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    pq.write_table(pa.table({"ids": pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(np.zeros(offsets[-1], np.int32)))}),
        tmp_path / "big.parquet")
    corpus = str(tmp_path / "big.parquet")
    script = tmp_path / "train.py"
    script.write_text(_TRAIN_AND_DIE)
    pids = tmp_path / "pids"
    env = dict(os.environ, PYTHONPATH=str(os.path.dirname(os.path.dirname(lodarrow.__file__))))
    proc = subprocess.Popen([sys.executable, str(script), str(pids), corpus, start], env=env)
    try:
        deadline = time.monotonic() + 60
        while not pids.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "no batch came"
            time.sleep(0.1)
        workers = [int((tmp_path / f"pids.{w}").read_text()) for w in range(2)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 15
        alive = workers
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [w for w in alive if _alive(w)]
        assert not alive, f"workers {alive} outlived the training process"
    finally:
        if proc.poll() is None:
            proc.kill()


def _alive(pid):
    import os

    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        os.kill(pid, 0)
        return True
