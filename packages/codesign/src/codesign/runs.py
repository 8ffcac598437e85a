"""Runs: optimize an experiment and write its run directory atomically, with resume.

``run_experiment(config, registry, out=DIR)`` builds the experiment (every check happens
before any directory exists), optimizes with a progress bar, then writes the run directory:

- ``config.yaml``: the resolved experiment (defaults filled in, ``quick`` applied),
- ``plugins.json``: name, version and distribution of every plugin,
- ``history.json``: per iteration the loss, gradient norm, evaluations and free design
  parameters (fields of more than 64 entries as shape and min/mean/max, controller weights
  as their norm; the final values of both are in parameters.npz),
- ``parameters.npz``: the final design (``design.<name>``), controller weights
  (``controller.<name>``) and the scaled vector ``x``; numeric arrays only, no pickle,
- ``loss.png``: the loss curve,
- ``result.mp4`` or ``result.gif``: the optimized rollout drawn by the simulator's ``render``,
- ``summary.json``: final loss, iterations, evaluations, wall time, convergence, files, notes.

An identification experiment (see :mod:`codesign.config`) runs
:func:`codesign.identification.identify` instead of a rollout optimization and writes the
same files, with: ``parameters.npz`` holding the fitted design (``design.<name>``), the
source's truth (``truth.<name>``) when known and the vector ``x`` (fitted initial-state
offsets included); ``summary.json`` an ``identification`` entry (source, recordings,
batch size, and per fitted parameter its initial, recovered and true value and the relative
error |recovered − truth| / |truth|, largest over entries); the video the fitted design
replaying the first recording. Minibatch evaluations are journaled under their recording
indices, so ``--resume`` works for stochastic fits too.

The files are built in a hidden sibling temporary folder that is renamed to ``DIR`` only when
complete. While optimizing, every evaluation is journaled in ``DIR.partial/`` (one ``.npz``
each, written atomically). ``resume=True`` re-runs the deterministic optimizer from the
start, answering the evaluations it has already paid for from the journal, so a killed run
finishes with the same result as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import ExperimentConfig
from .experiment import Experiment, IdentificationExperiment, build_experiment
from .identification import identify
from .optim.base import Evaluation, IterationInfo
from .outputs import (
    check_frame,
    current_umask,
    plot_loss,
    read_npz,
    write_json,
    write_npz,
    write_text,
    write_video,
)
from .problem import evaluate_point

__all__ = [
    "RunError",
    "RunInterrupted",
    "EvaluationJournal",
    "JournaledFunction",
    "JournaledIdentification",
    "format_identification_table",
    "identification_table",
    "partial_dir",
    "plugin_table",
    "run_experiment",
]


class RunError(RuntimeError):
    """A run cannot start or finish (its directory exists, a stale journal, a changed config)."""


class RunInterrupted(RunError):
    """The run was interrupted (Ctrl-C or SIGTERM); its journal is kept for ``--resume``."""


def partial_dir(out: str | Path) -> Path:
    """The journal folder ``DIR.partial`` beside run directory ``DIR``."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


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
            loss=float(arrays["loss"]),
            grad=arrays["grad"] if "grad" in arrays else None,
            constraints=arrays["constraints"],
            constraint_jac=arrays["constraint_jac"] if "constraint_jac" in arrays else None)

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
        arrays = {"x": np.asarray(x, dtype=np.float64), "loss": np.float64(evaluation.loss),
                  "constraints": np.asarray(evaluation.constraints, dtype=np.float64)}
        if batch is not None:
            arrays["batch"] = np.asarray(batch, dtype=np.int64)
        if evaluation.grad is not None:
            arrays["grad"] = np.asarray(evaluation.grad, dtype=np.float64)
        if evaluation.constraint_jac is not None:
            arrays["constraint_jac"] = np.asarray(evaluation.constraint_jac, dtype=np.float64)
        write_npz(self.folder / f"{self._next:07d}.npz", arrays)
        self._next += 1
        self.entries[_key(x, batch)] = evaluation


