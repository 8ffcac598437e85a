"""Regenerate the recordings sim_pbd's experiment YAMLs read, from the reference library.

Usage: ``python examples/pbd/make_recordings.py [--out DIR]`` (needs Pinocchio, the
workspace's dev dependency ``pin``; default DIR is the package's
``sim_pbd/examples/pbd_recordings``). sim_pbd itself never imports Pinocchio: these files
are its ground truth, made once and shipped.

Writes, each with ``<name>.provenance.json`` beside it (how it was made: this script, the
settings, Pinocchio's and NumPy's versions, the SHA-256 of the URDF):

- ``gravity_poses.npz``: Baxter's left arm at 30 poses drawn uniformly within its URDF
  joint limits (seed 0, as ``gravity_compensation.py``), with Pinocchio's gravity torques
  g(q) (RNEA at rest) as the holding torques (experiment 2);
- ``spring_poses.npz``: the same poses with the torques a motor gives when a spring across
  s1 (``spring_estimation.py``'s ``SPRING``: k = 2000 N/m, α₂ = 0.25 rad) carries part of
  the load, g(q) less the spring's torque, plus Gaussian noise of 0.1 N m (seed 1), and the
  truth ``truth.spring.stiffness`` and ``truth.spring.offset`` (experiment 3);
- ``driven_arm.npz``: the arm driven from rest at ``POSE`` for 1 s by g(q) plus sines
  (``torque_estimation.py``'s ``record``: RK4 at 0.25 ms, damping 0.7 N m s/rad, the torque
  held over each 10 ms step), its angles and rates every 10 ms with sensor noise (σ 1e-4
  rad, 1e-2 rad/s; seed 0), the true torques and the gravity torques at the recorded
  angles (experiment 4).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

from codesign.outputs import write_json, write_npz
from sim_pbd.scene import make_simulator, urdf_path
from sim_pbd.springs import spring_torques

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

from pbd_step import DAMPING, DT, LEFT_ARM, POSE, reference_arm  # noqa: E402
from spring_estimation import SPRING  # noqa: E402
from torque_estimation import AMPLITUDE, FREQUENCY, record  # noqa: E402

DEFAULT_OUT = (HERE.parents[1] / "packages" / "sim_pbd" / "src" / "sim_pbd" / "examples"
               / "pbd_recordings")
POSES, POSE_SEED, TORQUE_NOISE, NOISE_SEED = 30, 0, 0.1, 1
DURATION, NOISE_Q, NOISE_QD, TRAJECTORY_SEED = 1.0, 1e-4, 1e-2, 0


def _write(folder: Path, name: str, arrays: dict, provenance: dict) -> None:
    import pinocchio as pin

    urdf = urdf_path("baxter")
    write_npz(folder / f"{name}.npz", arrays)
    write_json(folder / f"{name}.provenance.json", {
        "made_by": "examples/pbd/make_recordings.py", "reference": "Pinocchio",
        "pinocchio": pin.__version__, "numpy": np.__version__,
        "urdf": f"sim_pbd/examples/baxter/{urdf.name}",
        "urdf_sha256": hashlib.sha256(urdf.read_bytes()).hexdigest(),
        "joints": LEFT_ARM, **provenance})
    print(f"wrote {folder / name}.npz")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    reference, arm, data = reference_arm()
    import pinocchio as pin

    args.out.mkdir(parents=True, exist_ok=True)
    names = np.array(LEFT_ARM)
    poses = np.random.default_rng(POSE_SEED).uniform(arm.lowerPositionLimit,
                                                     arm.upperPositionLimit,
                                                     size=(POSES, arm.nq))
    gravity = np.array([pin.computeGeneralizedGravity(arm, data, q) for q in poses])
    _write(args.out, "gravity_poses",
           {"joint_names": names, "joint_q": poses, "torques": gravity},
           {"poses": f"{POSES} uniform within the URDF joint limits, seed {POSE_SEED}",
            "torques": "g(q): pinocchio.computeGeneralizedGravity on the left arm (the rest "
                       "of the robot locked at 0)", "units": {"joint_q": "rad",
                                                          "torques": "N m"}})

    sim = make_simulator(urdf="baxter", joints=LEFT_ARM, springs=[SPRING])
    spring = np.array([spring_torques(sim.springs, q, [SPRING["stiffness"]],
                                      [SPRING["offset"]]) for q in poses])
    noise = np.random.default_rng(NOISE_SEED).normal(scale=TORQUE_NOISE, size=poses.shape)
    _write(args.out, "spring_poses",
           {"joint_names": names, "joint_q": poses, "torques": gravity - spring + noise,
            "truth.spring.stiffness": np.array([SPRING["stiffness"]]),
            "truth.spring.offset": np.array([SPRING["offset"]])},
           {"poses": "those of gravity_poses.npz",
            "torques": f"g(q) less the torque of the spring (Eq. 31) plus Gaussian noise "
                       f"σ {TORQUE_NOISE} N m (seed {NOISE_SEED})", "spring": SPRING,
            "units": {"joint_q": "rad", "torques": "N m"}})

    true_q, true_qd, torques, joint_q, joint_qd = record(
        reference, arm, duration=DURATION, noise_q=NOISE_Q, noise_qd=NOISE_QD,
        seed=TRAJECTORY_SEED)
    recorded_gravity = np.array([pin.computeGeneralizedGravity(arm, data, q)
                                 for q in joint_q])
    _write(args.out, "driven_arm",
           {"joint_names": names, "time": DT * np.arange(len(joint_q)), "joint_q": joint_q,
            "joint_qd": joint_qd, "torques": torques, "true_joint_q": true_q,
            "true_joint_qd": true_qd, "gravity_torques": recorded_gravity},
           {"start": {"joint_q": POSE, "joint_qd": 0.0},
            "torques": f"g(q) + A sin(2π f t), A = {AMPLITUDE.tolist()} N m, f = "
                       f"{FREQUENCY.tolist()} Hz, held over each {DT} s step",
            "integration": "RK4 at 0.25 ms on Pinocchio's ABA with the damping torque "
                           f"-{DAMPING} q̇ (tests/reference.py drive)",
            "noise": f"σ {NOISE_Q} rad on joint_q, {NOISE_QD} rad/s on joint_qd (seed "
                     f"{TRAJECTORY_SEED}); true_joint_q/true_joint_qd without it",
            "units": {"time": "s", "joint_q": "rad", "joint_qd": "rad/s", "torques": "N m"}})


if __name__ == "__main__":
    main()
