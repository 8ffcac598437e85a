"""A run of several stages: one optimization after another, each from the last one's result.

An experiment with a ``stages`` section (:mod:`codesign.config`) runs each stage's experiment
(the experiment with the stage's ``set`` keys set, validated as
:attr:`ExperimentConfig.stages <codesign.config.ExperimentConfig>`) in order: stage k starts
from stage k - 1's result (design and controller weights, by name, so a stage may change a
parameter's scale or bounds: the start is clipped into them) and stops where its optimizer
stops (converged, or its own ``optimizer.iterations`` spent). This is the continuation of
Xu et al. (RSS 2021) on their Assemble task: the contact forces scaled by 0.01, 0.1 and 1,
the next stage once L-BFGS-B converges.

:func:`check_stage_experiments` builds every stage before anything runs (a stage that frees
other parameters than the first, e.g. by changing ``design`` or ``run.steps``, is refused
then); :func:`optimized_stages` runs them, journaling each stage's evaluations in a folder
of its own so a killed run resumes, and yields the last stage's experiment with one
:class:`~codesign.optimization.Optimization` over all: the evaluations and iterations of
every stage, the history of every stage (each record with its ``stage``), and one record
per stage (:func:`stage_record`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import numpy as np

from .config import ConfigError, ExperimentConfig
from .experiment import Experiment, build_experiment
from .optimization import Optimization, design_values, optimize_experiment

__all__ = ["check_stage_experiments", "optimized_stages", "stage_record", "warm_start"]


def _layout(problem) -> list[tuple[str, tuple[int, ...]]]:
    """The free parameters of ``problem``: (name, shape) each, in the vector's order."""
    return [(p.name, tuple(p.shape)) for p in problem.space]


def check_stage_experiments(config: ExperimentConfig, registry) -> None:
    """Build every stage of ``config`` (inline, nothing run) and raise ConfigError naming
    each stage whose free parameters (names and shapes) differ from the first stage's."""
    issues, first = [], None
    for k, stage in enumerate(config.stages):
        with build_experiment(stage, registry, executor="inline") as experiment:
            layout = _layout(experiment.problem)
        if first is None:
            first = layout
        elif layout != first:
            issues.append(config.issue(("stages", k, "set"), (
                f"stage {k} optimizes other parameters than stage 0 "
                f"({[name for name, _ in layout]} against {[name for name, _ in first]}, "
                f"with their shapes); each stage starts from the one before, so a stage may "
                f"change options, weights, bounds and budgets but not the design section's "
                f"names, the controller or run.steps")))
    if issues:
        raise ConfigError(issues, source=config.source)


def warm_start(previous, x: np.ndarray, problem) -> np.ndarray:
    """The scaled vector of ``problem`` holding the parameters of ``previous``'s scaled
    vector ``x`` (matched by name), clipped into ``problem``'s bounds."""
    values = previous.space.unflatten(np.asarray(x, dtype=np.float64), scaled=True)
    start = problem.space.flatten(values, scaled=True)
    return np.clip(start, problem.lower, problem.upper)


def stage_record(index: int, config: ExperimentConfig, problem,
                 optimized: Optimization) -> dict[str, Any]:
    """What the run's summary and history keep of stage ``index`` of ``config`` (optimized
    over ``problem``): its ``set`` keys, its start and final loss, iterations, evaluations,
    convergence, message, wall time and free design parameters at its end."""
    result = optimized.result
    return {"stage": index, "set": config.data["stages"][index]["set"],
            "initial_loss": optimized.initial_loss, "final_loss": float(result.loss),
            "iterations": int(result.iterations), "evaluations": int(result.evaluations),
            "converged": bool(result.converged), "message": str(result.message),
            "wall_time_s": round(optimized.wall_time_s, 3),
            "design": design_values(problem, result.x)}


@contextlib.contextmanager
def optimized_stages(config: ExperimentConfig, registry, journal_folder: Path, *,
                     executor: str | dict | Executor | None, progress: bool,
                     log: Callable[[str], None]) -> Iterator[tuple[Experiment, Optimization]]:
    """Optimize each stage of ``config`` in turn, each from the result of the one before
    (:func:`warm_start`), journaling stage k's evaluations in ``journal_folder / str(k)``;
    yield the last stage's experiment (open until the block ends; its ``config`` the whole
    experiment's, stages included) and the :class:`~codesign.optimization.Optimization` of
    the whole run."""
    records: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    previous, x, initial_loss, replayed = None, None, None, 0
    for k, stage in enumerate(config.stages):
        with build_experiment(stage, registry, executor=executor) as experiment:
            start = None if previous is None else warm_start(previous, x, experiment.problem)
            if k:
                log(f"stage {k}: starting from stage {k - 1}'s result")
            optimized = optimize_experiment(experiment, journal_folder / str(k),
                                            progress=progress, log=log, x0=start)
            records.append(stage_record(k, config, experiment.problem, optimized))
            history += [dict(record, stage=k) for record in optimized.history]
            initial_loss = optimized.initial_loss if k == 0 else initial_loss
            replayed += optimized.replayed
            previous, x = experiment.problem, optimized.result.x
            if k == len(config.stages) - 1:
                result = dataclasses.replace(
                    optimized.result, iterations=sum(r["iterations"] for r in records),
                    evaluations=sum(r["evaluations"] for r in records))
                # the run directory records the whole experiment, stages included
                yield dataclasses.replace(experiment, config=config), Optimization(
                    result=result, history=history, initial_loss=initial_loss,
                    replayed=replayed, wall_time_s=sum(r["wall_time_s"] for r in records),
                    stages=records)
