"""The Finger Reach metric of the paper's Table IV (Xu et al. 2021): the fingertip's distance
to the current target averaged over every simulation step of the episode, normalized by the
same average at the start of the optimization (the initial design with the controller's
initial weights), so 1 is no progress and 0 a fingertip on its targets throughout.

``python -m sim_rigid.reach RUN_DIR [RUN_DIR ...]`` prints it for finished runs of an
experiment with a ``reach_targets`` term (``finger_reach*.yaml``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .episodes import episode_states, print_metrics, run_episodes
from .terms import ReachTargets

__all__ = ["fingertip_distances", "main", "reach_metric"]


def fingertip_distances(term: ReachTargets, simulator, design: dict, actions, *,
                        substeps: int, dt: float) -> np.ndarray:
    """The term's distance [m] after every simulation step (steps × substeps,) of the
    episode that holds each row of ``actions`` (steps, action_size) for ``substeps`` steps
    of ``dt`` [s]."""
    return np.array([term.distance(state, design, step * dt) for step, state in
                     episode_states(simulator, design, actions, substeps=substeps, dt=dt)])


def reach_metric(run_dir: str | Path) -> dict[str, float]:
    """``initial`` and ``final`` time-averaged fingertip distances [m] of a run directory of
    an open-loop reach experiment, and ``normalized`` = final / initial."""
    run = run_episodes(run_dir, ReachTargets, needs="one reach_targets term and an "
                       "open-loop controller (a finger_reach experiment)")
    return run.compared(lambda *episode, **timing: np.mean(fingertip_distances(*episode,
                                                                             **timing)))


def main(argv=None) -> None:
    """Print the reach metric of each run directory named on the command line."""
    print_metrics(argv, prog="python -m sim_rigid.reach", description=__doc__,
                  runs_help="run directories of finger_reach experiments", metric=reach_metric,
                  line=lambda m: f"time-averaged fingertip distance {m['initial'] * 1e3:.1f} "
                                 f"-> {m['final'] * 1e3:.1f} mm, normalized "
                                 f"{m['normalized']:.3f}")


if __name__ == "__main__":
    main()