class JournaledFunction:
    """An objective function that answers from a journal first and records what it computes.

    It has the :class:`codesign.optim.base.ObjectiveFunction` shape of the wrapped problem.
    """

    def __init__(self, problem, journal: EvaluationJournal):
        self.problem, self.journal = problem, journal
        self.size = problem.size
        self.lower, self.upper = problem.lower, problem.upper
        self.constraint_lower = problem.constraint_lower
        self.constraint_upper = problem.constraint_upper
        self.replayed = 0
        self.computed = 0

    def evaluate(self, x: np.ndarray, *, grad: bool = True) -> Evaluation:
        """Loss (and gradient, constraints) at ``x``, from the journal when present."""
        x = np.asarray(x, dtype=np.float64)
        cached = self.journal.get(x, grad=grad)
        if cached is not None:
            self.replayed += 1
            return cached
        evaluation = self.problem.evaluate(x, grad=grad)
        self.journal.record(x, evaluation)
        self.computed += 1
        return evaluation

    def evaluate_many(self, xs: Sequence[np.ndarray], *, grad: bool = False) -> list[Evaluation]:
        """A batch: journaled points answered at once, the rest through the problem's executor.

        Each fresh evaluation is journaled as soon as it completes, so an interruption
        mid-batch loses at most the evaluations still running.
        """
        xs = [np.asarray(x, dtype=np.float64) for x in xs]
        results: list[Evaluation | None] = [self.journal.get(x, grad=grad) for x in xs]
        missing = [i for i, r in enumerate(results) if r is None]
        self.replayed += len(xs) - len(missing)
        executor = getattr(self.problem, "executor", None)
        if executor is None:
            pending = {i: None for i in missing}
        else:
            pending = {i: executor.submit(evaluate_point, self.problem, xs[i], grad)
                       for i in missing}
        for i, future in pending.items():
            evaluation = self.problem.evaluate(xs[i], grad=grad) if future is None \
                else future.result()
            self.journal.record(xs[i], evaluation)
            results[i] = evaluation
            self.computed += 1
        return results  # type: ignore[return-value]


class JournaledIdentification(JournaledFunction):
    """A journaled :class:`~codesign.identification.IdentificationProblem`.

    Full-batch evaluations are journaled as in :class:`JournaledFunction`, minibatch ones
    (``evaluate_subset``) under their recording indices; everything else (``recordings``,
    ``x0``, ``design``, ...) is the problem's, so :func:`codesign.identification.identify`
    accepts it in the problem's place.
    """

    def __getattr__(self, name: str):
        if name == "problem":  # not yet set (unpickling): avoid recursing
            raise AttributeError(name)
        return getattr(self.problem, name)

    def evaluate_subset(self, x: np.ndarray, indices, *, grad: bool = True) -> Evaluation:
        """Mean loss (and gradient) over the recordings ``indices``, journaled per batch."""
        x = np.asarray(x, dtype=np.float64)
        batch = np.asarray([int(i) for i in indices], dtype=np.int64)
        if batch.size == len(self.problem.recordings) and np.array_equal(
                np.sort(batch), np.arange(batch.size)):
            return self.evaluate(x, grad=grad)
        cached = self.journal.get(x, grad=grad, batch=batch)
        if cached is not None:
            self.replayed += 1
            return cached
        evaluation = self.problem.evaluate_subset(x, batch, grad=grad)
        self.journal.record(x, evaluation, batch=batch)
        self.computed += 1
        return evaluation


def plugin_table(plugin_manager) -> list[dict[str, Any]]:
    """Name, version and distribution of every plugin registered with ``plugin_manager``."""
    from .plugins import distribution_of

    rows = []
    for name, plugin in plugin_manager.list_name_plugin():
        if plugin is None:  # blocked
            continue
        dist = distribution_of(plugin_manager, plugin)
        rows.append({"name": name, "module": getattr(plugin, "__name__", repr(plugin)),
                     "distribution": dist[0] if dist else None,
                     "version": dist[1] if dist else None})
    return rows


