"""The free-form gripper's metric (Xu et al. 2021, Section IV-C: the grasp's success rate):
the share of several starts, the diamond's pose on the floor perturbed, in which the
gripper still holds it after the predefined grasp, lift and shake.

A start succeeds when the diamond ends where the palm carried it: the offset of the
``touch_point`` term's points (the diamond's centre, the point of the palm it started at)
after the last step differs from the same offset at the start by less than ``tolerance``
(default 1 cm; a diamond left on the floor is 5 cm, the lift, off), not counting a rise
of the diamond against the palm (pads that close under its girdle push it up into the
grip). Start 0 is the
experiment's own pose; the others move the diamond by up to ``shift`` along x and y and
turn it by up to ``turn`` about z (uniform, seeded), as Ha et al.'s and the paper's success
rates count grasps of objects not placed exactly.

``python -m sim_rigid.gripper RUN_DIR [RUN_DIR ...]`` prints it for finished runs of
``freeform_gripper.yaml``, at the start of the optimization (the cubes) and at its end.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from .episodes import final_state, run_episodes
from .terms import TouchPoint

__all__ = ["gripper_metric", "held", "main", "start_poses", "success_rate"]


@dataclasses.dataclass(frozen=True)
class _StartedAt:
    """``simulator`` whose episodes start at ``state`` (what :func:`final_state` replays)."""

    simulator: object
    state: object

    def initial_state(self, design):
        return self.state

    def step(self, state, action, design, dt):
        return self.simulator.step(state, action, design, dt)


def start_poses(model, count: int, *, shift: float = 0.004, turn: float = 0.2,
                seed: int = 0) -> np.ndarray:
    """(count, d) initial coordinates: the model's rest pose, then ``count - 1`` with the
    free joint ``diamond``'s x and y moved by uniform offsets within ±``shift`` [m] and
    its turn about z within ±``turn`` [rad] (seeded by ``seed``)."""
    if int(count) != count or count < 1:
        raise ValueError(f"count must be an integer >= 1 starts, got {count!r}")
    names = model.coordinate_names
    missing = [n for n in ("diamond.x", "diamond.y", "diamond.rz") if n not in names]
    if missing:
        raise ValueError(f"the robot has no coordinates {missing}: the metric perturbs the "
                         f"diamond of robot: {{gripper: ...}}")
    index = [names.index(n) for n in ("diamond.x", "diamond.y", "diamond.rz")]
    poses = np.tile(np.asarray(model.joint_rest, dtype=np.float64), (int(count), 1))
    rng = np.random.default_rng(seed)
    poses[1:, index] += rng.uniform(-1, 1, (int(count) - 1, 3)) * [shift, shift, turn]
    return poses


def held(term: TouchPoint, simulator, design: dict, actions, start, *, substeps: int,
         dt: float, tolerance: float = 0.01) -> tuple[bool, float]:
    """(success, drift [m]) of the episode from coordinates ``start`` (d,) at rest that
    holds each row of ``actions`` for ``substeps`` steps of ``dt`` [s]: the drift is how far
    the term's offset (the object's point against the palm's) moved from the start to the
    end, a rise of the object against the palm left out, a success a drift below
    ``tolerance`` [m]."""
    rest = simulator.initial_state(design)
    q = np.asarray(start, dtype=np.float64)
    origin = dataclasses.replace(rest, joint_q=q.copy(), joint_q_prev=q.copy())
    last = final_state(_StartedAt(simulator, origin), design, actions, substeps=substeps,
                       dt=dt)
    moved = term.offset(last, design) - term.offset(origin, design)
    # pads that close under the girdle push the diamond up into the grip: not a drop
    moved[2] = min(moved[2], 0.0)
    drift = float(np.linalg.norm(moved))
    return drift < tolerance, drift


def success_rate(term: TouchPoint, simulator, design: dict, actions, *, substeps: int,
                 dt: float, starts: int = 8, seed: int = 0, tolerance: float = 0.01,
                 shift: float = 0.004, turn: float = 0.2) -> dict:
    """``successes`` of ``starts`` (:func:`start_poses`) under :func:`held`, their ``rate``
    and each start's ``drift`` [m]."""
    poses = start_poses(simulator.model, starts, shift=shift, turn=turn, seed=seed)
    results = [held(term, simulator, design, actions, pose, substeps=substeps, dt=dt,
                    tolerance=tolerance) for pose in poses]
    successes = sum(ok for ok, _ in results)
    return {"successes": successes, "starts": int(starts), "rate": successes / int(starts),
            "drift": [drift for _, drift in results]}


def gripper_metric(run_dir: str | Path, **options) -> dict[str, dict]:
    """:func:`success_rate` (keywords ``options``) of a run directory's start (the initial
    design: the cubes) and end (the saved design), as ``initial`` and ``final``."""
    run = run_episodes(run_dir, TouchPoint,
                       needs="one touch_point term (the diamond's centre against the palm) "
                             "and an open-loop controller (a freeform_gripper experiment)")
    return {key: success_rate(run.term, run.simulator, design, table, substeps=run.substeps,
                              dt=run.dt, **options)
            for key, (design, table) in (("initial", run.initial), ("final", run.final))}


def main(argv=None) -> None:
    """Print the metric of each run directory named on the command line."""
    parser = argparse.ArgumentParser(prog="python -m sim_rigid.gripper", description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories of freeform_gripper "
                                                "experiments")
    parser.add_argument("--starts", type=int, default=8, help="starts per design (8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the perturbations (0)")
    parser.add_argument("--tolerance", type=float, default=0.01,
                        help="largest drift of a held diamond [m] (0.01)")
    args = parser.parse_args(argv)
    for run in args.runs:
        m = gripper_metric(run, starts=args.starts, seed=args.seed, tolerance=args.tolerance)
        line = " -> ".join(f"{r['successes']}/{r['starts']} held (drift "
                           f"{', '.join(f'{1000 * d:.1f}' for d in r['drift'])} mm)"
                           for r in (m["initial"], m["final"]))
        print(f"{run}: {line}")


if __name__ == "__main__":
    main()
