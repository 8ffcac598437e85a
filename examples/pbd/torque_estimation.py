"""Joint torques estimated from a recorded trajectory through the differentiable simulator
(the paper's Sec. V-D, Table IV).

Usage: ``python examples/pbd/torque_estimation.py [--duration 1.0] [--substeps 50]
[--noise-q 1e-4] [--noise-qd 1e-2] [--optimizer gauss_newton|adam] [--no-mpc]
[--scheme first_order]``
(needs Pinocchio, the workspace's dev dependency ``pin``).

The recording: Baxter's left arm in Pinocchio (the same reduced model, the URDF's joint
damping 0.7 N m s/rad) started at rest and driven every 0.01 s by known torques, gravity
compensation g(q) at the step's start plus a smooth sinusoidal profile (amplitudes
4, 6, 4, 4, 1, 1, 0.2 N m, 0.4 to 1 Hz), integrated by RK4 at 0.25 ms with each torque held
over its step. Sensor noise is added to the recorded angles and rates (default σ 1e-4 rad,
the quantization of a 14-bit encoder, and 1e-2 rad/s, an encoder differenced at 100 Hz).
:func:`sim_pbd.torque_estimation.track_torques` then estimates the torque of each step with
the three weightings of Eq. 26 (angle only, rate only, both with λ2 = 0.02) and the three
starts (zero, previous, gravity compensation from Pinocchio's g at the recorded angles), and
the 3-step MPC (λ3 = 2e-7, started from the previous plan and gravity); the RMSE against the
true torques is printed beside the paper's Table IV (joints s1, e0, e1).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from sim_pbd.options import SCHEMES
from sim_pbd.scene import make_simulator
from sim_pbd.torque_estimation import track_torques

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from pbd_step import DAMPING, DT, LEFT_ARM, POSE, reference_arm  # noqa: E402

AMPLITUDE = np.array([4.0, 6.0, 4.0, 4.0, 1.0, 1.0, 0.2])  # [N m]
FREQUENCY = np.array([0.5, 0.4, 0.7, 0.6, 1.0, 0.8, 0.9])  # [Hz]
WEIGHTINGS = {"angle only": (1.0, 0.0, 0.0), "omega only": (0.0, 1.0, 0.0),
              "angle+omega": (1.0, 0.02, 0.0)}
PAPER = {  # Table IV, RMSE [N m] per start: angle only, omega only, angle+omega; MPC
    "left_s1": {"zero": (13.429, 2.353, 31.151), "previous": (27.269, 2.300, 2.593),
                "gravity": (3.080, 2.424, 1.7638), "mpc": 1.726},
    "left_e0": {"zero": (2.172, 1.518, 3.293), "previous": (37.543, 1.500, 1.448),
                "gravity": (1.309, 1.344, 1.192), "mpc": 1.196},
    "left_e1": {"zero": (6.926, 2.251, 18.162), "previous": (32.447, 2.244, 2.309),
                "gravity": (2.745, 2.243, 2.164), "mpc": 2.128},
}
ADAM = {"zero": dict(learning_rate=1.0, iterations=80),  # the paper's Fig. 9 settings
        "previous": dict(learning_rate=0.2, iterations=80),
        "gravity": dict(learning_rate=0.2, iterations=80),
        "mpc": dict(learning_rate=0.1, iterations=120)}


def record(reference, arm, *, duration: float, noise_q: float, noise_qd: float, seed: int):
    """True angles, rates (K + 1, 7), torques (K, 7) and the noisy recorded angles and
    rates of the arm driven from POSE for ``duration`` [s]."""
    import pinocchio as pin

    data = arm.createData()

    def torque(k, q, v):
        t = k * DT
        return (pin.computeGeneralizedGravity(arm, data, q)
                + AMPLITUDE * np.sin(2.0 * np.pi * FREQUENCY * t))

    joint_q, joint_qd, torques = reference.drive(arm, POSE, torque, int(round(duration / DT)),
                                                 damping=DAMPING, sample=DT)
    rng = np.random.default_rng(seed)
    return (joint_q, joint_qd, torques, joint_q + noise_q * rng.standard_normal(joint_q.shape),
            joint_qd + noise_qd * rng.standard_normal(joint_qd.shape))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--substeps", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--noise-q", type=float, default=1e-4)
    parser.add_argument("--noise-qd", type=float, default=1e-2)
    parser.add_argument("--optimizer", choices=("gauss_newton", "adam"), default="gauss_newton")
    parser.add_argument("--no-mpc", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scheme", choices=SCHEMES, default="first_order",
                        help="time stepping (default: the paper's first order, the README's "
                             "tables)")
    args = parser.parse_args(argv)
    reference, arm, data = reference_arm()
    import pinocchio as pin

    _, _, true, recorded_q, recorded_qd = record(reference, arm, duration=args.duration,
                                                 noise_q=args.noise_q,
                                                 noise_qd=args.noise_qd, seed=args.seed)
    gravity = np.array([pin.computeGeneralizedGravity(arm, data, q) for q in recorded_q])
    sim = make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False, damping=DAMPING,
                         substeps=args.substeps, iterations=args.iterations, scheme=args.scheme)
    design = sim.design_space().defaults()

    def rmse(init, weights, horizon=1, key=None):
        settings = ADAM[key or init] if args.optimizer == "adam" else {}
        start = time.perf_counter()
        tracking = track_torques(sim, design, recorded_q, recorded_qd, dt=DT, init=init,
                                 weights=weights, horizon=horizon, gravity_torques=gravity,
                                 optimizer=args.optimizer, **settings)
        seconds = time.perf_counter() - start
        error = np.sqrt(np.mean((tracking.torques - true) ** 2, axis=0))
        angle = np.abs(tracking.joint_q - recorded_q).max()
        print(f"  {init:8s} {str(weights):18s} H={horizon}: RMSE all joints "
              f"{np.sqrt(np.mean(error ** 2)):.3f} N m, largest angle gap {angle:.2e} rad, "
              f"{seconds:.1f} s", flush=True)
        return error

    print(f"{len(true)} steps of {DT} s, noise σ {args.noise_q} rad / {args.noise_qd} rad/s, "
          f"sim {args.substeps} substeps x {args.iterations}, optimizer {args.optimizer}")
    results = {init: [rmse(init, w) for w in WEIGHTINGS.values()]
               for init in ("zero", "previous", "gravity")}
    mpc = None if args.no_mpc else rmse("previous", (1.0, 0.02, 2e-7), horizon=3, key="mpc")
    for name in PAPER:
        j = LEFT_ARM.index(name)
        print(f"\nRMSE of {name} torque [N m] (ours / paper's Table IV)\n")
        print("| start | " + " | ".join(WEIGHTINGS) + " |")
        print("| --- | --- | --- | --- |")
        for init, rows in results.items():
            cells = [f"{row[j]:.3f} / {paper}" for row, paper in zip(rows, PAPER[name][init],
                                                                       strict=True)]
            print(f"| {init} | " + " | ".join(cells) + " |")
        if mpc is not None:
            print(f"| MPC (H = 3, λ3 = 2e-7) | | | {mpc[j]:.3f} / {PAPER[name]['mpc']} |")


if __name__ == "__main__":
    main()
