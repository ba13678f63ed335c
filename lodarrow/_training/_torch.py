"""A :class:`BatchLoader` as a PyTorch ``IterableDataset`` (docs/training.md#loader).

Worker ``i`` of ``k`` makes the steps ``i, i + k, ...`` from the cursor, so the ``DataLoader``
(which takes from its workers in turn) hands the batches out in plan order, whatever ``k``.

- **Epochs reach every worker.**  ``set_epoch`` and ``load_state_dict`` on the dataset (in the
  main process) write the loader's position into shared memory; each worker reads it when an
  iteration starts, so persistent workers (``persistent_workers=True``) follow too.  A second
  pass over the same position warns once.
- **torchdata's ``StatefulDataLoader``.**  ``state_dict`` / ``load_state_dict`` are called in
  each worker: a worker's state is the loader's position and how many batches that worker
  made, so the ``StatefulDataLoader`` resumes with the first batch not yet received.
"""

import json
import multiprocessing
import os
import warnings

__all__ = ["torch_dataset"]

_STATE_BYTES = 1 << 16
_CLASS = None


def torch_dataset(torch, loader):
    global _CLASS
    if _CLASS is None:
        _CLASS = _make_class(torch)
    return _CLASS(loader)


def _make_class(torch):
    class TorchBatches(torch.utils.data.IterableDataset):
        """A :class:`lodarrow.BatchLoader` as a PyTorch ``IterableDataset``."""

        def __init__(self, loader):
            super().__init__()
            self.loader = loader
            self._shared = multiprocessing.get_context().Array("c", _STATE_BYTES, lock=True)
            self._version = 0     # the position last published (main) / applied (worker)
            self._made = 0        # batches this worker made in the current pass
            self._first = None    # this worker's first step of the current pass
            self._publish()
            loader._datasets.add(self)  # loader.set_epoch / load_state_dict publish too

        # --- the position, shared with the workers ----------------------------------------
        def _publish(self):
            if torch.utils.data.get_worker_info() is not None:
                return  # workers read the position; only the main process writes it
            with self._shared.get_lock():
                raw = self._shared.value
                version = json.loads(raw.decode())["version"] + 1 if raw else 1
                text = json.dumps({"version": version, "passes": 0,
                                   "state": self.loader.state_dict()}).encode()
                if len(text) >= _STATE_BYTES:
                    raise ValueError("BatchLoader.torch: the loader's state is too large to "
                                     "share")
                self._shared.value = text
                self._version = version

        def set_epoch(self, epoch, start_step=0):
            """As :meth:`lodarrow.BatchLoader.set_epoch`; reaches persistent workers."""
            self.loader.set_epoch(epoch, start_step)

        def load_state_dict(self, state):
            """Resume: a loader state (:meth:`lodarrow.BatchLoader.state_dict`), or in a
            ``StatefulDataLoader`` worker the state :meth:`state_dict` gave there."""
            if isinstance(state, dict) and "worker" in state:
                self.loader.load_state_dict(state["loader"])
                self._first = state["next_step"]
                return
            self.loader.load_state_dict(state)
            self._first = None

        def state_dict(self):
            """The loader's position (in a ``StatefulDataLoader`` worker: with the next step
            of that worker)."""
            info = torch.utils.data.get_worker_info()
            if info is None:
                return self.loader.state_dict()
            nxt = (self._first if self._first is not None else 0) + self._made * info.num_workers
            return {"worker": info.id, "num_workers": info.num_workers,
                    "loader": self.loader.state_dict(), "next_step": nxt}

        # --- iteration ------------------------------------------------------------------------
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            if info is None:
                return iter(self.loader)
            os.environ["LODARROW_NUM_THREADS"] = "1"  # the workers share the cores
            return self._worker_pass(info)

        def _worker_pass(self, info):
            loader = self.loader
            resumed = self._first is not None  # a StatefulDataLoader restored this worker
            with self._shared.get_lock():
                shared = json.loads(self._shared.value.decode())
                if shared["version"] != self._version and not resumed:
                    loader.load_state_dict(shared["state"])
                    self._version = shared["version"]
                if info.id == 0 and not resumed:
                    if shared["passes"] and not getattr(self, "_warned", False):
                        self._warned = True
                        warnings.warn(f"batch_loader: epoch {loader.epoch} is iterated again "
                                      f"from the same step: the same batches as before (call "
                                      f"set_epoch(epoch) on the dataset before each epoch, or "
                                      f"load_state_dict to resume)", UserWarning, stacklevel=2)
                    shared["passes"] += 1
                    self._shared.value = json.dumps(shared).encode()
            plan, base = loader._epoch_plan()
            if self._first is None:
                self._first = loader._cursor - base + info.id
                self._made = 0
            first = self._first + self._made * info.num_workers
            steps = range(first, plan.steps, info.num_workers)
            for _, batch, _ in loader._produce(plan, steps):
                self._made += 1
                yield batch
            # this pass is over: the next one starts from the published position again
            self._first, self._made = None, 0

        def __len__(self):
            return len(self.loader)

    return TorchBatches
