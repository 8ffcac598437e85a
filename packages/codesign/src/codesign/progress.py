"""Optimization progress on a stream: a live bar on a terminal, plain lines in a log.

A tqdm bar redraws itself with carriage returns, which fill a log file or a CI log with
hundreds of partial lines; so :func:`progress_display` draws the bar only when the stream
is a terminal and otherwise prints one plain line every :data:`LINE_INTERVAL_S` seconds and
a last one when the optimization ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO

__all__ = ["LINE_INTERVAL_S", "ProgressDisplay", "progress_display"]

LINE_INTERVAL_S = 5.0
"""Seconds between two plain progress lines when the stream is not a terminal."""


class ProgressDisplay:
    """Shows optimization progress; this base class shows nothing (progress turned off).

    Use as a context manager; call :meth:`update` after every iteration and :meth:`tasks`
    whenever a task of a batch (a rollout, a recording, a start) finishes on any worker.

    Attributes:
        batch: ``(done, total)`` tasks of the latest batch, or None before the first.
        tasks_done: tasks finished so far, over every batch.
    """

    batch: tuple[int, int] | None = None
    tasks_done: int = 0

    def update(self, iteration: int, loss: float) -> None:
        """Report that ``iteration`` (1-based) finished with ``loss``."""

    def tasks(self, done: int, total: int) -> None:
        """Report that ``done`` of the ``total`` tasks of the running batch have finished
        (``done`` counts up from 1 in each batch)."""
        self.tasks_done += 1
        self.batch = (int(done), int(total))
        self._show_tasks()

    def _show_tasks(self) -> None:
        """Show :attr:`batch` and :attr:`tasks_done` (this base class shows nothing)."""

    def _task_text(self) -> str:
        """``"tasks 12/32, 108 done"``, or ``""`` before the first task."""
        if self.batch is None:
            return ""
        done, total = self.batch
        return f"tasks {done}/{total}, {self.tasks_done} done"

    def close(self) -> None:
        """End the display (the last line or the bar's final state)."""

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class _Bar(ProgressDisplay):
    """A tqdm bar, redrawn in place on a terminal."""

    def __init__(self, stream: IO[str], *, total: int, desc: str):
        from tqdm import tqdm

        self.bar = tqdm(total=total, file=stream, desc=desc, unit="it", dynamic_ncols=True)
        self.loss: float | None = None

    def update(self, iteration: int, loss: float) -> None:
        self.bar.n = min(int(iteration), self.bar.total or int(iteration))
        self.loss = float(loss)
        self._show_tasks()

    def _show_tasks(self) -> None:
        postfix = {} if self.loss is None else {"loss": f"{self.loss:.6g}"}
        if self.batch is not None:
            postfix["tasks"] = self._task_text().removeprefix("tasks ")
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


class _Lines(ProgressDisplay):
    """Whole lines, one every ``interval_s`` seconds of ``clock`` and one at the end."""

    def __init__(self, stream: IO[str], *, total: int, desc: str,
                 clock: Callable[[], float], interval_s: float):
        self.stream, self.total, self.desc = stream, total, desc
        self.clock, self.interval_s = clock, interval_s
        self.started = self.last_line = clock()
        self.latest: tuple[int, float] | None = None
        self.shown: tuple | None = None

    def update(self, iteration: int, loss: float) -> None:
        self.latest = (int(iteration), float(loss))
        self._show_tasks()

    def _show_tasks(self) -> None:
        if self.clock() - self.last_line >= self.interval_s:
            self._line()

    def close(self) -> None:
        if self._state() != self.shown and (self.latest or self.batch) is not None:
            self._line()

    def _state(self) -> tuple:
        return self.latest, self.tasks_done

    def _line(self) -> None:
        now = self.clock()
        iteration, loss = self.latest or (0, None)
        parts = [f"{iteration}/{self.total} it"]
        parts += [] if loss is None else [f"loss={loss:.6g}"]
        parts += [self._task_text()] if self.batch is not None else []
        self.stream.write(f"{self.desc}: {', '.join(parts)}, {now - self.started:.1f} s\n")
        self.stream.flush()
        self.last_line, self.shown = now, self._state()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_display(stream: IO[str], *, total: int, desc: str, enabled: bool = True,
                     clock: Callable[[], float] = time.monotonic,
                     interval_s: float = LINE_INTERVAL_S) -> ProgressDisplay:
    """The progress display for ``total`` iterations named ``desc`` on ``stream``.

    A tqdm bar when ``stream`` is a terminal; otherwise a line
    ``"desc: 3/12 it, loss=0.25, tasks 12/32, 108 done, 10.0 s"`` (the tasks of the running
    batch and of the whole run, once a batch has reported, :meth:`ProgressDisplay.tasks`)
    every ``interval_s`` seconds of ``clock`` [s] and one at the end; nothing when not
    ``enabled``.
    """
    if not enabled:
        return ProgressDisplay()
    if _is_terminal(stream):
        return _Bar(stream, total=total, desc=desc)
    return _Lines(stream, total=total, desc=desc, clock=clock, interval_s=interval_s)
