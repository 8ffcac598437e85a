"""The write stage of a run: every file of its run directory.

:func:`write_run_files` fills a folder with

- ``config.yaml``: the resolved experiment (defaults filled in, ``quick`` applied),
- ``plugins.json``: name, version and distribution of every plugin (:func:`plugin_table`),
- ``inputs.json``: every file the experiment names (scene assets, scene files, videos,
  recordings) with its YAML key, path, SHA-256 and size (:func:`codesign.inputs.input_files`),
- ``environment.json``: Python, platform, numeric library versions, git commit and state of
  the codesign checkout and the experiment's folder, the command line and working directory
  (:func:`codesign.environment.run_environment`),
- ``history.json``: per iteration the loss, gradient norm, evaluations and free design
  parameters (fields of more than 64 entries as shape and min/mean/max, controller weights
  as their norm; the final values of both are in parameters.npz); with
  ``optimizer.starts`` > 1 the best start's iterations and, under ``starts``, every start's
  loss, iterations, evaluations and first and last design; with ``stages`` every stage's
  iterations (each record with its ``stage``) and, under ``stages``, the stage records,
- ``parameters.npz``: the final design (``design.<name>``), controller weights
  (``controller.<name>``) and the scaled vector ``x``; numeric arrays only, no pickle,
- ``loss.png``: the loss curve,
- ``result.mp4`` (H.264) or ``result.gif`` (without an H.264 encoder): the optimized rollout
  drawn by the simulator's ``render``,
- ``summary.json``: final loss, iterations, evaluations, wall time, convergence, files, notes
  (and, with several starts, their count and the best one's index; with ``stages``, one
  record per stage: its ``set`` keys, start and final loss, iterations, evaluations,
  convergence and design, :func:`codesign.stages.stage_record`, while the totals count
  every stage and the final loss and design are the last stage's),
- the reports of the run's components: an objective term (or an identification's recording
  set) with a ``report(folder, context)`` method writes its own files (an experiment's plots)
  into the folder and returns numbers that ``summary.json`` keeps under ``reports.<name>``
  (:class:`ReportContext`: the simulator, the initial and final design, the replayed
  rollout's states and actions, an identification's fitted action tables); a failing
  report costs only itself, with a note.

An identification run writes the same files, with: ``parameters.npz`` holding the fitted
design (``design.<name>``), the source's truth (``truth.<name>``) when known, the fitted
action tables (``actions.<i>``, one per recording, with ``fit_actions``) and the vector
``x`` (fitted initial-state offsets and actions included); ``summary.json`` an
``identification`` entry (source, recordings, batch size, whether initial states and
actions were fitted, and per fitted parameter its initial, recovered and true value and the
relative error, :func:`identification_table`); the video the fitted design replaying the
first recording (with its fitted actions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .experiment import Experiment, IdentificationExperiment
from .optimization import Optimization, design_values
from .outputs import (
    check_frame,
    plot_loss,
    summarize_array,
    write_json,
    write_npz,
    write_text,
    write_video,
)

__all__ = [
    "ReportContext",
    "format_identification_table",
    "identification_table",
    "plugin_table",
    "write_run_files",
]


def plugin_table(plugin_manager, *, registry=None) -> list[dict[str, Any]]:
    """Name, module, distribution and version of every plugin registered with
    ``plugin_manager``; without one (``None``), the plugins that registered a component in
    ``registry``."""
    from .plugins import distribution_of

    if plugin_manager is None:
        return [{"name": name, "distribution": dist, "version": version}
                for name, dist, version in sorted({(r.plugin, r.distribution, r.version)
                                                   for r in registry.all()}, key=str)]
    rows = []
    for name, plugin in plugin_manager.list_name_plugin():
        if plugin is None:  # blocked
            continue
        dist = distribution_of(plugin_manager, plugin)
        rows.append({"name": name, "module": getattr(plugin, "__name__", repr(plugin)),
                     "distribution": dist[0] if dist else None,
                     "version": dist[1] if dist else None})
    return rows


def identification_table(problem, x0: np.ndarray, x: np.ndarray,
                         truth: dict | None) -> dict[str, dict[str, Any]]:
    """Per fitted design parameter: initial, recovered, truth and relative error.

    The relative error is the largest |recovered − truth| / |truth| over the parameter's
    entries (absolute where the truth is 0); truth and error are ``None`` when unknown.
    """
    start, end = problem.design(x0), problem.design(x)
    table = {}
    for name in problem.free:
        row = {"initial": summarize_array(start[name]), "recovered": summarize_array(end[name]),
               "truth": None, "relative_error": None}
        if truth and name in truth:
            true = np.broadcast_to(np.asarray(truth[name], dtype=np.float64),
                                   np.shape(end[name]))
            error = np.abs(end[name] - true) / np.where(true != 0, np.abs(true), 1.0)
            row["truth"] = summarize_array(true)
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


def _result_arrays(experiment: Experiment | IdentificationExperiment,
                   x: np.ndarray) -> dict[str, np.ndarray]:
    """parameters.npz: the full design, the controller weights or the truth (and the fitted
    action tables), and ``x``."""
    problem = experiment.problem
    if isinstance(experiment, IdentificationExperiment):
        groups = {"design": problem.design(x), "truth": experiment.truth or {},
                  "actions": {str(i): problem.actions(x, i)
                              for i in range(len(problem.recordings)) if problem.fit_actions}}
    else:
        design, weights = problem.split(x)
        groups = {"design": design, "controller": weights}
    arrays = {f"{group}.{name}": np.asarray(value, dtype=np.float64)
              for group, values in groups.items() for name, value in values.items()}
    arrays["x"] = np.asarray(x, dtype=np.float64)
    return arrays


def _full_design(experiment: Experiment | IdentificationExperiment, x: np.ndarray) -> dict:
    """The simulator's full design at the problem's vector ``x``."""
    problem = experiment.problem
    return problem.design(x) if isinstance(experiment, IdentificationExperiment) \
        else problem.split(x)[0]


def _frames(simulator, result, design, video: dict) -> list[np.ndarray]:
    """Every ``video["every"]``-th recorded state of ``result`` drawn by the simulator's
    ``render_sequence`` (when it has one) or ``render``, each with the action applied from it
    (None for the final state)."""
    actions = list(result.actions) + [None]
    width, height = video["width"], video["height"]
    states = list(result.states)[:: video["every"]]
    actions = actions[:: video["every"]]
    sequence = getattr(simulator, "render_sequence", None)
    if sequence is not None:
        frames = sequence(states, design, width=width, height=height, actions=actions)
        if len(frames) != len(states):
            raise ValueError(f"render_sequence returned {len(frames)} frames for "
                             f"{len(states)} states")
    else:
        frames = [simulator.render(state, design, width=width, height=height, action=action)
                  for state, action in zip(states, actions, strict=True)]
    return [check_frame(frame, width=width, height=height) for frame in frames]


@dataclasses.dataclass(frozen=True)
class ReportContext:
    """What a component's ``report`` hook sees of a finished run.

    Attributes:
        simulator: the run's simulator.
        initial_design, design: the full design at the start and at the result.
        states: the replayed rollout's states (host trees), steps + 1 of them: the optimized
            rollout, or for an identification the fitted design replaying recording 0.
        actions: the replayed rollout's actions, shape (steps, action_size).
        controller_weights: the controller's weights at the result (name -> array; empty
            for an identification).
        fitted_actions: an identification's fitted action tables, one (T_i, action_size)
            array per recording, when it fitted them (``identification.fit_actions``), else
            ``None``.
    """

    simulator: Any
    initial_design: dict[str, np.ndarray]
    design: dict[str, np.ndarray]
    states: list
    actions: np.ndarray
    controller_weights: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    fitted_actions: list[np.ndarray] | None = None


def _replay(experiment: Experiment | IdentificationExperiment, x: np.ndarray):
    """(design, recorded rollout, what the video shows) of the result at ``x``: an
    identification's fitted design replaying recording 0 (its fitted actions when it fitted
    them), else the optimized rollout."""
    problem = experiment.problem
    design = _full_design(experiment, x)
    if isinstance(experiment, IdentificationExperiment):
        result = problem.rollouts[0].forward(
            design, {"table": problem.actions(x, 0)}, problem.objectives[0],
            initial_offset=problem.initial_offset(x, 0),
            initial_state=problem.recordings[0].initial_state, record=True)
        return design, result, "the fitted design replaying recording 0, "
    result = experiment.rollout.forward(design, problem.split(x)[1], experiment.objective,
                                        experiment.constraints, record=True)
    return design, result, ""


def _render_video(experiment: Experiment | IdentificationExperiment, design, result,
                  shows: str, stem: Path) -> tuple[Path | None, str]:
    """Render the replayed ``result``; returns (video path or None, note)."""
    if getattr(experiment.simulator, "render", None) is None:
        return None, "no video: the simulator has no render hook"
    video = experiment.config.data["run"]["video"]
    frames = _frames(experiment.simulator, result, design, video)
    path = write_video(stem, frames, fps=video["fps"])
    return path, f"video: {shows}{len(frames)} frames at {video['fps']} fps ({path.suffix[1:]})"


def _reporters(experiment: Experiment | IdentificationExperiment) -> dict[str, Any]:
    """YAML name -> component of the run that has a ``report`` hook: the objective's terms
    and the controller (under its name), or an identification's recording set (under its
    source's name)."""
    if isinstance(experiment, IdentificationExperiment):
        name = experiment.config.data["identification"]["recordings"]["source"]
        candidates = {name: experiment.recordings}
    else:
        candidates = {wt.name or type(wt.term).__name__: wt.term
                      for wt in experiment.objective.terms}
        candidates.setdefault(experiment.config.data["controller"]["name"],
                              experiment.controller)
    return {name: c for name, c in candidates.items() if callable(getattr(c, "report", None))}


