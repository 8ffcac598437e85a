"""Executors that run batches of rollouts (population members, recordings).

Everything here has the standard :class:`concurrent.futures.Executor` shape (``submit``,
``map``, ``shutdown``, context manager), so a distributed engine's executor (Ray's or Dask's
``concurrent.futures``-compatible clients) can replace these without changes elsewhere.

- ``"inline"``: :class:`InlineExecutor` runs each call at once in the calling thread.
- ``"process"``: a :class:`concurrent.futures.ProcessPoolExecutor` whose workers start with
  the ``"spawn"`` method: a fresh interpreter per worker, so no thread, lock or numba/CUDA
  state of the parent is forked half-way, and it behaves alike on Linux, macOS and Windows.
  Workers import the problem's modules themselves, so simulators must be importable and
  picklable. Problems leave their executor behind when pickled, so a problem that holds a
  pool can be shipped to that pool's workers.
"""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor

__all__ = ["InlineExecutor", "SpawnProcessPoolExecutor", "get_executor", "EXECUTOR_KINDS"]

EXECUTOR_KINDS = ("inline", "process")


class InlineExecutor(Executor):
    """Runs every submitted call immediately in the calling thread.

    ``submit`` returns an already completed :class:`~concurrent.futures.Future`; an exception
    raised by the call is stored in the future and re-raised by ``result()``.
    """

    def __init__(self):
        self._shutdown = False
        self._lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        """Call ``fn(*args, **kwargs)`` now and return its completed future."""
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new calls after the executor was shut down")
        future: Future = Future()
        future.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # delivered through the future, as a pool would
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse further submissions (nothing is ever pending)."""
        with self._lock:
            self._shutdown = True


class SpawnProcessPoolExecutor(ProcessPoolExecutor):
    """A process pool whose workers are started with ``"spawn"``.

    Args:
        max_workers: number of worker processes (default: the CPU count).
    """

    def __init__(self, max_workers: int | None = None):
        super().__init__(max_workers=max_workers, mp_context=multiprocessing.get_context("spawn"))


def get_executor(kind: str = "inline", *, max_workers: int | None = None) -> Executor:
    """An executor of ``kind`` (``"inline"`` or ``"process"``, see the module docstring) with
    ``max_workers`` workers (``"process"``: default the CPU count; ``"inline"``: unset or 1).

    Shut a process pool down when done (``with get_executor("process") as ex: ...``).
    """
    if kind not in EXECUTOR_KINDS:
        raise ValueError(f"unknown executor kind {kind!r}; allowed: {', '.join(EXECUTOR_KINDS)}")
    if max_workers is not None and max_workers < 1:
        raise ValueError(f"max_workers must be >= 1, got {max_workers}")
    if kind == "inline":
        if max_workers not in (None, 1):
            raise ValueError("the inline executor runs one call at a time; leave max_workers "
                             "unset or choose kind='process'")
        return InlineExecutor()
    return SpawnProcessPoolExecutor(max_workers=max_workers)
