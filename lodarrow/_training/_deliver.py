"""The loader's third stage, *how batches are delivered*: the arrays' library, batches made
ahead in a thread, the progress bar (docs/training.md#where-options-meet).

What reaches the training loop is decided by the two stages before (which sequences, what
shape); this stage only hands the batches over, in plan order.  ``DataLoader`` workers are
the torch side of the same stage (:mod:`lodarrow._training._torch`).
"""

import queue
import sys
import threading

from lodarrow._hub._dense import LIBRARIES
from lodarrow._validation import as_flag, as_nonnegative_int, check_choice

__all__ = ["Delivery", "prefetched"]


class Delivery:
    """How batches are handed over: ``to``'s library, ``prefetch`` batches made ahead in a
    background thread, a progress bar on stderr (``progress``; default: a terminal)."""

    def __init__(self, *, to, prefetch, progress, fn="batch_loader"):
        self.to = check_choice(to, f"{fn}: to", LIBRARIES)
        self.prefetch = as_nonnegative_int(prefetch, f"{fn}: prefetch")
        if progress is not None:
            progress = as_flag(progress, f"{fn}: progress")
        self.progress = progress

    def bar(self, steps, nbytes, total_steps):
        """A progress bar over ``steps`` batches of an epoch of ``total_steps``."""
        from lodarrow._progress import Progress
        from lodarrow._tables._dataset import _isatty

        enabled = _isatty(sys.stderr) if self.progress is None else self.progress
        return Progress(steps, nbytes * steps / max(total_steps, 1), enabled,
                        label="batch_loader", unit="batches", tokens=True)


def prefetched(made, depth):
    """Run the generator ``made`` in a background thread, ``depth`` items ahead."""
    q = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def work():
        try:
            for item in made:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    break
            q.put(done)
        except BaseException as exc:  # handed to the consumer, raised there
            q.put(exc)
        finally:
            made.close()

    thread = threading.Thread(target=work, name="lodarrow-prefetch", daemon=True)
    thread.start()

    def consume():
        try:
            while True:
                item = q.get()
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while thread.is_alive():
                try:
                    q.get(timeout=0.05)
                except queue.Empty:
                    pass
            thread.join()

    return consume()
