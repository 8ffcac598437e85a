"""Impedance control of Baxter's joint s1 with a net-torque map built through the simulator,
against PD (the paper's Sec. V-E, Figs. 12 and 13).

Usage: ``python examples/pbd/impedance_control.py [--angle-points 21] [--rate-points 21]
[--substeps 10] [--iterations 2] [--scheme first_order] [--map s1_net_torque_map.npz]
[--out impedance_control.png]``.

The arm is s1 alone, the other joints frozen (the paper holds them), the left arm straight
out (the other joints at 0), gravity off: on the robot Baxter's own model compensates
gravity for both controllers, and the paper shows only the controllers' torques.

1. The map (Fig. 12): τ_net over Δθ = q_d - q in [-0.00625, 0.00625] rad and ω in
   [-0.5, 0.5] rad/s at Δt = 0.01 s, each point the torque that takes s1 from q_d - Δθ
   moving at ω to q_d = -0.45 rad in one step (Eq. 26, angle term only, minimized through
   the step: :func:`sim_pbd.impedance.build_net_torque_map`). Saved to ``--map``, the file
   the robot's controller loads (:meth:`codesign.impedance.NetTorqueMap.load`).
2. The closed loop (Fig. 13): from rest at the goal, external torques of 5 N m over 5-15 s
   and 10 N m over 20-30 s; Eq. 28 with K_m = 30, D_m = 0.01, s = 1
   (:class:`codesign.impedance.ImpedanceController`) against PD with the same gains.

Prints each controller's largest and final error under each push and its largest torque,
and draws the motor torques, the joint angles, and the external torque with the impedance
controller's two parts.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from codesign.impedance import ImpedanceController, zero_net_torque
from sim_pbd.impedance import build_net_torque_map, closed_loop
from sim_pbd.options import SCHEMES
from sim_pbd.scene import make_simulator

GOAL = -0.45
DT = 0.01
MAX_ANGLE_STEP, MAX_RATE = 0.00625, 0.5
PUSHES = ((5.0, 15.0, 5.0), (20.0, 30.0, 10.0))
"""External torques: (start [s], end [s], torque [N m])."""
DURATION = 35.0


def external(t: float) -> np.ndarray:
    """The external torque [N m] on s1 at time ``t`` [s] (:data:`PUSHES`)."""
    return np.array([sum(tau for start, end, tau in PUSHES if start <= t < end)])


def plot(path: Path, runs: dict, parts: dict) -> None:
    """Fig. 13: motor torques, joint angles, and the external torque with the impedance
    controller's impedance and PD components."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 8), layout="constrained")
    FigureCanvasAgg(figure)
    torque, angle, components = figure.subplots(3, 1, sharex=True)
    for name, run in runs.items():
        torque.plot(run.time[:-1], run.torques[:, 0], label=name)
        angle.plot(run.time, run.joint_q[:, 0], label=name)
    angle.axhline(GOAL, color="k", lw=0.5, ls=":")
    time_axis = runs["impedance"].time[:-1]
    components.plot(time_axis, [external(t)[0] for t in time_axis], "k", label="external")
    components.plot(time_axis, parts["impedance"], label="impedance component")
    components.plot(time_axis, parts["pd"], label="PD component")
    torque.set(ylabel="motor torque [N m]", title="joint s1, goal -0.45 rad")
    angle.set(ylabel="s1 angle [rad]")
    components.set(xlabel="time [s]", ylabel="torque [N m]")
    for axes in (torque, angle, components):
        axes.legend(fontsize=8)
    figure.savefig(path, dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--angle-points", type=int, default=21)
    parser.add_argument("--rate-points", type=int, default=21)
    parser.add_argument("--substeps", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--scheme", choices=SCHEMES, default="first_order",
                        help="time stepping (default: the paper's first order, the README's "
                             "tables)")
    parser.add_argument("--map", type=Path, default=Path("s1_net_torque_map.npz"))
    parser.add_argument("--out", type=Path, default=Path("impedance_control.png"))
    args = parser.parse_args(argv)
    sim = make_simulator(urdf="baxter", joints=["left_s1"], initial_positions={"left_s1": GOAL},
                         gravity=[0.0, 0.0, 0.0], substeps=args.substeps,
                         iterations=args.iterations, scheme=args.scheme)
    design = sim.design_space().defaults()

    start = time.perf_counter()
    net = build_net_torque_map(
        sim, design, goal=GOAL, dt=DT,
        angle_steps=np.linspace(-MAX_ANGLE_STEP, MAX_ANGLE_STEP, args.angle_points),
        rates=np.linspace(-MAX_RATE, MAX_RATE, args.rate_points))
    print(f"map: {args.angle_points} x {args.rate_points} points in "
          f"{time.perf_counter() - start:.1f} s, τ_net from {net.torques.min():.1f} to "
          f"{net.torques.max():.1f} N m, τ_net(0, 0) = {net([GOAL], [0.0], [GOAL])[0]:.2e} "
          f"N m; wrote {net.save(args.map)}")

    impedance, pd = ImpedanceController(net), ImpedanceController(zero_net_torque)
    laws = {"impedance": lambda q, qd: impedance(q, qd, [GOAL]),
            "PD": lambda q, qd: pd(q, qd, [GOAL])}
    steps = int(round(DURATION / DT))
    runs = {name: closed_loop(sim, design, law, joint_q=[GOAL], steps=steps, dt=DT,
                              external=external)
            for name, law in laws.items()}
    q, qd = runs["impedance"].joint_q[:-1], runs["impedance"].joint_qd[:-1]
    parts = {"impedance": impedance.scale * net(q, qd, [GOAL])[:, 0],
             "pd": pd(q, qd, [GOAL])[:, 0]}

    print(f"\nK_m = {impedance.stiffness}, D_m = {impedance.damping}, "
          f"s = {impedance.scale}, dt {DT} s, {args.substeps} substeps x {args.iterations}, "
          f"{args.scheme}\n")
    print("| controller | push [N m] | largest error [rad] | error at its end [rad] | "
          "largest torque [N m] |")
    print("| --- | --- | --- | --- | --- |")
    for name, run in runs.items():
        error = run.joint_q[:, 0] - GOAL
        for begin, end, tau in PUSHES:
            window = slice(int(round(begin / DT)), int(round(end / DT)) + 1)
            print(f"| {name} | {tau:g} | {np.abs(error[window]).max():.3e} | "
                  f"{error[window][-1]:+.3e} | {np.abs(run.torques[window]).max():.2f} |")
    plot(args.out, runs, parts)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
