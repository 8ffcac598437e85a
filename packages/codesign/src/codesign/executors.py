"""Executors that run batches of rollouts (population members, recordings, starts).

Everything here has the standard :class:`concurrent.futures.Executor` shape (``submit``,
``map``, ``shutdown``, context manager). Executors are plugins: the hook
``codesign_register_executors(register)`` registers factories taking keyword-only options
(``workers`` and kind-specific ones such as Dask's ``address``); :func:`get_executor` builds
one by kind. The core registers:

- ``"inline"``: :class:`InlineExecutor` runs each call at once in the calling thread.
- ``"process"``: a :class:`concurrent.futures.ProcessPoolExecutor` whose workers start with
  the ``"spawn"`` method: a fresh interpreter per worker, so no thread, lock or numba/CUDA
  state of the parent is forked half-way, and it behaves alike on Linux, macOS and Windows.
  Workers import the problem's modules themselves, so simulators must be importable and
  picklable. Problems leave their executor behind when pickled, so a problem that holds a
  pool can be shipped to that pool's workers.
- ``"dask"``: Dask's distributed scheduler (:mod:`codesign.dask_executor`, the ``dask``
  extra of codesign).

An executor may offer ``share(obj) -> handle``: a handle that stands for ``obj`` in the
arguments of ``submit`` and reaches each worker once (Dask: a task the workers copy from
each other; the process pool: a file each worker reads once), instead of pickling ``obj``
with every task, and ``unshare(obj)`` to drop it again (an executor that outlives the
problem: a sweep's). :func:`shared` asks for it and falls back to ``obj`` itself;
:func:`map_batch` runs one function over a batch with a shared first argument and returns
the results in the order of the jobs (never in completion order, so reductions over them
are the same on every executor). Within :func:`reporting_tasks`, batches report each task
that finishes, in completion order, across every worker (the progress display's task count).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import multiprocessing
import os
import pickle
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Annotated, Any

from .options import Range, check_options

__all__ = ["ExecutorError", "ExecutorLostError", "InlineExecutor", "SpawnProcessPoolExecutor",
           "get_executor", "inline_executor", "map_batch", "map_in_order", "process_executor",
           "reporting_tasks", "shared", "unshare"]


class ExecutorError(RuntimeError):
    """An executor cannot be used as configured (its engine is not installed, its address does
    not answer, a worker lacks a module, the problem does not pickle); the message says how
    to fix it."""


class ExecutorLostError(ExecutorError):
    """The engine behind an executor went away mid-run (a cluster's scheduler); what was
    journaled survives, and ``--resume`` continues from it."""


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


_LOADED: dict[str, Any] = {}
"""Objects shared through files, by path, in this (worker) process."""


def _load_shared(path: str) -> Any:
    """The object pickled in ``path``, read once per process."""
    if path not in _LOADED:
        with open(path, "rb") as file:
            _LOADED[path] = pickle.load(file)
    return _LOADED[path]


class _SharedFile:
    """Stands for an object pickled once into a file: it pickles as the path and unpickles
    (in a worker) as the object, read from the file the first time only."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return _load_shared, (self.path,)


class SpawnProcessPoolExecutor(ProcessPoolExecutor):
    """A process pool whose workers are started with ``"spawn"``.

    :meth:`share` pickles an object once into a temporary file that each worker reads once
    (a per-worker cache), so tasks carry only its path.

    Args:
        max_workers: number of worker processes (default: the CPU count).

    Attributes:
        shared_bytes: bytes of every object shared so far (each written once).
    """

    def __init__(self, max_workers: int | None = None):
        super().__init__(max_workers=max_workers, mp_context=multiprocessing.get_context("spawn"))
        self.shared_bytes = 0
        self._folder: str | None = None
        self._shared: dict[int, tuple[Any, _SharedFile]] = {}  # id(obj): (obj kept, handle)
        self._files = 0  # never reused: workers cache what they read by path

    def share(self, obj: Any) -> _SharedFile:
        """A handle standing for ``obj`` in ``submit`` arguments (see the class docstring)."""
        known = self._shared.get(id(obj))
        if known is not None:
            return known[1]
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="codesign-shared-")
        path = os.path.join(self._folder, f"{self._files}.pickle")
        self._files += 1
        with open(path, "wb") as file:
            pickle.dump(obj, file, protocol=pickle.HIGHEST_PROTOCOL)
        handle = _SharedFile(path)
        self.shared_bytes += os.path.getsize(path)
        self._shared[id(obj)] = (obj, handle)
        return handle

    def unshare(self, obj: Any) -> None:
        """Forget ``obj`` shared with :meth:`share` and remove its file (no-op if unknown)."""
        known = self._shared.pop(id(obj), None)
        if known is not None:
            with contextlib.suppress(OSError):
                os.remove(known[1].path)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the workers and remove the shared objects' files."""
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        self._shared.clear()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


_Workers = Annotated[int | None, Range(1, 1024)]


