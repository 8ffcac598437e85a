"""The Flip Box and Rotate Rubik's Cube metric of the paper's Table IV (Xu et al. 2021): "the
flipping/rotating angle error at the end of the task", |θ_T − θ̂| of the ``joint_target``
term's coordinate (the box's hinge, the cube's top layer) after the episode's last
simulation step, normalized by the same error at the start of the optimization (the initial
design with the controller's initial weights: the box or the layer unmoved, an error of
π/2), so 1 is no progress and 0 exactly a quarter turn.

``python -m sim_rigid.flip RUN_DIR [RUN_DIR ...]`` prints it for finished runs of an
experiment with one ``joint_target`` term (``flip_box*.yaml``, ``rubik_rotate*.yaml``).
"""

from __future__ import annotations

from pathlib import Path

from .episodes import final_state, print_metrics, run_episodes
from .terms import JointTarget

__all__ = ["final_error", "flip_metric", "main"]


def final_error(term: JointTarget, simulator, design: dict, actions, *, substeps: int,
                dt: float) -> float:
    """|q_j − q̂| [rad or m] of the term's coordinate after the last simulation step of the
    episode that holds each row of ``actions`` (steps, action_size) for ``substeps`` steps
    of ``dt`` [s]."""
    return abs(term.error(final_state(simulator, design, actions, substeps=substeps, dt=dt)))


def flip_metric(run_dir: str | Path) -> dict[str, float | str]:
    """``initial`` and ``final`` end errors [rad or m] of the ``joint_target`` term's
    coordinate (named by ``joint``) of a run directory of an open-loop experiment (Flip Box,
    Rotate Rubik's Cube), and ``normalized`` = final / initial."""
    run = run_episodes(run_dir, JointTarget, needs="one joint_target term and an open-loop "
                       "controller (a flip_box or rubik_rotate experiment)")
    return {"joint": run.term.joint, **run.compared(final_error)}


def main(argv=None) -> None:
    """Print the metric of each run directory named on the command line."""
    print_metrics(argv, prog="python -m sim_rigid.flip", description=__doc__,
                  runs_help="run directories of flip_box or rubik_rotate experiments",
                  metric=flip_metric,
                  line=lambda m: f"{m['joint']} error at the end {m['initial']:.3f} -> "
                                 f"{m['final']:.3f}, normalized {m['normalized']:.3f}")


if __name__ == "__main__":
    main()
