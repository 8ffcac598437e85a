"""The optimize stage of a run: the optimizer on a journaled objective, so a killed run resumes.

:func:`optimize_experiment` runs the experiment's optimizer (or, for an identification
experiment, :func:`codesign.identification.identify`) with a progress display, collecting the
history. Every evaluation goes through an :class:`EvaluationJournal`: one ``.npz`` each,
written atomically, read back bit-exactly. Optimizers are deterministic, so re-running one
from the start with the journal of a killed run answers the evaluations already paid for
and finishes with the same result as an uninterrupted run. Minibatch evaluations of a
stochastic identification are journaled under their recording indices.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .executors import map_in_order, reporting_tasks
from .experiment import Experiment, IdentificationExperiment
from .multistart import Solver, StartRun, run_starts, start_points
from .optim.base import Evaluation, IterationInfo, OptimizeResult
from .outputs import read_npz, summarize_array, write_npz
from .problem import evaluate_point
from .progress import ProgressDisplay, progress_display

__all__ = [
    "EvaluationJournal",
    "JournaledFunction",
    "Optimization",
    "design_values",
    "optimize_experiment",
]


def _key(x: np.ndarray, batch: np.ndarray | None = None) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(x, dtype=np.float64).tobytes()).hexdigest()
    if batch is None:
        return digest
    return digest + ":" + ",".join(str(int(i)) for i in np.asarray(batch).reshape(-1))


class EvaluationJournal:
    """Evaluations by point, one atomically written ``.npz`` per evaluation in ``folder``.

    Entries are read back bit-exactly, so answering from the journal is indistinguishable
    from evaluating again. An entry may belong to a minibatch (``batch``: the recording
    indices of a stochastic identification step); it answers only that batch. Leftover
    temporary files from a kill are ignored and removed; an unreadable entry is skipped with
    a warning (it is simply evaluated again).
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.entries: dict[str, Evaluation] = {}
        self._next = 0
        for path in sorted(self.folder.iterdir()):
            if ".tmp" in path.name:
                path.unlink()
                continue
            if path.stem.isdigit():
                self._next = max(self._next, int(path.stem) + 1)
            try:
                key, evaluation = self._read(path)
            except Exception as exc:  # a damaged entry costs one re-evaluation, not the run
                warnings.warn(f"ignoring unreadable journal entry {path}: {exc}", stacklevel=2)
                continue
            self.entries[key] = evaluation

    def __len__(self) -> int:
        return len(self.entries)

    @staticmethod
    def _read(path: Path) -> tuple[str, Evaluation]:
        arrays = read_npz(path)
        return _key(arrays["x"], arrays.get("batch")), Evaluation(
            loss=float(arrays["loss"]), grad=arrays.get("grad"), constraints=arrays["constraints"],
            constraint_jac=arrays.get("constraint_jac"))

    def get(self, x: np.ndarray, *, grad: bool,
            batch: np.ndarray | None = None) -> Evaluation | None:
        """The journaled evaluation at ``x`` (of minibatch ``batch``, with a gradient if
        ``grad``), or ``None``."""
        evaluation = self.entries.get(_key(x, batch))
        if evaluation is None or (grad and evaluation.grad is None):
            return None
        return evaluation

    def record(self, x: np.ndarray, evaluation: Evaluation, *,
               batch: np.ndarray | None = None) -> None:
        """Store ``evaluation`` at ``x`` (of minibatch ``batch``) atomically, as the next
        numbered file."""
        arrays = {"x": x, "loss": evaluation.loss, "constraints": evaluation.constraints,
                  "grad": evaluation.grad, "constraint_jac": evaluation.constraint_jac}
        arrays = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items() if v is not None}
        if batch is not None:
            arrays["batch"] = np.asarray(batch, dtype=np.int64)
        write_npz(self.folder / f"{self._next:07d}.npz", arrays)
        self._next += 1
        self.entries[_key(x, batch)] = evaluation