def inline_executor(*, workers: _Workers = None) -> InlineExecutor:
    """The ``inline`` executor; ``workers`` may only be unset or 1 (one call at a time)."""
    if workers not in (None, 1):
        raise ValueError("the inline executor runs one call at a time; leave workers "
                         "(max_workers) unset or choose kind='process'")
    return InlineExecutor()


def process_executor(*, workers: _Workers = None) -> SpawnProcessPoolExecutor:
    """The ``process`` executor: ``workers`` spawned processes (default: the CPU count)."""
    return SpawnProcessPoolExecutor(max_workers=workers)


def get_executor(kind: str = "inline", *, max_workers: int | None = None, registry=None,
                 **options) -> Executor:
    """An executor of ``kind`` with ``max_workers`` workers and the kind's other ``options``
    (``"dask"``: ``address``), from ``registry`` (default: every installed plugin's).

    ``"process"``: default the CPU count; ``"inline"``: unset or 1. Shut a pool down when done
    (``with get_executor("process") as ex: ...``). Unknown kinds and options that the kind
    does not take raise ValueError naming what is allowed.
    """
    if max_workers is not None and max_workers < 1:
        raise ValueError(f"max_workers must be >= 1, got {max_workers}")
    if registry is None:
        from .plugins import get_registry

        registry = get_registry()
    kinds = registry.names("executors", ordered=True)
    if kind not in kinds:
        raise ValueError(f"unknown executor kind {kind!r}; allowed: {', '.join(kinds)}")
    factory = registry.get("executors", kind).factory
    given = dict(options, **({} if max_workers is None else {"workers": max_workers}))
    resolved, problems = check_options(factory, given, what=f"executor {kind!r}")
    if problems:
        raise ValueError("; ".join(message for _, message in problems))
    return factory(**resolved)


def shared(executor: Executor | None, obj: Any) -> Any:
    """What stands for ``obj`` in the arguments of ``executor.submit``: the executor's
    ``share(obj)`` handle when it has one (shipped to each worker once), else ``obj``."""
    share = getattr(executor, "share", None)
    return obj if share is None else share(obj)


def unshare(executor: Executor | None, obj: Any) -> None:
    """Let ``executor`` drop ``obj`` shared with :func:`shared` (its ``unshare``, when it has
    one), so an executor that outlives a problem does not keep it."""
    release = getattr(executor, "unshare", None)
    if release is not None:
        release(obj)


_TASK_PROGRESS: contextvars.ContextVar[Callable[[int, int], None] | None] = \
    contextvars.ContextVar("codesign_task_progress", default=None)
"""Where the batch now running reports its finished tasks (:func:`reporting_tasks`)."""


@contextlib.contextmanager
def reporting_tasks(on_done: Callable[[int, int], None]) -> Iterator[None]:
    """Within the block, every batch run through :func:`map_in_order` (so :func:`map_batch`)
    calls ``on_done(done, total)`` each time one of its ``total`` tasks finishes, in
    completion order, on whichever worker. Only the outermost batch reports: a batch run
    inside one of its tasks in this process (inline) is part of that task."""
    token = _TASK_PROGRESS.set(on_done)
    try:
        yield
    finally:
        _TASK_PROGRESS.reset(token)


def _completed(executor: Executor, futures: Sequence) -> Iterator:
    """``futures`` as they complete: the executor's ``as_completed`` when it has one (futures
    of another kind than :mod:`concurrent.futures`'), else the standard one."""
    return getattr(executor, "as_completed", concurrent.futures.as_completed)(futures)


def map_in_order(executor: Executor | None, function: Callable, common: Any,
                 jobs: Sequence[tuple]) -> Iterator:
    """``function(common, *job)`` for each of ``jobs``, yielded in the order of ``jobs`` as soon
    as it and those before it are done: through ``executor`` when one is set (``common``
    shipped once, :func:`shared`), else one after the other here. The batch's progress goes
    to :func:`reporting_tasks` as tasks finish."""
    on_done = _TASK_PROGRESS.get()
    if executor is None:
        for count, job in enumerate(jobs, 1):
            token = _TASK_PROGRESS.set(None)  # a batch inside this task is part of it
            try:
                result = function(common, *job)
            finally:
                _TASK_PROGRESS.reset(token)
            if on_done is not None:
                on_done(count, len(jobs))
            yield result
        return
    if not jobs:
        return
    handle = shared(executor, common)
    futures = [executor.submit(function, handle, *job) for job in jobs]
    if on_done is None:
        for future in futures:
            yield future.result()
        return
    position = {id(future): k for k, future in enumerate(futures)}
    finished: set[int] = set()
    following = 0
    for count, future in enumerate(_completed(executor, futures), 1):
        on_done(count, len(futures))
        finished.add(position[id(future)])
        while following in finished:
            yield futures[following].result()
            following += 1


def map_batch(executor: Executor | None, function: Callable, common: Any,
              jobs: Sequence[tuple]) -> list:
    """``[function(common, *job) for job in jobs]``, through ``executor`` when one is set,
    ``common`` shipped once (:func:`shared`); results in the order of ``jobs``
    (:func:`map_in_order`)."""
    return list(map_in_order(executor, function, common, jobs))
