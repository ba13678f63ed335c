"""The loader's last stage, *how batches are delivered*: the arrays' library, batches made
ahead in a thread, the progress bar (docs/training.md#where-options-meet).

What reaches the training loop is decided by the stages before (the source, which sequences,
what shape); this stage only makes the batches (:mod:`lodarrow._training._produce`: blocks
read, collated, converted) and hands them over, in plan order.  ``DataLoader`` workers are
the torch side of the same stage (:mod:`lodarrow._training._torch`), their batches handed to
their ring (:mod:`lodarrow._training._ring`).
"""

import collections
import sys
import threading
import time

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


class _Raised:
    """An exception of the background thread, handed to the consumer in its place."""

    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc


def prefetched(made, depth):
    """The items of the generator ``made``, in order, made up to ``depth`` ahead by a
    background thread *while the consumer is away*.

    A thread earns its keep only where the consumer spends longer between items than an item
    takes to make (a training step against a batch): then it fills a buffer of ``depth``
    items while the step runs (collation and Parquet decoding release the GIL).  Where the
    consumer comes straight back, handing every item across threads would cost more than
    making it (a wake-up per item), so the consumer makes it itself.  Both draw from one
    generator under one lock, and an item goes into the buffer before the lock is released,
    so whoever makes the next item, they arrive in order.
    """
    made_lock = threading.Lock()
    wanted = threading.Condition()
    buffer = collections.deque()
    state = {"stop": False, "done": False, "away": 0.0, "make": 0.0}
    end = object()
    clock = time.perf_counter

    def make_one():  # under made_lock
        t = clock()
        try:
            item = next(made)
        except StopIteration:
            state["done"] = True
            return end
        state["make"] = 0.8 * state["make"] + 0.2 * (clock() - t)
        return item

    def ahead():
        return state["away"] > state["make"] and len(buffer) < depth

    def work():
        while True:
            with wanted:
                while not state["stop"] and not ahead():
                    wanted.wait()
                if state["stop"]:
                    return
            with made_lock:
                if state["done"] or state["stop"]:
                    return
                try:
                    item = make_one()
                except BaseException as exc:  # raised in the consumer, in its turn
                    state["done"] = True
                    item = _Raised(exc)
                buffer.append(item)
                if item is end or isinstance(item, _Raised):
                    return

    thread = threading.Thread(target=work, name="lodarrow-prefetch", daemon=True)
    thread.start()

    def consume():
        left = clock()
        try:
            while True:
                away = clock() - left
                state["away"] = 0.8 * state["away"] + 0.2 * away
                if buffer:
                    item = buffer.popleft()  # the thread only appends: the earliest item
                else:
                    with made_lock:  # the thread may be making it: wait for that one
                        item = buffer.popleft() if buffer else (
                            end if state["done"] else make_one())
                if item is end:
                    return
                if isinstance(item, _Raised):
                    raise item.exc
                if ahead():
                    with wanted:
                        wanted.notify()
                left = clock()
                yield item
        finally:
            with wanted:
                state["stop"] = True
                wanted.notify()
            thread.join()
            made.close()

    return consume()