class JournaledFunction:
    """An objective function that answers from a journal first and records what it computes.

    Everything but the evaluations (``size``, bounds, ``x0``, an identification problem's
    ``recordings``...) is the wrapped problem's, so an optimizer or
    :func:`codesign.identification.identify` accepts it in the problem's place. Minibatch
    evaluations (``evaluate_subset``, identification only) are journaled under their
    recording indices.
    """

    def __init__(self, problem, journal: EvaluationJournal):
        self.problem, self.journal = problem, journal
        self.replayed = self.computed = 0
        # a resumed run's evaluations: a point this run evaluated itself and meets again (a
        # line search returning to it) is answered from the journal too, but replays nothing
        self._resumed = frozenset(journal.entries)

    def __getattr__(self, name: str):
        if name == "problem":  # not yet set (unpickling): avoid recursing
            raise AttributeError(name)
        return getattr(self.problem, name)

    def _answer(self, x: np.ndarray, grad: bool, compute: Callable[[], Evaluation],
                batch: np.ndarray | None = None) -> Evaluation:
        """The journaled evaluation at ``x``, or ``compute()``'s, recorded."""
        cached = self.journal.get(x, grad=grad, batch=batch)
        if cached is not None:
            self.replayed += _key(x, batch) in self._resumed
            return cached
        evaluation = compute()
        self.journal.record(x, evaluation, batch=batch)
        self.computed += 1
        return evaluation

    def evaluate(self, x: np.ndarray, *, grad: bool = True) -> Evaluation:
        """Loss (and gradient, constraints) at ``x``, from the journal when present."""
        x = np.asarray(x, dtype=np.float64)
        return self._answer(x, grad, functools.partial(self.problem.evaluate, x, grad=grad))

    def evaluate_many(self, xs: Sequence[np.ndarray], *, grad: bool = False) -> list[Evaluation]:
        """A batch: journaled points answered at once, the rest through the problem's executor.

        Each fresh evaluation is journaled as soon as it completes, so an interruption
        mid-batch loses at most the evaluations still running.
        """
        xs = [np.asarray(x, dtype=np.float64) for x in xs]
        executor = getattr(self.problem, "executor", None)
        fresh = [i for i, x in enumerate(xs) if self.journal.get(x, grad=grad) is None]
        computed = map_in_order(executor, evaluate_point, self.problem,
                                [(xs[i], grad) for i in fresh])
        answers = {i: self._answer(xs[i], grad, lambda value=value: value)
                   for i, value in zip(fresh, computed, strict=True)}
        return [answers[i] if i in answers else
                self._answer(x, grad, functools.partial(self.problem.evaluate, x, grad=grad))
                for i, x in enumerate(xs)]

    def evaluate_subset(self, x: np.ndarray, indices, *, grad: bool = True) -> Evaluation:
        """Mean loss (and gradient) over the recordings ``indices``, journaled per batch."""
        x = np.asarray(x, dtype=np.float64)
        batch = np.asarray([int(i) for i in indices], dtype=np.int64)
        if batch.size == len(self.problem.recordings) and np.array_equal(
                np.sort(batch), np.arange(batch.size)):
            return self.evaluate(x, grad=grad)
        return self._answer(x, grad, functools.partial(self.problem.evaluate_subset, x, batch,
                                                       grad=grad), batch)


def design_values(problem, x: np.ndarray) -> dict[str, Any]:
    """The free design parameters at ``x`` for JSON: values, or shape/min/mean/max for large
    fields (:func:`codesign.outputs.summarize_array`)."""
    return {name: summarize_array(value) for name, value in problem.describe(x).items()
            if name.startswith("design.")}


@dataclasses.dataclass
class _Progress:
    """Collects the history and drives the progress display from optimizer callbacks."""

    problem: Any
    display: ProgressDisplay
    history: list = dataclasses.field(default_factory=list)

    def __call__(self, info: IterationInfo) -> None:
        self.record(info)
        self.display.update(info.iteration, info.loss)

    def record(self, info: IterationInfo) -> None:
        """Append the history record of ``info``."""
        record = {"iteration": int(info.iteration), "loss": float(info.loss),
                  "grad_norm": float(info.grad_norm), "evaluations": int(info.evaluations),
                  "parameters": design_values(self.problem, info.x)}
        if getattr(self.problem, "optimize_controller", False):
            _, weights = self.problem.split(info.x)
            record["controller_weight_norm"] = float(np.sqrt(sum(
                np.sum(np.square(w)) for w in weights.values())))
        self.history.append(record)


