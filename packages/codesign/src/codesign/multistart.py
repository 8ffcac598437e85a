"""Multi-start: one optimizer from several starting points, every start one executor task.

Start 0 is the problem's own starting point; the others are drawn from
``numpy.random.default_rng(seed)``: uniformly between finite bounds, and ``x0`` plus a
standard normal step (scaled coordinates) along unbounded directions. Each start runs the
whole optimizer on a worker (the problem shipped there once) and returns its result and
per-iteration reports; results are taken in start order, so the best start (the lowest
loss, the first on a tie) is the same on every executor. A finished start is journaled as
one JSON file, so a resumed run reruns only the starts that had not finished.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .executors import map_in_order
from .identification import identify
from .optim.base import Callback, IterationInfo, OptimizeResult
from .optim.guarded import minimize_guarded
from .outputs import write_json

__all__ = ["Solver", "StartRun", "run_starts", "start_points"]


@dataclasses.dataclass(frozen=True)
class Solver:
    """How one start is optimized: ``optimizer`` for ``iterations`` iterations; with
    ``identification``, through :func:`codesign.identification.identify` (minibatches of
    ``batch_size`` recordings drawn with ``seed`` when stochastic). Both are guarded
    (:func:`codesign.optim.minimize_guarded`): a point whose simulation fails gets a
    penalty, the best point evaluated is returned and the result's message counts the
    failures."""

    optimizer: Any
    iterations: int
    identification: bool = False
    batch_size: int | None = None
    seed: int = 0

    def __call__(self, problem, x0: np.ndarray, callback: Callback | None) -> OptimizeResult:
        """Minimize ``problem`` from ``x0``, calling ``callback`` after every iteration."""
        if self.identification:
            return identify(problem, optimizer=self.optimizer, max_iterations=self.iterations,
                            batch_size=self.batch_size, seed=self.seed, callback=callback,
                            x0=x0).optimization
        return minimize_guarded(self.optimizer, problem, x0, max_iterations=self.iterations,
                                callback=callback)


@dataclasses.dataclass(frozen=True)
class StartRun:
    """One finished start: where it began (``x0``), the optimizer's result and what it
    reported after every iteration (``iterations``)."""

    x0: np.ndarray
    result: OptimizeResult
    iterations: list[IterationInfo]


def start_points(problem, count: int, *, seed: int) -> list[np.ndarray]:
    """``count`` starting vectors (scaled coordinates, within the bounds): ``problem.x0()``
    first, then random ones (see the module docstring)."""
    if count < 1:
        raise ValueError(f"starts must be at least 1, got {count}")
    x0 = problem.x0()
    lower, upper = np.asarray(problem.lower, float), np.asarray(problem.upper, float)
    bounded = np.isfinite(lower) & np.isfinite(upper)
    rng = np.random.default_rng(seed)
    points = [x0]
    for _ in range(count - 1):
        uniform = rng.uniform(np.where(bounded, lower, 0.0), np.where(bounded, upper, 1.0))
        step = x0 + rng.standard_normal(x0.size)
        points.append(np.clip(np.where(bounded, uniform, step), lower, upper))
    return points


def _run_start(problem, solver: Solver, x0: np.ndarray) -> StartRun:
    """Optimize ``problem`` from ``x0`` (an executor task)."""
    reports: list[IterationInfo] = []
    result = solver(problem, x0, reports.append)
    return StartRun(x0=np.asarray(x0, dtype=np.float64), result=result, iterations=reports)


def _write(path: Path, run: StartRun) -> None:
    result = run.result
    write_json(path, {
        "x0": run.x0, "x": result.x, "loss": result.loss, "iterations": result.iterations,
        "evaluations": result.evaluations, "converged": result.converged,
        "message": result.message, "history": list(result.history),
        "reports": [dataclasses.asdict(info) for info in run.iterations]})


def _number(value) -> float:
    return float("nan") if value is None else float(value)  # JSON keeps NaN/inf as null


def _read(path: Path) -> StartRun | None:
    """The journaled start in ``path``, or None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        result = OptimizeResult(
            x=np.asarray(data["x"], dtype=np.float64), loss=_number(data["loss"]),
            iterations=int(data["iterations"]), evaluations=int(data["evaluations"]),
            converged=bool(data["converged"]), message=str(data["message"]),
            history=[_number(v) for v in data["history"]])
        reports = [IterationInfo(iteration=int(r["iteration"]),
                                 x=np.asarray(r["x"], dtype=np.float64),
                                 loss=_number(r["loss"]), evaluations=int(r["evaluations"]),
                                 grad_norm=_number(r["grad_norm"])) for r in data["reports"]]
        return StartRun(x0=np.asarray(data["x0"], dtype=np.float64), result=result,
                        iterations=reports)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_starts(problem, solver: Solver, points: list[np.ndarray], *, executor,
               journal_folder: Path,
               on_finished: Callable[[int, StartRun, bool], None]) -> list[StartRun]:
    """Optimize from every point of ``points``, the unfinished ones as tasks on ``executor``
    (inline when ``None``); return the runs in start order.

    Starts journaled in ``journal_folder`` (``<index>.json``, from a killed run) are not run
    again; ``on_finished(index, run, replayed)`` is called in start order as results arrive.
    Finished starts are reported as tasks (:func:`codesign.executors.reporting_tasks`).
    """
    journal_folder.mkdir(parents=True, exist_ok=True)
    done = {k: _read(journal_folder / f"{k}.json") for k in range(len(points))}
    computed = map_in_order(executor, _run_start, problem,
                            [(solver, points[k]) for k, run in done.items() if run is None])
    runs = []
    for k in range(len(points)):
        run, replayed = done[k], done[k] is not None
        if run is None:
            run = next(computed)
            _write(journal_folder / f"{k}.json", run)
        on_finished(k, run, replayed)
        runs.append(run)
    return runs