LARGEST_LISTED_PARAMETER = 64
"""Design parameters with more entries appear in history/summary JSON as shape and statistics
(per-particle fields would make megabytes of JSON); their final values are in parameters.npz."""


def _design_values(problem, x: np.ndarray) -> dict[str, Any]:
    """The free design parameters at ``x``: values, or shape/min/mean/max for large fields."""
    out = {}
    for name, value in problem.describe(x).items():
        if not name.startswith("design."):
            continue
        array = np.asarray(value, dtype=np.float64)
        out[name] = value if array.size <= LARGEST_LISTED_PARAMETER else {
            "shape": list(array.shape), "min": float(array.min()),
            "mean": float(array.mean()), "max": float(array.max())}
    return out


@dataclasses.dataclass
class _Progress:
    """Collects the history and drives the progress bar from optimizer callbacks."""

    problem: Any
    bar: Any
    history: list = dataclasses.field(default_factory=list)

    def __call__(self, info: IterationInfo) -> None:
        record = {"iteration": int(info.iteration), "loss": float(info.loss),
                  "grad_norm": float(info.grad_norm), "evaluations": int(info.evaluations),
                  "parameters": _design_values(self.problem, info.x)}
        if getattr(self.problem, "optimize_controller", False):
            _, weights = self.problem.split(info.x)
            record["controller_weight_norm"] = float(np.sqrt(sum(
                np.sum(np.square(w)) for w in weights.values())))
        self.history.append(record)
        self.bar.n = min(int(info.iteration), self.bar.total or int(info.iteration))
        self.bar.set_postfix(loss=f"{info.loss:.6g}", refresh=False)
        self.bar.refresh()


def _frames(render, result, design, video: dict) -> list[np.ndarray]:
    """Every ``video["every"]``-th recorded state of ``result`` drawn by ``render``, each with
    the action applied from it (None for the final state)."""
    actions = list(result.actions) + [None]
    width, height = video["width"], video["height"]
    pairs = list(zip(result.states, actions, strict=True))[:: video["every"]]
    return [check_frame(render(state, design, width=width, height=height, action=action),
                        width=width, height=height) for state, action in pairs]


def _render_video(experiment: Experiment, design, weights, stem: Path) -> tuple[Path | None, str]:
    """Render the optimized rollout; returns (video path or None, note)."""
    render = getattr(experiment.simulator, "render", None)
    if render is None:
        return None, "no video: the simulator has no render hook"
    video = experiment.config.data["run"]["video"]
    result = experiment.rollout.forward(design, weights, experiment.objective,
                                        experiment.constraints, record=True)
    frames = _frames(render, result, design, video)
    path = write_video(stem, frames, fps=video["fps"])
    return path, f"video: {len(frames)} frames at {video['fps']} fps ({path.suffix[1:]})"


