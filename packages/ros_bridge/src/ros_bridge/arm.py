"""A two-link planar arm in closed form: the fake robot's reference rigid-body model.

Deliberately not one of codesign's simulators: the fake robot must be an independent truth
for identification and control. Links swing in a vertical plane (gravity along −y, angles
from the +x axis), each a rigid body with mass ``mass``, centre of mass ``com`` along the
link and rotational inertia ``inertia`` about it; each joint has viscous ``damping`` and a
``spring`` towards q = 0. The equations are the textbook ones (Spong, Hutchinson and
Vidyasagar, *Robot Modeling and Control*, Sec. 7.4):

    M(q) q̈ + C(q, q̇) q̇ + g(q) + damping q̇ + spring q = τ
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["ArmParameters", "forward_dynamics", "inverse_dynamics", "rk4_step"]

GRAVITY = 9.81  # m/s²


@dataclasses.dataclass(frozen=True)
class ArmParameters:
    """Physical parameters, shape (2,) each (shoulder, elbow).

    Attributes:
        length: link lengths [m] (only the first one's matters to the dynamics).
        mass: link masses [kg].
        com: distance of each link's centre of mass from its joint [m].
        inertia: rotational inertia about the centre of mass [kg m²].
        damping: joint viscous damping [N m s/rad].
        spring: joint stiffness towards q = 0 [N m/rad].
    """

    length: np.ndarray = dataclasses.field(default_factory=lambda: np.array([0.4, 0.3]))
    mass: np.ndarray = dataclasses.field(default_factory=lambda: np.array([2.0, 1.0]))
    com: np.ndarray = dataclasses.field(default_factory=lambda: np.array([0.2, 0.15]))
    inertia: np.ndarray = dataclasses.field(default_factory=lambda: np.array([0.03, 0.008]))
    damping: np.ndarray = dataclasses.field(default_factory=lambda: np.array([0.1, 0.1]))
    spring: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(2))

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = np.asarray(getattr(self, field.name), dtype=np.float64)
            if value.shape != (2,) or not np.all(np.isfinite(value)):
                raise ValueError(f"arm {field.name} must be two finite numbers, got {value}")
            if field.name in ("length", "mass", "inertia") and np.any(value <= 0):
                raise ValueError(f"arm {field.name} must be positive, got {value}")
            object.__setattr__(self, field.name, value)


def _terms(p: ArmParameters, q: np.ndarray, qd: np.ndarray):
    """M (2, 2) and the bias C q̇ + g + damping q̇ + spring q (2,)."""
    (m1, m2), (c1, c2), (i1, i2), l1 = p.mass, p.com, p.inertia, p.length[0]
    cos2, sin2 = np.cos(q[1]), np.sin(q[1])
    m12 = i2 + m2 * (c2**2 + l1 * c2 * cos2)
    mass = np.array([[i1 + i2 + m1 * c1**2 + m2 * (l1**2 + c2**2 + 2 * l1 * c2 * cos2), m12],
                     [m12, i2 + m2 * c2**2]])
    h = m2 * l1 * c2 * sin2
    coriolis = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
    gravity = GRAVITY * np.array([(m1 * c1 + m2 * l1) * np.cos(q[0])
                                  + m2 * c2 * np.cos(q[0] + q[1]),
                                  m2 * c2 * np.cos(q[0] + q[1])])
    return mass, coriolis + gravity + p.damping * qd + p.spring * q


def forward_dynamics(p: ArmParameters, joint_q, joint_qd, torque) -> np.ndarray:
    """Joint accelerations q̈ [rad/s²], (2,), under joint ``torque`` [N m], (2,)."""
    mass, bias = _terms(p, np.asarray(joint_q, float), np.asarray(joint_qd, float))
    return np.linalg.solve(mass, np.asarray(torque, float) - bias)


def inverse_dynamics(p: ArmParameters, joint_q, joint_qd, joint_qdd) -> np.ndarray:
    """The joint torque [N m], (2,), that gives accelerations ``joint_qdd`` at (q, q̇)."""
    mass, bias = _terms(p, np.asarray(joint_q, float), np.asarray(joint_qd, float))
    return mass @ np.asarray(joint_qdd, float) + bias


def rk4_step(p: ArmParameters, joint_q, joint_qd, torque, dt: float):
    """(q, q̇) after ``dt`` [s] of constant ``torque`` (classical Runge-Kutta 4)."""
    q, qd = np.asarray(joint_q, float), np.asarray(joint_qd, float)

    def rate(q_, qd_):
        return qd_, forward_dynamics(p, q_, qd_, torque)

    k1 = rate(q, qd)
    k2 = rate(q + 0.5 * dt * k1[0], qd + 0.5 * dt * k1[1])
    k3 = rate(q + 0.5 * dt * k2[0], qd + 0.5 * dt * k2[1])
    k4 = rate(q + dt * k3[0], qd + dt * k3[1])
    return (q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
            qd + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))
