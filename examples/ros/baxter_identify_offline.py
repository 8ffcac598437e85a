"""The Baxter demo's identification without ROS: the fake robot's arm (Pinocchio, RK4 at
0.5 ms, ``ros_bridge.baxter.TRUE_BAXTER``) swings under the demo's sine excitation from its
rest pose, and sim_pbd fits its link masses, joint damping and shoulder spring to segments
of the motion, each started from its recorded state (multiple shooting, as the ``rosbag``
source's ``segment`` option does). Prints the loss at the true and nominal parameters, then
the fit's error per parameter.

Usage (the workspace's ``.venv``: Pinocchio is a dev dependency)::

    .venv/bin/python examples/ros/baxter_identify_offline.py [--seconds 4] [--segment 0.5]
        [--substeps 100] [--iterations 4] [--amplitude A0,...,A6] [--positions-only]
        [--fit-iterations 80] [--optimizer lbfgsb|least_squares] [--hold-s0] [--bias]

The ros_bridge README's numbers on what biased the Baxter demo's fit (the fits, and the
linearized bias of ``--bias``) were measured with it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from codesign.identification import IdentificationProblem, Recording, identify
from codesign.optim import LBFGSB, TrustRegionLeastSquares
from ros_bridge.baxter import LEFT_ARM, NOMINAL_SPRING, TRUE_BAXTER, BaxterArm
from ros_bridge.torque_schedule import SineExcitation
from sim_pbd.scene import make_simulator
from sim_pbd.terms import JointObserver

EXCITATION_AMPLITUDE = np.array([1.0, 9.0, 1.0, 1.5, 0.3, 0.3, 0.1])  # N m, the demo's
EXCITATION_FREQUENCY = np.array([0.7, 0.5, 0.9, 0.6, 1.1, 0.8, 1.3])  # Hz
HANGING = [0.0, 0.55, 0.0, 1.0, 0.0, 0.0, 0.0]  # rad, near the rest pose
DT, ROBOT_SUBSTEPS = 0.01, 20
BOUNDS = {"link.mass": {"lower": 0.2, "upper": 10.0},
          "joint.damping": {"lower": 0.05, "upper": 3.0},
          "spring.stiffness": {"lower": 500.0, "upper": 5000.0},
          "spring.offset": {"lower": -0.5, "upper": 1.0}}


def record(seconds: float, amplitude: np.ndarray):
    """The true arm's motion under sines of ``amplitude`` [N m] (7,): torques (T, 7) and
    angles and rates (T + 1, 7) each."""
    arm = BaxterArm(TRUE_BAXTER)
    q, qd = arm.rest_pose(HANGING), np.zeros(len(LEFT_ARM))
    excitation = SineExcitation(amplitude, EXCITATION_FREQUENCY, hold=DT)
    angles, rates, torques = [q], [qd], []
    for k in range(int(round(seconds / DT))):
        torque = excitation.torque(k * DT)
        for _ in range(ROBOT_SUBSTEPS):
            q, qd = arm.step(q, qd, torque, DT / ROBOT_SUBSTEPS)
        angles.append(q)
        rates.append(qd)
        torques.append(torque)
    return np.array(torques), np.array(angles), np.array(rates), arm


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--segment", type=float, default=0.5)
    parser.add_argument("--substeps", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--amplitude", type=lambda text: np.array(text.split(","), float),
                        default=EXCITATION_AMPLITUDE,
                        help="excitation amplitude per joint [N m], seven comma-separated")
    parser.add_argument("--positions-only", action="store_true",
                        help="compare joint angles only (rates still start the segments)")
    parser.add_argument("--fit-iterations", type=int, default=80)
    parser.add_argument("--optimizer", choices=("lbfgsb", "least_squares"),
                        default="least_squares")
    parser.add_argument("--hold-s0", action="store_true",
                        help="hold s0's link mass at the URDF's (as the demo's fit does)")
    parser.add_argument("--bias", action="store_true",
                        help="print the linearized bias -(JᵀJ)⁺Jᵀr at the truth (s0's mass at "
                             "the URDF's with --hold-s0) instead of fitting")
    args = parser.parse_args(argv)
    torques, angles, rates, arm = record(args.seconds, args.amplitude)
    print("swing range per joint [rad]", np.ptp(angles, axis=0).round(2))
    spring = {"joint": NOMINAL_SPRING.joint, "stiffness": NOMINAL_SPRING.stiffness,
              "rest_length": NOMINAL_SPRING.rest_length,
              "lever_parent": NOMINAL_SPRING.lever_parent,
              "lever_child": NOMINAL_SPRING.lever_child, "angle": NOMINAL_SPRING.angle,
              "offset": NOMINAL_SPRING.offset}
    sim = make_simulator(urdf="baxter", joints=list(LEFT_ARM), joint_limits=False,
                         substeps=args.substeps, iterations=args.iterations, springs=[spring])
    design = sim.design_space().defaults()
    steps = int(round(args.segment / DT))
    compared_rates = np.full_like(rates, np.nan) if args.positions_only else rates
    recordings = [Recording(torques[s:s + steps],
                            np.concatenate([angles[s:s + steps + 1],
                                            compared_rates[s:s + steps + 1]], 1),
                            name=f"{s * DT:g} s",
                            initial_state=sim.state_at_joints(design, angles[s], rates[s]))
                  for s in range(0, len(torques) - steps + 1, steps)]
    bounds = dict(BOUNDS)
    if args.hold_s0:  # equal bounds hold an entry
        held = {side: np.full(len(LEFT_ARM), BOUNDS["link.mass"][side])
                for side in ("lower", "upper")}
        for side in held.values():
            side[0] = design["link.mass"][0]
        bounds["link.mass"] = held
    problem = IdentificationProblem(sim, recordings, measurement=JointObserver(simulator=sim),
                                    free=list(BOUNDS), overrides=bounds, dt=DT)
    truth = {"link.mass": arm.link_mass, "joint.damping": TRUE_BAXTER.damping,
             "spring.stiffness": TRUE_BAXTER.spring.stiffness,
             "spring.offset": TRUE_BAXTER.spring.offset}
    at_truth = problem.free_space.flatten({f"design.{k}": v for k, v in truth.items()},
                                          scaled=True)
    at_truth = np.clip(at_truth, problem.lower, problem.upper)  # s0's mass, when held
    print(f"{len(recordings)} segments; loss at the truth "
          f"{problem.evaluate(at_truth, grad=False).loss:.3g}, at the nominal parameters "
          f"{problem.evaluate(problem.x0(), grad=False).loss:.3g}")
    if args.bias:
        # where a converged fit lands, to first order: the truth's residuals are the model's
        # mismatch, and a held entry's Jacobian column is zero
        residuals = problem.residuals(at_truth)
        # every row weighs 1 / (rows × segments): a column's root sum of squares is its rms
        rms = np.sqrt(np.sum(residuals.reshape(-1, 2 * len(LEFT_ARM)) ** 2, axis=0))
        print("rms at the truth per joint: angles", " ".join(f"{v:.1e}" for v in rms[:7]),
              "rad; rates", " ".join(f"{v:.1e}" for v in rms[7:]), "rad/s")
        jacobian = problem.jacobian(at_truth, residuals)
        biased = problem.design(at_truth - np.linalg.lstsq(jacobian, residuals, rcond=None)[0])
        _print_errors(biased, truth, "linearized bias")
        return
    started = time.perf_counter()
    optimizer = LBFGSB() if args.optimizer == "lbfgsb" else TrustRegionLeastSquares()
    result = identify(problem, optimizer=optimizer, max_iterations=args.fit_iterations)
    print(f"fit: {time.perf_counter() - started:.0f} s, {result.optimization.message}, "
          f"{result.optimization.iterations} iterations, loss {result.loss:.3g}")
    _print_errors(result.design, truth, "fitted")


def _print_errors(design: dict, truth: dict, label: str) -> None:
    """Each parameter of ``design`` against ``truth`` in %."""
    for name, value in truth.items():
        fitted = np.ravel(design[name])[:np.size(value)]
        print(f"{name}: {label} / true - 1 = "
              f"{np.round(100 * (fitted / np.ravel(value) - 1), 2).tolist()} %")


if __name__ == "__main__":
    main()