def _write_outputs(folder: Path, experiment: Experiment, result, progress: _Progress,
                   function: JournaledFunction, plugins: list, wall_time: float,
                   notes: list[str], log: Callable[[str], None]) -> dict[str, Any]:
    problem = experiment.problem
    design, weights = problem.split(result.x)
    config = experiment.config
    write_text(folder / "config.yaml", config.to_yaml())
    write_json(folder / "plugins.json", plugins)
    write_json(folder / "history.json", {"iterations": progress.history})
    arrays = {f"design.{k}": np.asarray(v, dtype=np.float64) for k, v in design.items()}
    arrays.update({f"controller.{k}": np.asarray(v, dtype=np.float64)
                   for k, v in weights.items()})
    arrays["x"] = np.asarray(result.x, dtype=np.float64)
    write_npz(folder / "parameters.npz", arrays)
    losses = [h["loss"] for h in progress.history] or [result.loss]
    plot_loss(folder / "loss.png", losses, title=f"{Path(config.source).name}: loss")
    video = None
    try:
        video, note = _render_video(experiment, design, weights, folder / "result")
    except Exception as exc:  # a plugin's render bug must not cost the optimized result
        note = f"no video: {exc}" if isinstance(exc, ValueError) else \
            f"no video: render failed with {type(exc).__name__}: {exc}"
        log(f"warning: {note}")
    notes.append(note)
    start = function.journal.get(problem.x0(), grad=False)
    files = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    summary = {
        "experiment": config.source,
        "quick": config.quick,
        "initial_loss": None if start is None else start.loss,
        "final_loss": float(result.loss),
        "iterations": int(result.iterations),
        "evaluations": int(result.evaluations),
        "evaluations_from_journal": int(function.replayed),
        "wall_time_s": round(wall_time, 3),
        "converged": bool(result.converged),
        "message": str(result.message),
        "design": _design_values(problem, result.x),
        "video": None if video is None else video.name,
        "files": sorted([*files, "summary.json"]),
        "notes": notes,
    }
    write_json(folder / "summary.json", summary)
    return summary


def _summarize(value: Any) -> Any:
    """A value for JSON: the list, or shape and min/mean/max for large arrays."""
    array = np.asarray(value, dtype=np.float64)
    if array.size <= LARGEST_LISTED_PARAMETER:
        return array.tolist()
    return {"shape": list(array.shape), "min": float(array.min()),
            "mean": float(array.mean()), "max": float(array.max())}


def identification_table(problem, x0: np.ndarray, x: np.ndarray,
                         truth: dict | None) -> dict[str, dict[str, Any]]:
    """Per fitted design parameter: initial, recovered, truth and relative error.

    The relative error is the largest |recovered − truth| / |truth| over the parameter's
    entries (absolute where the truth is 0); truth and error are ``None`` when unknown.
    """
    start, end = problem.design(x0), problem.design(x)
    table = {}
    for name in problem.free:
        row = {"initial": _summarize(start[name]), "recovered": _summarize(end[name]),
               "truth": None, "relative_error": None}
        if truth and name in truth:
            true = np.broadcast_to(np.asarray(truth[name], dtype=np.float64),
                                   np.shape(end[name]))
            error = np.abs(end[name] - true) / np.where(true != 0, np.abs(true), 1.0)
            row["truth"] = _summarize(true)
            row["relative_error"] = float(np.max(error)) if error.size else 0.0
        table[name] = row
    return table