@dataclasses.dataclass(frozen=True)
class Optimization:
    """What the optimize stage found.

    Attributes:
        result: the optimizer's account (``x``, loss, iterations, evaluations, convergence).
        history: one record per iteration: loss, gradient norm, evaluations, the free design
            parameters (:func:`design_values`) and, when optimized, the controller weights'
            norm.
        initial_loss: the loss at the starting point, ``None`` if it was never evaluated.
        replayed: evaluations answered from a resumed run's journal (not points this run
            met twice).
        wall_time_s: seconds spent optimizing.
        starts: with ``optimizer.starts`` > 1, one record per start (its index, loss,
            iterations, evaluations, convergence, message, and the free design parameters
            where it began and ended); the result and history are the best start's.
        stages: with ``stages``, one record per stage (:mod:`codesign.stages`); the result
            is the last stage's with the iterations and evaluations of all.
    """

    result: OptimizeResult
    history: list[dict[str, Any]]
    initial_loss: float | None
    replayed: int
    wall_time_s: float
    starts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    stages: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def optimize_experiment(experiment: Experiment | IdentificationExperiment, journal_folder: Path,
                        *, progress: bool, log: Callable[[str], None],
                        x0: np.ndarray | None = None) -> Optimization:
    """Optimize ``experiment`` journaling every evaluation in ``journal_folder``, from ``x0``
    (scaled; default the problem's starting point).

    Evaluations already in the journal (a killed run's) are answered from it; ``progress``
    shows the progress on stderr (:func:`codesign.progress.progress_display`: a bar on a
    terminal, plain lines in a log); ``log`` receives notes. With ``experiment.starts`` > 1
    the starts run as one batch on the experiment's executor (:mod:`codesign.multistart`),
    each finished start journaled in ``journal_folder``'s sibling ``starts/``, and the
    progress counts finished starts.
    """
    identification = isinstance(experiment, IdentificationExperiment)
    solver = Solver(experiment.optimizer, experiment.iterations, identification=identification,
                    batch_size=experiment.batch_size if identification else None,
                    seed=experiment.seed if identification else 0)
    if experiment.starts > 1:
        return _optimize_from_starts(experiment, solver, journal_folder.parent / "starts",
                                     progress=progress, log=log)
    function = JournaledFunction(experiment.problem, EvaluationJournal(journal_folder))
    if function.journal.entries:
        log(f"resuming: {len(function.journal)} evaluation(s) in the journal")
    start_x = experiment.problem.x0() if x0 is None else np.asarray(x0, dtype=np.float64)
    started = time.perf_counter()
    with progress_display(sys.stderr, total=experiment.iterations, enabled=progress,
                          desc=Path(experiment.config.source).stem) as display, \
            reporting_tasks(display.tasks):
        tracker = _Progress(experiment.problem, display)
        result = solver(function, start_x, tracker)
    wall_time = time.perf_counter() - started
    start = function.journal.get(start_x, grad=False)
    return Optimization(result=result, history=tracker.history,
                        initial_loss=None if start is None else start.loss,
                        replayed=function.replayed, wall_time_s=wall_time)


def _optimize_from_starts(experiment, solver: Solver, journal_folder: Path, *, progress: bool,
                          log: Callable[[str], None]) -> Optimization:
    problem = experiment.problem
    points = start_points(problem, experiment.starts, seed=experiment.seed)
    records: list[dict[str, Any]] = []
    replayed = replayed_starts = 0
    started = time.perf_counter()
    with progress_display(sys.stderr, total=len(points), enabled=progress,
                          desc=f"{Path(experiment.config.source).stem} starts") as display, \
            reporting_tasks(display.tasks):

        def finished(index: int, run: StartRun, from_journal: bool) -> None:
            nonlocal replayed, replayed_starts
            replayed += run.result.evaluations if from_journal else 0
            replayed_starts += from_journal
            records.append({"start": index, "loss": float(run.result.loss),
                            "iterations": int(run.result.iterations),
                            "evaluations": int(run.result.evaluations),
                            "converged": bool(run.result.converged),
                            "message": str(run.result.message),
                            "initial": design_values(problem, run.x0),
                            "final": design_values(problem, run.result.x)})
            display.update(index + 1, min(r["loss"] for r in records))

        runs = run_starts(problem, solver, points, executor=experiment.executor,
                          journal_folder=journal_folder, on_finished=finished)
    if replayed_starts:
        log(f"resumed: {replayed_starts} of {len(points)} start(s) were in the journal")
    best = min(range(len(runs)), key=lambda k: (runs[k].result.loss, k))
    tracker = _Progress(problem, ProgressDisplay())
    for info in runs[best].iterations:
        tracker.record(info)
    evaluations = sum(run.result.evaluations for run in runs)
    result = dataclasses.replace(runs[best].result, evaluations=evaluations)
    return Optimization(result=result, history=tracker.history, initial_loss=None,
                        replayed=replayed, wall_time_s=time.perf_counter() - started,
                        starts=records)
