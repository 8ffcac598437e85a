"""Baxter's gravity compensation torques through the differentiable simulator (the paper's
Sec. V-C, Table III).

Usage: ``python examples/pbd/gravity_compensation.py [--poses 30] [--substeps 100]
[--iterations 2] [--dt 0.01] [--scheme first_order]`` (needs Pinocchio, the workspace's dev
dependency ``pin``).

Draws ``--poses`` static poses of the left arm uniformly within its URDF joint limits
(seed 0), estimates at each the torque that holds the arm at rest for one step
(:func:`sim_pbd.torque_estimation.holding_torque`, Eq. 26 with λ1 = 1, λ2 = 0.02) and
compares it with Pinocchio's g(q) (RNEA at zero rate and acceleration) on the same reduced
model. Prints the estimates' mean, max and min and the MAE against g(q) per joint beside the
paper's Table III, then the MAE against the XPBD substep h = dt / substeps: the holding
torque of one XPBD step differs from g(q) at first order in h.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from sim_pbd.options import SCHEMES
from sim_pbd.reports import PAPER_GRAVITY_TORQUES
from sim_pbd.scene import make_simulator
from sim_pbd.torque_estimation import holding_torque

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from pbd_step import LEFT_ARM, reference_arm  # noqa: E402


def estimate(poses, *, substeps: int, iterations: int, dt: float,
             scheme: str) -> np.ndarray:
    """Holding torques (P, 7) [N m] at ``poses`` (P, 7) [rad] with these XPBD settings."""
    sim = make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False,
                         substeps=substeps, iterations=iterations, scheme=scheme)
    design = sim.design_space().defaults()
    return np.array([holding_torque(sim, design, q, dt=dt) for q in poses])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poses", type=int, default=30)
    parser.add_argument("--substeps", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--scheme", choices=SCHEMES, default="first_order",
                        help="time stepping (default: the paper's first order, the README's "
                             "tables)")
    args = parser.parse_args(argv)
    reference, arm, data = reference_arm()
    import pinocchio as pin

    poses = np.random.default_rng(0).uniform(arm.lowerPositionLimit, arm.upperPositionLimit,
                                             size=(args.poses, arm.nq))
    gravity = np.array([pin.computeGeneralizedGravity(arm, data, q) for q in poses])
    start = time.perf_counter()
    torques = estimate(poses, substeps=args.substeps, iterations=args.iterations, dt=args.dt,
                       scheme=args.scheme)
    seconds = time.perf_counter() - start
    error = np.abs(torques - gravity)
    print(f"{args.poses} poses, dt {args.dt} s, {args.substeps} substeps x {args.iterations} "
          f"Gauss-Seidel iterations ({seconds / args.poses:.2f} s a pose)\n")
    print("| joint | mean N m | max N m | min N m | MAE N m | paper mean / max / min / MAE |")
    print("| --- | --- | --- | --- | --- | --- |")
    for j, name in enumerate(LEFT_ARM):
        paper = " / ".join(f"{v:.3g}" for v in PAPER_GRAVITY_TORQUES[name]) \
            if name in PAPER_GRAVITY_TORQUES else "-"
        print(f"| {name} | {torques[:, j].mean():.3f} | {torques[:, j].max():.3f} | "
              f"{torques[:, j].min():.3f} | {error[:, j].mean():.4f} | {paper} |")
    print(f"\nlargest error {error.max():.4f} N m; g(q) ranges "
          f"{np.abs(gravity).max(0).round(2).tolist()} N m (|g| max per joint)\n")
    print("| substeps | h [ms] | MAE s1 | MAE e1 | MAE w1 | MAE, all joints | max error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for substeps in (10, 20, 50, 100, 200):
        error = np.abs(estimate(poses, substeps=substeps, iterations=args.iterations,
                                dt=args.dt, scheme=args.scheme) - gravity)
        mae = error.mean(0)
        print(f"| {substeps} | {1e3 * args.dt / substeps:.3g} | {mae[1]:.4f} | {mae[3]:.4f} | "
              f"{mae[5]:.4f} | {mae.mean():.4f} | {error.max():.4f} |")


if __name__ == "__main__":
    main()
