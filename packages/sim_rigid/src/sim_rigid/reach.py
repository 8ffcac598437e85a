"""The Finger Reach metric of the paper's Table IV (Xu et al. 2021): the fingertip's distance
to the current target averaged over every simulation step of the episode, normalized by the
same average at the start of the optimization (the initial design with the controller's
initial weights), so 1 is no progress and 0 a fingertip on its targets throughout.

``python -m sim_rigid.reach RUN_DIR [RUN_DIR ...]`` prints it for finished runs of an
experiment with a ``reach_targets`` term (``finger_reach*.yaml``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.outputs import read_npz
from codesign.plugins import get_registry
from codesign.validation import validate_config

from .terms import ReachTargets

__all__ = ["fingertip_distances", "main", "reach_metric"]


def fingertip_distances(term: ReachTargets, simulator, design: dict, actions, *,
                        substeps: int, dt: float) -> np.ndarray:
    """The term's distance [m] after every simulation step (steps × substeps,) of the
    episode that holds each row of ``actions`` (steps, action_size) for ``substeps`` steps
    of ``dt`` [s]."""
    state = simulator.initial_state(design)
    distances = []
    for step, action in enumerate(np.repeat(np.asarray(actions, dtype=np.float64), substeps,
                                            axis=0)):
        state = simulator.step(state, action, design, dt)
        distances.append(term.distance(state, design, (step + 1) * dt))
    return np.array(distances)


def reach_metric(run_dir: str | Path) -> dict[str, float]:
    """``initial`` and ``final`` time-averaged fingertip distances [m] of a run directory of
    an open-loop reach experiment, and ``normalized`` = final / initial."""
    run_dir = Path(run_dir)
    registry = get_registry()
    config = validate_config(load_config(run_dir / "config.yaml"), registry)
    with build_experiment(config, registry) as experiment:
        terms = [t.term for t in experiment.objective.terms if isinstance(t.term, ReachTargets)]
        problem = experiment.problem
        if len(terms) != 1 or "table" not in problem.weight_space.names:
            raise ValueError(f"{run_dir}: the reach metric needs one reach_targets term and an "
                             f"open-loop controller (a finger_reach experiment)")
        simulator, rollout = experiment.simulator, experiment.rollout
        saved = read_npz(run_dir / "parameters.npz")
        initial_design = problem.base_design
        final_design = dict(initial_design) | {
            name.removeprefix("design."): value for name, value in saved.items()
            if name.startswith("design.")}
        initial_table = problem.weight_space.defaults()["table"]
        averages = [float(np.mean(fingertip_distances(
            terms[0], simulator, design, table, substeps=rollout.substeps, dt=rollout.dt)))
            for design, table in ((initial_design, initial_table),
                                  (final_design, saved["controller.table"]))]
    return {"initial": averages[0], "final": averages[1],
            "normalized": averages[1] / averages[0]}


def main(argv=None) -> None:
    """Print the reach metric of each run directory named on the command line."""
    parser = argparse.ArgumentParser(prog="python -m sim_rigid.reach", description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories of finger_reach experiments")
    for run in parser.parse_args(argv).runs:
        m = reach_metric(run)
        print(f"{run}: time-averaged fingertip distance {m['initial'] * 1e3:.1f} -> "
              f"{m['final'] * 1e3:.1f} mm, normalized {m['normalized']:.3f}")


if __name__ == "__main__":
    main()
