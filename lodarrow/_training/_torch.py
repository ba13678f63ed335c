"""A :class:`BatchLoader` as a PyTorch ``IterableDataset`` (docs/training.md#loader).

Worker ``i`` of ``k`` makes the steps ``i, i + k, ...`` from the cursor, so the ``DataLoader``
(which takes from its workers in turn) hands the batches out in plan order, whatever ``k``.

- **Epochs reach every worker.**  ``set_epoch`` and ``load_state_dict`` on the dataset (in the
  main process) write the loader's position into shared memory; each worker reads it when an
  iteration starts, so persistent workers (``persistent_workers=True``) follow too.  A second
  pass over the same position warns once.
- **Arrays through one shared ring a worker.**  torch hands a worker's tensors to the main
  process through shared memory, a segment per tensor (a file, a descriptor and a mapping
  each).  With ``to="torch"`` a worker instead writes the batch's NumPy arrays into its ring
  of a memory file shared with the main process, which copies them out into the dict of
  tensors (``_ring.py``); where the ring cannot take them they cross pickled by value
  (:class:`_WireBatch`).
- **torchdata's ``StatefulDataLoader``.**  ``state_dict`` / ``load_state_dict`` are called in
  each worker: a worker's state is the loader's position and that worker's next step, so the
  ``StatefulDataLoader`` resumes with the first batch not yet received.  torchdata restores
  worker states on the same worker count only (another is refused here, saying what works).
  On another ``num_replicas`` the workers agree on the step the loop had received (the
  smallest of their next steps, posted in the shared block) before the rest is re-planned;
  ``loader_state`` turns a ``StatefulDataLoader`` state into the loader's own, which any
  ``DataLoader`` and worker count take (docs/training.md#resuming).
"""

import functools
import json
import os
import warnings
import weakref

__all__ = ["stateful_loader_state", "torch_dataset"]

from ._exchange import ExchangeRoot
from ._ring import KEY_ORDER, BatchRing, SharedLock, alive, as_tensors, shared_array

_STATE_BYTES = 1 << 16
#: How long a worker waits for the others' saved steps on a resume on another world.
_AGREE_SECONDS = 120
_CLASS = None


