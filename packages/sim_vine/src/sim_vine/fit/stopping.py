"""Ending a fit cleanly: a time limit, a stop file, or a signal, checked after every iteration.

:class:`FitStop` is an optimizer callback (:mod:`codesign.optim` stops when a callback returns
true, keeping the last accepted iterate, which for L-BFGS-B and for the least-squares
method's trust region, which accepts only steps that lower the loss, is the best point so
far). The checks run between iterations, so an iteration in progress finishes first.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["FitStop"]


class FitStop:
    """An optimizer callback that asks to stop after a time limit, when a file appears, or
    after :meth:`request` (e.g. from a signal handler).

    Args:
        time_limit_s: wall-clock seconds from construction; ``None``: no limit.
        stop_file: a path whose existence stops the fit (``touch`` it to end a fit early).
        callback: an inner callback, called first; its true result stops too.
        clock: seconds, monotonic (tests pass their own).

    Attributes:
        reason: why the fit was stopped, or ``None``.
    """

    def __init__(self, *, time_limit_s: float | None = None, stop_file: str | Path | None = None,
                 callback: Callable | None = None, clock: Callable[[], float] = time.monotonic):
        if time_limit_s is not None and not time_limit_s > 0:
            raise ValueError(f"time_limit_s must be a positive number of seconds, got "
                             f"{time_limit_s!r}")
        self.time_limit_s = time_limit_s
        self.stop_file = None if stop_file is None else Path(stop_file)
        self.callback, self.clock = callback, clock
        self.started = clock()
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        """Stop at the end of the current iteration, for ``reason``."""
        self.reason = self.reason or reason

    def on_signals(self, *signals: int) -> dict:
        """Turn the given signals (default SIGINT and SIGTERM) into :meth:`request`; returns
        the previous handlers (``signal number -> handler``) to restore with
        :func:`signal.signal`."""
        previous = {}
        for number in signals or (signal.SIGINT, signal.SIGTERM):
            previous[number] = signal.signal(number, lambda n, _frame: self.request(
                f"received signal {signal.Signals(n).name}"))
        return previous

    def __call__(self, info) -> bool:
        """Whether to stop after the iteration ``info`` (a ``codesign.optim.IterationInfo``)."""
        if self.callback is not None and self.callback(info):
            self.request("stopped by the inner callback")
        elapsed = self.clock() - self.started
        if self.time_limit_s is not None and elapsed >= self.time_limit_s:
            self.request(f"time limit of {self.time_limit_s:g} s reached after "
                         f"{info.iteration} iteration(s)")
        if self.stop_file is not None and self.stop_file.exists():
            self.request(f"stop file {str(self.stop_file)!r} found after {info.iteration} "
                         "iteration(s)")
        return self.reason is not None
