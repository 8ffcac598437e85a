"""Baxter's shoulder spring (the paper's Eq. 31) estimated from static poses through the
differentiable simulator (Sec. V-C, Figs. 7 and 8).

Usage: ``python examples/pbd/spring_estimation.py [--poses 30] [--noise 0.1]
[--substeps 100] [--iterations 2] [--scheme first_order] [--out spring_estimation.png]``
(needs Pinocchio, the workspace's dev dependency ``pin``).

The "measured" holding torques of the left arm at ``--poses`` static poses (uniform within
its joint limits, seed 0) are Pinocchio's g(q) (RNEA at rest, same reduced model) less the
torque of a spring across s1 with known k and α₂ (:data:`SPRING`) plus Gaussian noise of
``--noise`` N m on every joint. Two estimates of (k, α₂), both from k = 1000 N/m, α₂ = 0:

- differentiable simulation (the paper's): :func:`sim_pbd.pose_identification.fit_design`,
  Eq. 26 at the poses (λ1 = 1, λ2 = 0.2) with the measured torques applied and the spring
  in the simulator, its gradients w.r.t. ``spring.stiffness`` and ``spring.offset`` through
  the step;
- curve fitting (the paper's other scheme): Eq. 31 fitted by least squares to the s1
  torque the spring must supply, g(q) - τ̂ (which needs the gravity model first).

Prints both beside the truth and draws Fig. 8's loss per iteration and the spring torque
against the s1 angle.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from sim_pbd.options import SCHEMES
from sim_pbd.pose_identification import fit_design
from sim_pbd.scene import make_simulator
from sim_pbd.springs import spring_torques

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from pbd_step import LEFT_ARM, reference_arm  # noqa: E402

SPRING = {"joint": "left_s1", "stiffness": 2000.0, "rest_length": 0.2, "lever_parent": 0.35,
          "lever_child": 0.08, "angle": 3.9, "offset": 0.25}
"""The true spring. x_rest = 0.2 m is the paper's (Baxter's hardware manual); the levers and
α₁ are not given in its text, so they are chosen to take 20 to 25 N m of the arm's s1
gravity torque over the joint's range; k and α₂ are the unknowns."""
START = {"spring.stiffness": np.array([1000.0]), "spring.offset": np.array([0.0])}
NAMES = ("spring.stiffness", "spring.offset")


def curve_fit(sim, poses, spring_torque) -> np.ndarray:
    """(k, α₂) of Eq. 31 fitted by least squares to the s1 spring torque ``spring_torque``
    (P,) [N m] at ``poses`` (P, 7), from :data:`START`."""
    s1 = sim.springs.joint[0]

    def residual(x):
        return np.array([spring_torques(sim.springs, q, x[:1], x[1:])[s1]
                         for q in poses]) - spring_torque

    x0 = np.concatenate([START["spring.stiffness"], START["spring.offset"]])
    return least_squares(residual, x0, x_scale=[1000.0, 0.1]).x


def plot(path: Path, fit, sim, poses, measured_spring, curve) -> None:
    """Fig. 8: the loss per Gauss-Newton iteration; the spring torque against s1."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4), layout="constrained")
    FigureCanvasAgg(figure)
    loss, torque = figure.subplots(1, 2)
    loss.semilogy(np.arange(len(fit.losses)), fit.losses, marker="o")
    loss.set(xlabel="Gauss-Newton iteration", ylabel="loss (Eq. 26)",
             title="differentiable simulation")
    s1 = sim.springs.joint[0]
    angles = np.linspace(sim.model.joint_lower[s1] if np.isfinite(sim.model.joint_lower[s1])
                         else -2.147, 1.047, 200)
    q = np.zeros((angles.size, sim.model.joint_count))
    q[:, s1] = angles

    def curve_of(k, offset):
        return np.array([spring_torques(sim.springs, row, [k], [offset])[s1] for row in q])

    torque.plot(angles, curve_of(SPRING["stiffness"], SPRING["offset"]), "k", label="true")
    torque.plot(angles, curve_of(*[START[n][0] for n in NAMES]), "k:", label="start")
    torque.plot(angles, curve_of(*[fit.design[n][0] for n in NAMES]), "C0--",
                label="differentiable simulation")
    torque.plot(angles, curve_of(*curve), "C1-.", label="curve fitting")
    torque.plot(poses[:, s1], measured_spring, "C3.", label="g(q) - measured torque")
    torque.set(xlabel="s1 angle [rad]", ylabel="spring torque [N m]", title="Eq. 31")
    torque.legend(fontsize=8)
    figure.savefig(path, dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poses", type=int, default=30)
    parser.add_argument("--noise", type=float, default=0.1, help="torque noise σ [N m]")
    parser.add_argument("--substeps", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--scheme", choices=SCHEMES, default="first_order",
                        help="time stepping (default: the paper's first order, the README's "
                             "tables)")
    parser.add_argument("--out", type=Path, default=Path("spring_estimation.png"))
    args = parser.parse_args(argv)
    _, arm, data = reference_arm()
    import pinocchio as pin

    sim = make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False,
                         substeps=args.substeps, iterations=args.iterations,
                         scheme=args.scheme, springs=[SPRING])
    poses = np.random.default_rng(0).uniform(arm.lowerPositionLimit, arm.upperPositionLimit,
                                             size=(args.poses, arm.nq))
    gravity = np.array([pin.computeGeneralizedGravity(arm, data, q) for q in poses])
    truth = np.array([spring_torques(sim.springs, q, [SPRING["stiffness"]],
                                     [SPRING["offset"]]) for q in poses])
    noise = np.random.default_rng(1).normal(scale=args.noise, size=poses.shape)
    measured = gravity - truth + noise

    start = time.perf_counter()
    fit = fit_design(sim, {**sim.design_space().defaults(), **START}, NAMES, poses, measured,
                     dt=args.dt)
    seconds = time.perf_counter() - start
    s1 = sim.springs.joint[0]
    curve = curve_fit(sim, poses, gravity[:, s1] - measured[:, s1])
    print(f"{args.poses} poses, torque noise σ {args.noise} N m, dt {args.dt} s, "
          f"{args.substeps} substeps x {args.iterations} Gauss-Seidel iterations, {args.scheme}\n")
    print("| scheme | k [N/m] | α₂ [rad] | k error | α₂ error | final loss |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| truth | {SPRING['stiffness']:.1f} | {SPRING['offset']:.4f} | | | |")
    print(f"| start | {START['spring.stiffness'][0]:.1f} | {START['spring.offset'][0]:.4f} | "
          f"| | {fit.losses[0]:.3e} |")
    k, offset = (fit.design[n][0] for n in NAMES)
    print(f"| differentiable simulation | {k:.1f} | {offset:.4f} | "
          f"{100 * (k / SPRING['stiffness'] - 1):+.2f} % | {offset - SPRING['offset']:+.4f} | "
          f"{fit.losses[-1]:.3e} |")
    print(f"| curve fitting | {curve[0]:.1f} | {curve[1]:.4f} | "
          f"{100 * (curve[0] / SPRING['stiffness'] - 1):+.2f} % | "
          f"{curve[1] - SPRING['offset']:+.4f} | |")
    print(f"\n{len(fit.losses) - 1} Gauss-Newton iterations in {seconds:.1f} s")
    plot(args.out, fit, sim, poses, gravity[:, s1] - measured[:, s1], curve)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
