"""The episodes a task metric of the paper's Table IV compares (Xu et al. 2021): the start of
an optimization (the initial design with the controller's initial weights) and its end (the
run directory's saved design and open-loop table), each replayed step by step.

Used by :mod:`sim_rigid.reach` (Finger Reach), :mod:`sim_rigid.flip` (Flip Box, Rotate
Rubik's Cube) and :mod:`sim_rigid.assemble` (Assemble).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.outputs import read_npz
from codesign.plugins import get_registry
from codesign.validation import validate_config

__all__ = ["RunEpisodes", "episode_states", "final_state", "print_metrics", "run_episodes"]


@dataclasses.dataclass(frozen=True)
class RunEpisodes:
    """A finished open-loop run, ready to replay.

    Attributes:
        term: the run's objective term of the type asked for.
        simulator: the run's simulator.
        substeps, dt: simulation steps per control step and their length [s].
        initial, final: (design, table (control steps, action size)) at the start and at
            the end of the optimization.
    """

    term: object
    simulator: object
    substeps: int
    dt: float
    initial: tuple[dict, np.ndarray]
    final: tuple[dict, np.ndarray]

    def compared(self, measure: Callable[..., float]) -> dict[str, float]:
        """``initial`` and ``final``: ``measure(term, simulator, design, table, substeps=,
        dt=)`` of the start and of the end, and ``normalized`` = final / initial."""
        initial, final = (float(measure(self.term, self.simulator, design, table,
                                        substeps=self.substeps, dt=self.dt))
                          for design, table in (self.initial, self.final))
        return {"initial": initial, "final": final, "normalized": final / initial}


def run_episodes(run_dir: str | Path, term_type: type, *, needs: str,
                 name: str | None = None) -> RunEpisodes:
    """The start and the end of the run in ``run_dir``, whose experiment must have one term
    of ``term_type`` (named ``name`` in the objective, when given) and an open-loop
    controller (else a ValueError ending in ``needs``, e.g. "one reach_targets term and an
    open-loop controller (a finger_reach experiment)"). A run of several stages is replayed
    as its experiment without them: make its last stage the experiment's own settings."""
    run_dir = Path(run_dir)
    registry = get_registry()
    config = validate_config(load_config(run_dir / "config.yaml"), registry)
    with build_experiment(config, registry) as experiment:
        terms = [t.term for t in experiment.objective.terms if isinstance(t.term, term_type)
                 and name in (None, t.name)]
        problem = experiment.problem
        if len(terms) != 1 or "table" not in problem.weight_space.names:
            raise ValueError(f"{run_dir}: the metric needs {needs}")
        saved = read_npz(run_dir / "parameters.npz")
        initial_design = problem.base_design
        final_design = dict(initial_design) | {
            name.removeprefix("design."): value for name, value in saved.items()
            if name.startswith("design.")}
        return RunEpisodes(term=terms[0], simulator=experiment.simulator,
                           substeps=experiment.rollout.substeps, dt=experiment.rollout.dt,
                           initial=(initial_design, problem.weight_space.defaults()["table"]),
                           final=(final_design, saved["controller.table"]))


def episode_states(simulator, design: dict, actions, *, substeps: int,
                   dt: float) -> Iterator[tuple[int, object]]:
    """(step, state after it) for every simulation step of the episode that holds each row
    of ``actions`` (control steps, action size) for ``substeps`` steps of ``dt`` [s]; step
    counts from 1."""
    state = simulator.initial_state(design)
    for step, action in enumerate(np.repeat(np.asarray(actions, dtype=np.float64), substeps,
                                            axis=0)):
        state = simulator.step(state, action, design, dt)
        yield step + 1, state


def final_state(simulator, design: dict, actions, *, substeps: int, dt: float):
    """The state after the last simulation step of :func:`episode_states`' episode (one
    state held at a time)."""
    ((_, state),) = collections.deque(
        episode_states(simulator, design, actions, substeps=substeps, dt=dt), maxlen=1)
    return state


def print_metrics(argv: Sequence[str] | None, *, prog: str, description: str, runs_help: str,
                  metric: Callable[[str], dict], line: Callable[[dict], str]) -> None:
    """A metric module's command line: ``metric(run)`` of each run directory in ``argv``,
    printed as ``"<run>: " + line(result)``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("runs", nargs="+", help=runs_help)
    for run in parser.parse_args(argv).runs:
        print(f"{run}: {line(metric(run))}")