def _write_reports(folder: Path, experiment, context: ReportContext,
                   log: Callable[[str], None]) -> tuple[dict[str, Any], list[str]]:
    """Each reporter's ``report(folder, context)`` (its files written into ``folder``, its
    numbers returned); a failing report costs only itself (a note)."""
    reports, notes = {}, []
    for name, component in _reporters(experiment).items():
        try:
            reports[name] = component.report(folder, context)
        except Exception as exc:  # a plugin's report bug must not cost the optimized result
            note = f"no report from {name}: {type(exc).__name__}: {exc}"
            log(f"warning: {note}")
            notes.append(note)
    return reports, notes


def write_run_files(folder: Path, experiment: Experiment | IdentificationExperiment,
                    optimized: Optimization, plugins: list[dict[str, Any]], *,
                    inputs: list[dict[str, Any]], environment: dict[str, Any],
                    log: Callable[[str], None]) -> dict[str, Any]:
    """Write every file of the run into ``folder``; return the summary.

    ``plugins``, ``inputs`` and ``environment`` are what plugins.json, inputs.json and
    environment.json hold. A failing ``render`` hook costs only the video: its note goes to
    ``log`` and the summary.
    """
    config, result = experiment.config, optimized.result
    identification = isinstance(experiment, IdentificationExperiment)
    write_text(folder / "config.yaml", config.to_yaml())
    write_json(folder / "plugins.json", plugins)
    write_json(folder / "inputs.json", inputs)
    write_json(folder / "environment.json", environment)
    history = {"iterations": optimized.history}
    if optimized.starts:
        history["starts"] = optimized.starts
    if optimized.stages:
        history["stages"] = optimized.stages
    write_json(folder / "history.json", history)
    write_npz(folder / "parameters.npz", _result_arrays(experiment, result.x))
    losses = [h["loss"] for h in optimized.history] or [result.loss]
    loss_name = ("minibatch tracking loss" if experiment.stochastic else "tracking loss") \
        if identification else "loss"
    plot_loss(folder / "loss.png", losses, title=f"{Path(config.source).name}: {loss_name}")
    notes = [f"resumed: {optimized.replayed} evaluation(s) answered from the journal"] \
        if optimized.replayed else []
    video, reports, replayed = None, {}, None
    try:
        design, replayed, shows = _replay(experiment, result.x)
        video, note = _render_video(experiment, design, replayed, shows, folder / "result")
    except Exception as exc:  # a plugin's render bug must not cost the optimized result
        note = f"no video: {exc}" if isinstance(exc, ValueError) else \
            f"no video: render failed with {type(exc).__name__}: {exc}"
        log(f"warning: {note}")
    notes.append(note)
    if _reporters(experiment):
        problem = experiment.problem
        fitted = [problem.actions(result.x, i) for i in range(len(problem.recordings))] \
            if identification and problem.fit_actions else None
        context = ReportContext(
            simulator=experiment.simulator, initial_design=_full_design(experiment, problem.x0()),
            design=_full_design(experiment, result.x),
            states=[] if replayed is None else list(replayed.states),
            actions=np.zeros((0, 0)) if replayed is None else replayed.actions,
            controller_weights={} if identification else problem.split(result.x)[1],
            fitted_actions=fitted)
        reports, report_notes = _write_reports(folder, experiment, context, log)
        notes += report_notes
    files = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    summary = {
        "experiment": config.source,
        "quick": config.quick,
        "initial_loss": optimized.initial_loss,
        "final_loss": float(result.loss),
        "iterations": int(result.iterations),
        "evaluations": int(result.evaluations),
        "evaluations_from_journal": int(optimized.replayed),
        "wall_time_s": round(optimized.wall_time_s, 3),
        "converged": bool(result.converged),
        "message": str(result.message),
        "design": design_values(experiment.problem, result.x),
    }
    if optimized.starts:
        summary["starts"] = len(optimized.starts)
        summary["best_start"] = min(optimized.starts, key=lambda s: (s["loss"], s["start"]))[
            "start"]
    if optimized.stages:
        summary["stages"] = optimized.stages
    if identification:
        problem = experiment.problem
        summary["identification"] = {
            "source": config.data["identification"]["recordings"]["source"],
            "recordings": len(problem.recordings),
            "steps": sorted({r.steps for r in problem.recordings}),
            "batch_size": experiment.batch_size if experiment.stochastic else None,
            "fit_initial_state": problem.fit_initial_state,
            "fit_actions": problem.fit_actions,
            "parameters": identification_table(problem, problem.x0(), result.x, experiment.truth),
        }
    if reports:
        summary["reports"] = reports
    summary.update({"video": None if video is None else video.name,
                    "files": sorted([*files, "summary.json"]), "notes": notes})
    write_json(folder / "summary.json", summary)
    return summary
