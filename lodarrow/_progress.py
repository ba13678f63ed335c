"""Progress displays, in one place (a leaf module).

- :class:`Progress`: the one-line bar of ``map_parquet`` and ``lodarrow map`` (files, rows,
  bytes, rate, time left) on stderr, fed from worker threads.
- :func:`task_progress`: the bars of ``lodarrow demo`` and ``lodarrow bench``, rich's
  ``Progress`` (description, bar, optionally ``M/N``, elapsed time), or :class:`NullProgress`
  with the same methods when the bar is off or rich is not installed.
"""

import math
import sys
import threading
import time

__all__ = ["Progress", "NullProgress", "task_progress", "mb"]


def mb(n):
    """``n`` bytes as ``"12.3 MB"`` or ``"1.23 GB"``."""
    if n >= 1e9:
        return f"{n / 1e9:.2f} GB"
    return f"{n / 1e6:.1f} MB"


class Progress:
    """A one-line progress bar on stderr: files, rows, bytes, rate, time left.

    Thread-safe (workers call :meth:`advance` and :meth:`file_done`); redrawn at most every
    0.2 s, and once more at the end.  Bytes are the input files' bytes on disk, counted in
    proportion to the rows read.  ``label`` starts the line and ``unit`` names what
    ``files`` counts (a loader's blocks of row groups); a bar that is not ``enabled`` does
    nothing.
    """

    def __init__(self, files, total_bytes, enabled, stream=None, label="map_parquet",
                 unit="files", tokens=False):
        self.enabled = enabled
        self.count_tokens = tokens  # a loader's bar shows tokens/s
        self.tokens = 0
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.files, self.total = files, total_bytes
        self.files_done = self.rows = 0
        self.bytes = 0.0
        self.t0 = self.last = time.perf_counter()
        self.lock = threading.Lock()
        self.shown = False
        self.width = 0

    def advance(self, rows, nbytes, tokens=0):
        if not self.enabled:
            return
        with self.lock:
            self._count(rows, nbytes, tokens)
            self._draw()

    def file_done(self):
        if not self.enabled:
            return
        with self.lock:
            self._unit_done()

    def step_done(self, rows, nbytes, tokens=0):
        """:meth:`advance` and :meth:`file_done` of one unit at once (a loader's batch):
        one draw, with the unit already counted."""
        if not self.enabled:
            return
        with self.lock:
            self._count(rows, nbytes, tokens)
            self._unit_done()

    def _count(self, rows, nbytes, tokens):
        self.rows += rows
        self.bytes += nbytes
        self.tokens += tokens

    def _unit_done(self):
        self.files_done += 1
        last = self.files_done == self.files
        self._draw(force=last)
        if last:
            # the last state ends its line now: what the caller prints next (a loader's
            # last batch is still in use) starts on a line of its own
            self._end_line()

    def _end_line(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False

    def _draw(self, force=False):
        now = time.perf_counter()
        if not force and now - self.last < 0.2:
            return
        self.last = now
        elapsed = max(now - self.t0, 1e-9)
        done = self.files_done == self.files
        nbytes = self.total if done else self.bytes  # the per-batch shares sum to it
        rate = nbytes / elapsed
        frac = 1.0 if done or not self.total else min(self.bytes / self.total, 1.0)
        width = 20
        fill = int(frac * width)
        left = (self.total - nbytes) / rate if rate > 0 else float("nan")
        eta = f"{elapsed:.1f} s" if done or math.isnan(left) else f"{left:.0f} s left"
        extra = (f"{self.tokens:,} tokens  {self.tokens / elapsed:,.0f} tokens/s  "
                 if self.count_tokens else "")
        line = (f"{self.label} [{'#' * fill}{'.' * (width - fill)}] "
                f"{self.files_done}/{self.files} {self.unit}  {self.rows:,} rows  {extra}"
                f"{mb(nbytes)}/{mb(self.total)}  {mb(rate)}/s  {eta}  ")
        # as wide as the widest line drawn: a shorter one leaves no end of the last behind
        self.width = max(self.width, len(line))
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.shown = True

    def close(self, ok):
        if not self.enabled:
            return
        with self.lock:
            if ok and self.files_done < self.files:  # else file_done drew the last state
                self._draw(force=True)
            self._end_line()


class NullProgress:
    """What :func:`task_progress` gives when there is no bar: rich's methods, doing nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *args, **kwargs):
        return 0

    def update(self, *args, **kwargs):
        pass

    def advance(self, *args, **kwargs):
        pass


def task_progress(console, enabled=True, counts=False):
    """A transient rich progress bar on ``console``, or :class:`NullProgress`.

    Parameters
    ----------
    console : rich.console.Console or None
        Where the bar is drawn (None: rich's default console).
    enabled : bool
        False gives :class:`NullProgress`, as does a missing rich.
    counts : bool
        Show ``done/total`` beside the bar.

    Returns
    -------
    rich.progress.Progress or NullProgress
        A context manager with ``add_task``, ``update`` and ``advance``.
    """
    if not enabled:
        return NullProgress()
    try:
        from rich.progress import (BarColumn, MofNCompleteColumn, TextColumn,
                                   TimeElapsedColumn)
        from rich.progress import Progress as RichProgress
    except ImportError:
        return NullProgress()

    columns = [TextColumn("{task.description}"), BarColumn()]
    if counts:
        columns.append(MofNCompleteColumn())
    columns.append(TimeElapsedColumn())
    return RichProgress(*columns, console=console, transient=True)
