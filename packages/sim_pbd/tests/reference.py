"""The reference rigid-body library of the sim_pbd tests and benchmarks: Pinocchio (``pin``).

Baxter's URDF as Pinocchio models (the whole robot, or reduced to the kept joints with every
other joint locked), and the released (or torque-driven) motion of a model integrated by
classical RK4 on Pinocchio's articulated-body algorithm with the joint damping torque
``-b q̇``: at the default 0.25 ms step its own error is below 1e-8 rad over 2 s of Baxter's
damped left arm (``test_accuracy.py`` checks it against half the step), far below what it
judges.

Import only where Pinocchio is installed (a dev dependency of the workspace, not of sim_pbd).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin

from codesign.testing import rk4_step
from ros_bridge.baxter import full_model, reduced_model

BAXTER = Path(__file__).parents[1] / "src" / "sim_pbd" / "examples" / "baxter" / "baxter.urdf"
LEFT_ARM = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]


def baxter_model() -> pin.Model:
    """Pinocchio's model of the whole Baxter (ros_bridge's, which its fake robot shares)."""
    return full_model(BAXTER)


def reduced_baxter(joints, frozen: dict[str, float] | None = None) -> pin.Model:
    """Baxter reduced to ``joints`` (names, URDF order); every other joint is locked at its
    position in ``frozen`` [rad] (default 0)."""
    return reduced_model(BAXTER, joints, frozen)


def release(model: pin.Model, joint_q, *, damping, duration: float, sample: float = 0.01,
            dt: float = 2.5e-4) -> tuple[np.ndarray, np.ndarray]:
    """Joint positions [rad] and rates [rad/s] every ``sample`` [s] of ``model`` released at
    rest from ``joint_q`` (nq,) under gravity and the damping torque ``-damping q̇``
    (``damping`` [N m s/rad], one value or (nv,)) for ``duration`` [s]: arrays of shape
    (K + 1, nq) and (K + 1, nv), K = duration / sample, row 0 the start. Classical RK4 with
    step ``dt`` [s] (which must divide ``sample``) on revolute/prismatic joints (q̇ = v)."""
    samples = int(round(duration / sample))
    if not np.isclose(samples * sample, duration):
        raise ValueError(f"sample {sample} must divide duration {duration}")
    return drive(model, joint_q, lambda k, q, v: np.zeros(model.nv), samples,
                 damping=damping, sample=sample, dt=dt)[:2]


def drive(model: pin.Model, joint_q, torque, samples: int, *, damping, sample: float = 0.01,
          dt: float = 2.5e-4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``model`` started at rest at ``joint_q`` and driven for ``samples`` intervals of
    ``sample`` [s] by joint torques held over each (zero-order hold, as a robot's controller
    applies them): ``torque(k, q, v)`` [N m] (nv,) at the start of interval k, from its
    positions and rates, plus gravity and ``-damping q̇`` as in :func:`release`. Returns
    positions (K + 1, nq), rates (K + 1, nv) and the torques (K, nv), K = ``samples``."""
    every = int(round(sample / dt))
    if not np.isclose(every * dt, sample):
        raise ValueError(f"dt {dt} must divide sample {sample}")
    data = model.createData()
    b = np.broadcast_to(np.asarray(damping, dtype=np.float64), (model.nv,))
    q = np.array(joint_q, dtype=np.float64)
    v = np.zeros(model.nv)
    qs, vs, taus = [q.copy()], [v.copy()], []
    for k in range(samples):
        tau = np.asarray(torque(k, q, v), dtype=np.float64)

        def acceleration(q, v, tau=tau):
            return pin.aba(model, data, q, v, tau - b * v)

        for _ in range(every):
            q, v = rk4_step(q, v, acceleration, dt)
        qs.append(q.copy())
        vs.append(v.copy())
        taus.append(tau)
    return np.array(qs), np.array(vs), np.array(taus)


def energy(model: pin.Model, joint_q, joint_qd) -> float:
    """Kinetic plus gravitational potential energy [J] at joint positions and rates."""
    data = model.createData()
    return float(pin.computeKineticEnergy(model, data, joint_q, joint_qd)
                 + pin.computePotentialEnergy(model, data, joint_q))


def angle_error(a, b) -> np.ndarray:
    """|a - b| [rad] with the difference wrapped to [-π, π] (our angles live on (-π, π],
    the reference's are unwrapped)."""
    difference = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return np.abs((difference + np.pi) % (2.0 * np.pi) - np.pi)
