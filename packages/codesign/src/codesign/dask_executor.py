"""The ``dask`` executor: batches on Dask's distributed scheduler (the ``dask`` extra).

Without an address it starts a :class:`distributed.LocalCluster` of worker processes with
one thread each (numba kernels then do not fight over cores), listening on loopback only.
With ``address`` (or the environment variable ``CODESIGN_DASK_ADDRESS``) it connects to a
running scheduler, e.g. ``tcp://10.0.0.5:8786`` started with ``dask scheduler`` and joined
by ``dask worker`` processes (see docs/cluster.md).

What travels: :meth:`DaskExecutor.share` pickles a problem once, checks that every worker
can import the modules it needs, and submits it as one task whose result the workers copy
from each other; each evaluation task then carries only a reference to it, the function
(by name) and the point. Results come back in submission order;
:meth:`DaskExecutor.as_completed` gives the tasks as they finish (the progress display's
task count). A task whose worker dies is rerun by the scheduler elsewhere (the problem task
too, if no copy survives), so the result is the same; a lost scheduler raises
:class:`~codesign.executors.ExecutorLostError`.

``distributed`` is imported only when a dask executor is built, so the core installs and
runs without it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import logging
import os
import sys
import types
from collections.abc import Iterable, Iterator
from concurrent.futures import CancelledError, Executor
from typing import Annotated, Any

from .executors import ExecutorError, ExecutorLostError
from .options import Range

__all__ = ["ADDRESS_ENV", "DaskExecutor", "dask_executor",
           "unpicklable_part"]

ADDRESS_ENV = "CODESIGN_DASK_ADDRESS"
"""Environment variable with the scheduler address used when ``address`` is not given."""

_INSTALL_HINT = ("the dask executor needs Dask's distributed scheduler, which is not "
                 "installed; install codesign's dask extra: pip install 'codesign[dask]' "
                 "(in a checkout: pip install './packages/codesign[dask]')")


def _distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ExecutorError(_INSTALL_HINT) from exc
    return distributed


def dask_executor(*, address: str | None = None,
                  workers: Annotated[int | None, Range(1, 1024)] = None,
                  connect_timeout_s: Annotated[float, Range(0.1, 600.0)] = 5.0) -> DaskExecutor:
    """A :class:`DaskExecutor`.

    Args:
        address: scheduler address (``tcp://host:8786``, ``tls://...``); default
            ``$CODESIGN_DASK_ADDRESS``, and without either a new LocalCluster on loopback.
        workers: a LocalCluster's worker processes (default: the CPU count); with an
            address, wait until that many have joined.
        connect_timeout_s: how long to wait for the scheduler (and the workers) [s].
    """
    distributed = _distributed()
    address = address or os.environ.get(ADDRESS_ENV) or None
    if address is None:
        cluster = distributed.LocalCluster(
            n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
            host="127.0.0.1", dashboard_address=None, silence_logs=logging.ERROR)
        return DaskExecutor(distributed.Client(cluster), cluster=cluster)
    try:
        client = distributed.Client(address, timeout=connect_timeout_s)
    except (OSError, TimeoutError) as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {address!r} within "
                            f"{connect_timeout_s:g} s ({exc}); start it (dask scheduler), "
                            "check the address and firewall, or unset it to run a local "
                            "cluster") from None
    if workers is not None:
        try:
            client.wait_for_workers(workers, timeout=connect_timeout_s)
        except TimeoutError:
            joined = len(client.scheduler_info()["workers"])
            client.close()
            raise ExecutorError(f"the Dask scheduler at {address!r} has {joined} worker(s), "
                                f"fewer than workers: {workers} after {connect_timeout_s:g} s; "
                                "start more (dask worker ADDRESS) or lower workers") from None
    return DaskExecutor(client)


class _ModuleRecorder:
    """Pickles an object with cloudpickle, recording the top-level modules it refers to."""

    def __init__(self):
        import cloudpickle

        recorder = self

        class Pickler(cloudpickle.CloudPickler):
            def persistent_id(self, obj):
                holder = obj if isinstance(obj, type | types.FunctionType) else type(obj)
                module = getattr(holder, "__module__", None)
                if isinstance(module, str):
                    recorder.modules.add(module.partition(".")[0])
                return None

        self.modules: set[str] = set()
        self.pickler_class = Pickler

    def dumps(self, obj: Any) -> bytes:
        buffer = io.BytesIO()
        self.pickler_class(buffer, protocol=5).dump(obj)
        return buffer.getvalue()


def unpicklable_part(obj: Any, name: str = "problem") -> tuple[str, Any, Exception] | None:
    """``(path, part, error)`` of the deepest part of ``obj`` that cannot be pickled (path
    like ``problem.rollout.simulator.lock``), or ``None`` when ``obj`` pickles."""
    import cloudpickle

    try:
        cloudpickle.dumps(obj)
    except Exception as exc:  # any pickling failure: find where it comes from
        if isinstance(obj, dict):
            children: Iterable = ((f"{name}[{k!r}]", v) for k, v in obj.items())
        elif isinstance(obj, list | tuple):
            children = ((f"{name}[{i}]", v) for i, v in enumerate(obj))
        else:
            state = getattr(obj, "__dict__", {})
            children = ((f"{name}.{k}", v) for k, v in state.items())
        for child_name, child in children:
            found = unpicklable_part(child, child_name)
            if found is not None:
                return found
        return name, obj, exc
    return None


def _missing_modules(names: list[str]) -> list[str]:
    """Of the top-level modules ``names``, those this process cannot import (run on workers)."""
    return [n for n in names if importlib.util.find_spec(n) is None]


class _TaskResult:
    """A submitted task's future whose ``result`` turns a lost scheduler into
    :class:`ExecutorLostError` naming the address."""

    def __init__(self, future, address: str):
        self.future, self.address = future, address

    def result(self, timeout: float | None = None) -> Any:
        """The task's return value (its exception re-raised)."""
        from distributed.comm import CommClosedError

        try:
            return self.future.result(timeout)
        except (CancelledError, CommClosedError) as exc:
            raise ExecutorLostError(
                f"lost the Dask scheduler at {self.address} ({type(exc).__name__}: {exc}); "
                "the run stopped with its evaluations journaled: restart the scheduler (or "
                "choose another --executor) and rerun with --resume") from None

    def cancel(self) -> bool:
        """Cancel the task if it has not run."""
        self.future.cancel()
        return True


class DaskExecutor(Executor):
    """A :class:`concurrent.futures.Executor` over a ``distributed.Client``.

    Args:
        client: the connected client.
        cluster: the LocalCluster the executor started and closes on shutdown, if any.

    Attributes:
        address: the scheduler's address.
        shared_bytes: bytes of every object shipped with :meth:`share` so far.
    """

    def __init__(self, client, *, cluster=None):
        self.client, self.cluster = client, cluster
        self.address = client.scheduler.address
        self.shared_bytes = 0
        self._shared: dict[int, tuple[Any, Any]] = {}  # id(obj): (obj kept alive, future)

    def submit(self, fn, /, *args, **kwargs) -> _TaskResult:
        """Schedule ``fn(*args, **kwargs)`` on the cluster (never deduplicated as pure)."""
        return _TaskResult(self.client.submit(fn, *args, pure=False, **kwargs), self.address)

    def as_completed(self, tasks: Iterable[_TaskResult]) -> Iterator[_TaskResult]:
        """``tasks`` (returned by :meth:`submit`) in the order they finish on the cluster;
        a task that failed, or was lost with the scheduler, counts as finished (its
        ``result`` raises)."""
        from distributed import as_completed

        by_future = {task.future.key: task for task in tasks}
        for future in as_completed([task.future for task in by_future.values()]):
            yield by_future[future.key]

    def share(self, obj: Any):
        """A handle standing for ``obj`` in ``submit`` arguments; ``obj`` is pickled once
        per executor and copied to each worker once.

        Raises ExecutorError naming the part of ``obj`` that does not pickle, or the worker
        and the module (with its distribution: the plugin to install) it cannot import.
        """
        known = self._shared.get(id(obj))
        if known is not None:
            return known[1]
        recorder = _ModuleRecorder()
        try:
            payload = recorder.dumps(obj)
        except Exception as exc:  # name the part at fault, not just the exception
            path, part, error = unpicklable_part(obj) or ("problem", obj, exc)
            raise ExecutorError(f"cannot send the problem to Dask workers: {path} (a "
                                f"{type(part).__name__}) cannot be pickled "
                                f"({type(error).__name__}: {error}); keep such resources "
                                "out of simulators and problems, or recreate them after "
                                "unpickling") from None
        self._check_workers_import(sorted(recorder.modules - set(sys.builtin_module_names)))
        import cloudpickle

        future = self.client.submit(cloudpickle.loads, payload, pure=False)
        self.shared_bytes += len(payload)
        self._shared[id(obj)] = (obj, future)
        return future

    def unshare(self, obj: Any) -> None:
        """Release ``obj`` shared with :meth:`share`: the cluster may drop its copies."""
        known = self._shared.pop(id(obj), None)
        if known is not None:
            known[1].release()

    def _check_workers_import(self, modules: list[str]) -> None:
        missing = {worker: names for worker, names in
                   self.client.run(_missing_modules, modules).items() if names}
        if missing:
            worker, names = min(missing.items())
            packages = importlib.metadata.packages_distributions()
            listed = ", ".join(f"{n!r} (distribution {'/'.join(packages[n])})"
                               if n in packages else repr(n) for n in names)
            raise ExecutorError(f"Dask worker {worker} (of {len(missing)} lacking modules) "
                                f"cannot import {listed}, which the problem needs: install "
                                "the same simulator plugins (and codesign) on every worker")

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Close the client and, if this executor started it, the LocalCluster."""
        self._shared.clear()
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