def format_identification_table(table: dict[str, dict[str, Any]]) -> list[str]:
    """The identification table as aligned text lines (scalars and short arrays shown)."""

    def cell(value) -> str:
        if value is None:
            return "-"
        if isinstance(value, dict):
            return f"mean {value['mean']:.5g}"
        flat = np.asarray(value, dtype=float).reshape(-1)
        return ", ".join(f"{v:.5g}" for v in flat[:4]) + (" ..." if flat.size > 4 else "")

    rows = [("parameter", "initial", "recovered", "truth", "rel. error")]
    for name, row in table.items():
        error = row["relative_error"]
        rows.append((name, cell(row["initial"]), cell(row["recovered"]), cell(row["truth"]),
                     "-" if error is None else f"{100 * error:.2f} %"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def _render_identification_video(experiment: IdentificationExperiment, x: np.ndarray,
                                  stem: Path) -> tuple[Path | None, str]:
    """Render the fitted design replaying the first recording."""
    render = getattr(experiment.simulator, "render", None)
    if render is None:
        return None, "no video: the simulator has no render hook"
    problem = experiment.problem
    video = experiment.config.data["run"]["video"]
    design = problem.design(x)
    result = problem.rollouts[0].forward(
        design, {"table": problem.recordings[0].actions}, problem.objectives[0],
        initial_offset=problem.initial_offset(x, 0), record=True)
    frames = _frames(render, result, design, video)
    path = write_video(stem, frames, fps=video["fps"])
    return path, (f"video: the fitted design replaying recording 0, {len(frames)} frames at "
                  f"{video['fps']} fps ({path.suffix[1:]})")


def _write_identification_outputs(folder: Path, experiment: IdentificationExperiment, result,
                                  progress: _Progress, function: JournaledFunction,
                                  plugins: list, wall_time: float, notes: list[str],
                                  log: Callable[[str], None]) -> dict[str, Any]:
    problem, config = experiment.problem, experiment.config
    write_text(folder / "config.yaml", config.to_yaml())
    write_json(folder / "plugins.json", plugins)
    write_json(folder / "history.json", {"iterations": progress.history})
    arrays = {f"design.{k}": np.asarray(v, dtype=np.float64)
              for k, v in problem.design(result.x).items()}
    arrays.update({f"truth.{k}": np.asarray(v, dtype=np.float64)
                   for k, v in (experiment.truth or {}).items()})
    arrays["x"] = np.asarray(result.x, dtype=np.float64)
    write_npz(folder / "parameters.npz", arrays)
    losses = [h["loss"] for h in progress.history] or [result.loss]
    stochastic = experiment.batch_size is not None and \
        experiment.batch_size < len(problem.recordings)
    plot_loss(folder / "loss.png", losses, title=f"{Path(config.source).name}: "
              f"{'minibatch ' if stochastic else ''}tracking loss")
    video = None
    try:
        video, note = _render_identification_video(experiment, result.x, folder / "result")
    except Exception as exc:  # a plugin's render bug must not cost the fitted result
        note = f"no video: render failed with {type(exc).__name__}: {exc}"
        log(f"warning: {note}")
    notes.append(note)
    start = function.journal.get(problem.x0(), grad=False)
    table = identification_table(problem, problem.x0(), result.x, experiment.truth)
    files = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    source = config.data["identification"]["recordings"]
    summary = {
        "experiment": config.source,
        "quick": config.quick,
        "initial_loss": None if start is None else start.loss,
        "final_loss": float(result.loss),
        "iterations": int(result.iterations),
        "evaluations": int(result.evaluations),
        "evaluations_from_journal": int(function.replayed),
        "wall_time_s": round(wall_time, 3),
        "converged": bool(result.converged),
        "message": str(result.message),
        "design": _design_values(problem, result.x),
        "identification": {
            "source": source["name"],
            "recordings": len(problem.recordings),
            "steps": sorted({r.steps for r in problem.recordings}),
            "batch_size": experiment.batch_size if stochastic else None,
            "fit_initial_state": problem.fit_initial_state,
            "parameters": table,
        },
        "video": None if video is None else video.name,
        "files": sorted([*files, "summary.json"]),
        "notes": notes,
    }
    write_json(folder / "summary.json", summary)
    return summary


def _optimize(experiment, function: JournaledFunction, tracker: _Progress):
    """Run the experiment's optimizer (or identification) on ``function``."""
    if isinstance(experiment, IdentificationExperiment):
        return identify(function, optimizer=experiment.optimizer,
                        max_iterations=experiment.iterations,
                        batch_size=experiment.batch_size, seed=experiment.seed,
                        callback=tracker).optimization
    return experiment.optimizer.minimize(function, experiment.problem.x0(),
                                         max_iterations=experiment.iterations,
                                         callback=tracker)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def run_experiment(config: ExperimentConfig, registry, *, out: str | Path, resume: bool = False,
                   progress: bool = True, plugin_manager=None,
                   log: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """Optimize ``config`` and write the run directory ``out``; return the summary.

    ``plugin_manager`` (the one ``registry`` came from) lists every plugin in plugins.json;
    without it the plugins that registered components are listed. ``log`` receives notes
    and warnings (default: stderr).

    Raises ConfigError/DesignError before anything is created, RunError for an existing
    ``out`` or a stale journal, RunInterrupted (journal kept) on Ctrl-C/SIGTERM; any other
    error (a diverged simulation) removes the journal and every temporary file.
    """
    from tqdm import tqdm

    out = Path(out)
    journal_dir = partial_dir(out)
    if out.exists():
        raise RunError(f"the run directory {str(out)!r} already exists; choose another --out "
                       "or delete it")
    if journal_dir.exists() and not resume:
        raise RunError(f"{str(journal_dir)!r} holds an interrupted run; pass --resume to "
                       "continue it, or delete that folder to start over")
    if resume and not journal_dir.exists():
        log(f"note: nothing to resume at {str(journal_dir)!r}; starting a new run")
    plugins = plugin_table(plugin_manager) if plugin_manager is not None else [
        {"name": name, "distribution": dist, "version": version}
        for name, dist, version in sorted({(r.plugin, r.distribution, r.version)
                                           for r in registry.all()}, key=str)]

    with build_experiment(config, registry) as experiment:
        out.parent.mkdir(parents=True, exist_ok=True)
        config_text = config.to_yaml()
        if journal_dir.exists():
            stored = journal_dir / "config.yaml"
            if not stored.exists() or stored.read_text(encoding="utf-8") != config_text:
                raise RunError(
                    f"the experiment differs from the interrupted run in {str(journal_dir)!r} "
                    "(compare its config.yaml); resume with the same file and --quick setting, "
                    "or delete that folder to start over")
        journal_dir.mkdir(exist_ok=True)
        write_text(journal_dir / "config.yaml", config_text)
        interrupted = False
        try:
            journaled = JournaledIdentification if isinstance(
                experiment, IdentificationExperiment) else JournaledFunction
            function = journaled(experiment.problem,
                                 EvaluationJournal(journal_dir / "evaluations"))
            if function.journal.entries:
                log(f"resuming: {len(function.journal)} evaluation(s) in the journal")
            started = time.perf_counter()
            with tqdm(total=experiment.iterations, file=sys.stderr, disable=not progress,
                      desc=Path(config.source).stem, unit="it", dynamic_ncols=True) as bar:
                tracker = _Progress(experiment.problem, bar)
                result = _optimize(experiment, function, tracker)
            wall_time = time.perf_counter() - started
            notes = [f"resumed: {function.replayed} evaluation(s) answered from the journal"] \
                if function.replayed else []
            summary = _finish(out, experiment, result, tracker, function, plugins, wall_time,
                              notes, log)
        except KeyboardInterrupt:
            interrupted = True
            raise RunInterrupted(f"interrupted; {_journal_count(journal_dir)} evaluation(s) are "
                                 f"journaled in {str(journal_dir)!r}: rerun the same command "
                                 "with --resume to continue") from None
        finally:
            if not interrupted:
                shutil.rmtree(journal_dir, ignore_errors=True)
    return summary


def _journal_count(journal_dir: Path) -> int:
    """Number of journaled evaluations under ``journal_dir``."""
    folder = journal_dir / "evaluations"
    return sum(1 for p in folder.glob("*.npz") if ".tmp" not in p.name) if folder.exists() else 0


def _finish(out: Path, experiment, result, tracker, function, plugins, wall_time, notes,
            log) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        tmp.chmod(0o777 & ~current_umask())  # mkdtemp makes 0700; the result is a normal folder
        write = _write_identification_outputs if isinstance(
            experiment, IdentificationExperiment) else _write_outputs
        summary = write(tmp, experiment, result, tracker, function, plugins, wall_time, notes,
                        log)
        if out.exists():
            raise RunError(f"{str(out)!r} appeared while the run was writing; its results are "
                           "not replaced")
        tmp.rename(out)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        raise
    return summary
