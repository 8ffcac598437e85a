"""The Assemble metric of the paper's Table IV (Xu et al. 2021): "the distance between the
center of the small box and the center of the hole on the movable mount", after the
episode's last simulation step, normalized by the same distance at the start of the
optimization (the initial design with the controller's initial weights: the box where it
was put, 6.8 cm from the hole in ``assemble.yaml``), so 1 is no progress and 0 the box's
centre on the hole's.

The two centres are those of the experiment's ``touch_point`` term named ``insert`` (its
``link``'s point, the box's centre, and its ``target_link``'s, the hole's, which moves with
the mount): ``python -m sim_rigid.assemble RUN_DIR [RUN_DIR ...]`` prints it for finished
runs of ``assemble.yaml``, ``assemble_codesign.yaml`` and ``assemble_cage.yaml``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .episodes import final_state, print_metrics, run_episodes
from .terms import TouchPoint

__all__ = ["assemble_metric", "final_distance", "main"]


def final_distance(term: TouchPoint, simulator, design: dict, actions, *, substeps: int,
                   dt: float) -> float:
    """‖p − p_touch‖ [m] of ``term``'s two points after the last simulation step of the
    episode that holds each row of ``actions`` (steps, action_size) for ``substeps`` steps
    of ``dt`` [s]."""
    last = final_state(simulator, design, actions, substeps=substeps, dt=dt)
    return float(np.linalg.norm(term.offset(last, design)))


def assemble_metric(run_dir: str | Path) -> dict[str, float]:
    """``initial`` and ``final`` distances [m] between the box's centre and the hole's (the
    ``insert`` term's points) after the last step of a run directory's first and last
    episodes, and ``normalized`` = final / initial."""
    run = run_episodes(run_dir, TouchPoint, name="insert",
                       needs="a touch_point term named insert (from the box's centre to the "
                             "hole's) and an open-loop controller (an assemble experiment)")
    return run.compared(final_distance)


def main(argv=None) -> None:
    """Print the metric of each run directory named on the command line."""
    print_metrics(argv, prog="python -m sim_rigid.assemble", description=__doc__,
                  runs_help="run directories of assemble experiments", metric=assemble_metric,
                  line=lambda m: f"box to hole at the end {1000 * m['initial']:.1f} -> "
                                 f"{1000 * m['final']:.1f} mm, normalized "
                                 f"{m['normalized']:.3f}")


if __name__ == "__main__":
    main()