def torch_dataset(torch, loader, link):
    """``loader`` as a ``TorchBatches``; ``link``: what the dataset uses of the loader beyond
    its public methods (:class:`lodarrow._training._loader.DatasetLink`)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _make_class(torch)
    return _CLASS(loader, link)


def stateful_loader_state(dataloader_state):
    """A loader state from a torchdata ``StatefulDataLoader`` state dict (see
    ``TorchBatches.loader_state``).

    Without workers the dataset's state is the loader's own.  With workers each worker's
    state holds its next step of the epoch; the training loop had received every step before
    the smallest of them, plus the steps torchdata counts since its last snapshot."""
    if not isinstance(dataloader_state, dict):
        raise TypeError(f"loader_state: expected a StatefulDataLoader state dict, got "
                        f"{type(dataloader_state).__name__}")
    if "dataset_state" in dataloader_state and "_snapshot" not in dataloader_state:
        state = dataloader_state["dataset_state"]
        if not (isinstance(state, dict) and "cursor" in state):
            raise ValueError("loader_state: the state holds no batch_loader state (was it "
                             "saved from a StatefulDataLoader over loader.torch()?)")
        return state
    try:
        snapshot = dataloader_state["_snapshot"]
        workers = [w["dataset_state"] for w in snapshot["_worker_snapshots"].values()]
        since = int(dataloader_state.get("_steps_since_snapshot", 0))
    except (KeyError, TypeError):
        raise ValueError("loader_state: not a StatefulDataLoader state dict (no '_snapshot' "
                         "with '_worker_snapshots')") from None
    workers = [w for w in workers if isinstance(w, dict) and "epoch_step" in w]
    if not workers:
        raise ValueError("loader_state: no worker state of loader.torch() in this "
                         "StatefulDataLoader state")
    received = min(w["epoch_step"] for w in workers) + since
    return {**workers[0]["loader"], "cursor": received}


_WATCHING = []


def _exit_with_parent():
    """A DataLoader worker whose training process died (``kill -9``) ends too.  torch's own
    watchdog ends the worker's loop, but a batch crossing by value can fill the pipe, and
    the worker would then wait forever at exit on the queue's feeder thread (the other
    workers hold the pipe's read end open): a daemon thread ends the process instead.  It
    watches the process that started the worker (``multiprocessing.parent_process``): under
    ``forkserver`` the worker's parent is the fork server, which outlives the training
    process."""
    import multiprocessing
    import threading
    import time

    if _WATCHING:
        return
    ppid = os.getppid()
    starter = multiprocessing.parent_process()
    trainer = starter.pid if starter is not None else ppid

    def gone():
        return os.getppid() != ppid or not alive(trainer)

    def watch():
        while not gone():
            time.sleep(1.0)
        os._exit(0)

    _WATCHING.append(threading.Thread(target=watch, name="lodarrow-parent-watch",
                                      daemon=True))
    _WATCHING[0].start()


def _for_the_wire(ring, out):
    """A worker's batch for the wire: its arrays in the worker's shared-memory ring
    (:class:`~lodarrow._training._ring.RingBatch`), or pickled by value (:class:`_WireBatch`)
    where the ring cannot take them."""
    import numpy as np

    arrays = {k: v for k, v in out.items() if isinstance(v, np.ndarray)}
    rest = {k: v for k, v in out.items() if not isinstance(v, np.ndarray)}
    rest[KEY_ORDER] = tuple(out)  # the batch's keys come back in its order
    batch = ring.put(arrays, rest)
    return _WireBatch(arrays, rest) if batch is None else batch


class _WireBatch:
    """A batch crossing from a ``DataLoader`` worker where the shared ring cannot take it:
    its NumPy arrays pickled by value through the worker's queue, made torch tensors
    (``from_numpy``, no copy) in the main process.  (A tensor would cross as a shared-memory
    segment of its own: a file, a descriptor and a mapping per tensor, milliseconds each on a
    busy machine.)  Neither this nor a ``RingBatch`` is a ``Mapping``, so ``DataLoader``'s
    ``default_convert`` leaves them to cross as they are."""

    __slots__ = ("arrays", "rest")

    def __init__(self, arrays, rest):
        self.arrays, self.rest = arrays, rest

    def __reduce__(self):
        return _rebuild, (self.arrays, self.rest)


def _rebuild(arrays, rest):
    return as_tensors(arrays, rest)


def _dataset_in_worker(loader, link, shared, lock, ring, xroot):
    import torch

    global _CLASS
    if _CLASS is None:
        _CLASS = _make_class(torch)
    dataset = _CLASS.__new__(_CLASS)
    dataset.loader, dataset._link, dataset._ring = loader, link, ring
    dataset._xroot = xroot
    dataset._shared, dataset._lock = shared, lock
    dataset._version, dataset._made, dataset._first = 0, 0, None
    dataset._restored, dataset._passes = False, (None, 0)
    link.watch(dataset)  # a trainer process given the dataset: set_epoch publishes
    return dataset


def _make_class(torch):
    class TorchBatches(torch.utils.data.IterableDataset):
        """A :class:`lodarrow.BatchLoader` as a PyTorch ``IterableDataset``."""

        def __init__(self, loader, link):
            super().__init__()
            self.loader = loader
            self._link = link  # the loader's internals this dataset uses (DatasetLink)
            # the published position (JSON), guarded by a lock a killed worker cannot keep
            self._shared, self._lock = shared_array("c", _STATE_BYTES), SharedLock()
            # the position a worker applied last (0: none; a forked worker applies the
            # published one, whatever the main process's loader did since)
            self._version = 0
            self._made = 0        # batches this worker made in the current pass
            self._first = None    # this worker's first step of the current pass
            self._restored = False  # a StatefulDataLoader restored this worker's position
            self._passes = (None, 0)  # (pid, passes begun by that process's worker)
            self._ring = BatchRing()  # workers' batches to the main process (_ring.py)
            # the workers' folder for row groups decoded once for all of them (_exchange.py)
            self._xroot = ExchangeRoot()
            weakref.finalize(self, self._xroot.remove)
            self._published = 0   # the version of the position published last
            self._publish()
            link.watch(self)  # loader.set_epoch / load_state_dict publish too

        def __reduce__(self):
            # a worker started by spawn / forkserver: the same loader, shared block and ring
            return _dataset_in_worker, (self.loader, self._link, self._shared, self._lock,
                                        self._ring, self._xroot)

        # --- the position, shared with the workers ----------------------------------------
        def _publish(self):
            if torch.utils.data.get_worker_info() is not None:
                return  # workers read the position; only the main process writes it
            loader, passes = self.loader, 0
            state = loader.state_dict()
            if loader.position.replays(len(loader)):
                # a whole pass made in this process: the workers' pass is the same epoch again
                # from where it was set to start, with the warning, as a second pass here is
                state["cursor"], passes = loader.position.start, 1
            with self._lock:
                try:
                    raw = self._shared.value
                    version = json.loads(raw.decode())["version"] + 1 if raw else 1
                except ValueError:  # a worker killed writing it: the block is written whole
                    version = self._published + 1
                self._published = version
                text = json.dumps({"version": version, "passes": passes,
                                   "state": state}).encode()
                if len(text) >= _STATE_BYTES:
                    raise ValueError("BatchLoader.torch: the loader's state is too large to "
                                     "share")
                self._shared.value = text

        def set_epoch(self, epoch, start_step=0):
            """As :meth:`lodarrow.BatchLoader.set_epoch`; reaches persistent workers."""
            self.loader.set_epoch(epoch, start_step)

        def load_state_dict(self, state):
            """Resume: a loader state (:meth:`lodarrow.BatchLoader.state_dict`), or in a
            ``StatefulDataLoader`` worker the state :meth:`state_dict` gave there.

            In a worker: the same worker count only (torchdata keeps one state per worker:
            another count is a ``ValueError`` saying what works instead); on another
            ``num_replicas`` the workers first agree on the step the training loop had
            received (:meth:`_agree`), and the rest of the epoch is planned for this world."""
            if not (isinstance(state, dict) and "worker" in state):
                self.loader.load_state_dict(state)
                self._first = None
                return
            info = torch.utils.data.get_worker_info()
            if info is None:
                raise ValueError("BatchLoader.torch: this is one DataLoader worker's state; "
                                 "give the loader's own state instead: "
                                 "dataset.loader_state(dataloader.state_dict())")
            self._made = 0
            if state["num_workers"] != info.num_workers:
                raise ValueError(
                    f"BatchLoader.torch: this StatefulDataLoader state was saved with "
                    f"num_workers={state['num_workers']}, and torchdata restores a state on "
                    f"the same worker count only (now num_workers={info.num_workers}). Resume "
                    f"with num_workers={state['num_workers']}, or through the loader's own "
                    f"state, which any DataLoader and worker count takes: "
                    f"loader.load_state_dict(dataset.loader_state(saved_state)) (or "
                    f"loader.state_dict(steps=step) saved beside the checkpoint)")
            saved = state["loader"]
            if saved["segments"][-1][0] == self.loader.select.num_replicas:
                self.loader.load_state_dict(saved)
                self._first, self._restored = state["next_step"], True
                return
            received = self._agree(state, info)
            self.loader.load_state_dict({**saved, "cursor": received})
            self._first, self._restored = state["epoch_step"] - received, True

        def _agree(self, state, info):
            """The step the training loop had received when the state was saved: the first
            step no worker had delivered, the smallest of the workers' next steps.  Each
            worker only holds its own, so the workers post theirs in the shared block and
            wait for all of them (they start together)."""
            import time

            key = json.dumps([state["loader"]["epoch"], state["loader"]["segments"],
                              state["num_workers"]])
            deadline = time.monotonic() + _AGREE_SECONDS
            posted = False
            while True:
                with self._lock:
                    shared = json.loads(self._shared.value.decode())
                    votes = shared.setdefault("agree", {})
                    if votes.get("key") != key:
                        votes.clear()
                        votes["key"] = key
                        votes["steps"] = {}
                    if not posted:
                        votes["steps"][str(state["worker"])] = state["epoch_step"]
                        self._shared.value = json.dumps(shared).encode()
                        posted = True
                    steps = dict(votes["steps"])
                if len(steps) == state["num_workers"]:
                    return min(steps.values())
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"BatchLoader.torch: worker {info.id} waited {_AGREE_SECONDS} s for the "
                        f"other workers' saved steps (a resume on another num_replicas needs "
                        f"all {state['num_workers']}); got those of workers {sorted(steps)}")
                time.sleep(0.01)

        def state_dict(self):
            """The loader's position (in a ``StatefulDataLoader`` worker: with the next step
            of that worker, also before it made its first batch)."""
            info = torch.utils.data.get_worker_info()
            if info is None:
                return self.loader.state_dict()
            if self._first is None:  # no pass yet: where this worker's pass will start
                self._sync()
                _, base = self._link.epoch_plan()
                first = self.loader.position.cursor - base + info.id
            else:
                _, base = self._link.epoch_plan()
                first = self._first
            step = first + self._made * info.num_workers
            return {"worker": info.id, "num_workers": info.num_workers,
                    "loader": self.loader.state_dict(), "next_step": step,
                    "epoch_step": base + step}

        def loader_state(self, dataloader_state):
            """The loader's own state (:meth:`lodarrow.BatchLoader.state_dict`) from a
            torchdata ``StatefulDataLoader`` state: the epoch and the steps the training loop
            had received, which :meth:`lodarrow.BatchLoader.load_state_dict` takes on any
            ``num_replicas``, with any ``DataLoader`` and worker count."""
            return stateful_loader_state(dataloader_state)

        def _sync(self):
            """A worker takes the position the main process published last (set_epoch,
            load_state_dict), once."""
            with self._lock:
                shared = json.loads(self._shared.value.decode())
            if shared["version"] != self._version:
                self.loader.load_state_dict(shared["state"])
                self._version = shared["version"]
            return shared

        # --- iteration ------------------------------------------------------------------------
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            if info is None:
                return iter(self.loader)
            os.environ["LODARROW_NUM_THREADS"] = "1"  # the workers share the cores
            _exit_with_parent()
            if info.num_workers > 1:  # each row group decoded by one of them (_exchange)
                self._link.share_decoding(self._xroot.path, info.id, info.num_workers)
            hand_over = None  # torch batches cross through the worker's ring
            if self.loader.deliver.to == "torch":
                hand_over = functools.partial(_for_the_wire, self._ring)
            return self._worker_pass(info, hand_over)

        def _worker_pass(self, info, hand_over):
            loader = self.loader
            # a pass starts where the main process's position says, unless a StatefulDataLoader
            # restored this worker; a pass abandoned halfway (a break) leaves nothing behind
            resumed, self._restored = self._restored, False
            if not resumed:
                self._first = None
            if not resumed:
                self._sync()
            with self._lock:
                shared = json.loads(self._shared.value.decode())
                if info.id == 0 and not resumed:
                    if shared["passes"] and not getattr(self, "_warned", False):
                        self._warned = True
                        warnings.warn(f"batch_loader: epoch {loader.epoch} is iterated again "
                                      f"from the same step: the same batches as before (call "
                                      f"set_epoch(epoch) on the dataset before each epoch, or "
                                      f"load_state_dict to resume)", UserWarning, stacklevel=2)
                    shared["passes"] += 1
                    self._shared.value = json.dumps(shared).encode()
            plan, base = self._link.epoch_plan()
            if self._first is None:
                self._first = loader.position.cursor - base + info.id
                self._made = 0
            first = self._first + self._made * info.num_workers
            steps = range(first, plan.steps, info.num_workers)
            # the next epoch's first block is read ahead only by a worker that outlives its
            # pass (persistent_workers=True), known once it starts a second one: another
            # worker (the default) exits with its pass, and would read it for nothing
            passes = self._passes[1] if self._passes[0] == os.getpid() else 0
            self._passes = (os.getpid(), passes + 1)
            made = self._link.produce(plan, steps, info.id if passes else None, hand_over)
            for _, batch, _ in made:
                self._made += 1
                yield batch
            # this pass is over: the next one starts from the published position again
            self._first, self._made = None, 0

        def __len__(self):
            return len(self.loader)

    return TorchBatches
