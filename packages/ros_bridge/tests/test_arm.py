"""The fake robot's two-link arm: dynamics consistent with energy and with its inverse."""

import numpy as np
import pytest

from ros_bridge.arm import ArmParameters, forward_dynamics, inverse_dynamics, rk4_step


def energy(p, q, qd):
    (m1, m2), (c1, c2), (i1, i2), l1 = p.mass, p.com, p.inertia, p.length[0]
    v2 = np.array([-l1 * np.sin(q[0]) * qd[0] - c2 * np.sin(q[0] + q[1]) * (qd[0] + qd[1]),
                   l1 * np.cos(q[0]) * qd[0] + c2 * np.cos(q[0] + q[1]) * (qd[0] + qd[1])])
    kinetic = 0.5 * (m1 * c1**2 + i1) * qd[0] ** 2 + 0.5 * m2 * v2 @ v2 \
        + 0.5 * i2 * (qd[0] + qd[1]) ** 2
    height = np.array([c1 * np.sin(q[0]), l1 * np.sin(q[0]) + c2 * np.sin(q[0] + q[1])])
    return kinetic + 9.81 * (p.mass @ height) + 0.5 * p.spring @ q**2


def test_inverse_dynamics_inverts_forward_dynamics():
    p = ArmParameters(spring=np.array([3.0, 1.0]))
    q, qd, tau = np.array([0.3, -0.7]), np.array([1.2, -0.4]), np.array([2.0, -1.0])
    np.testing.assert_allclose(inverse_dynamics(p, q, qd, forward_dynamics(p, q, qd, tau)),
                               tau, atol=1e-12)


def test_undamped_unforced_motion_conserves_energy():
    p = ArmParameters(damping=np.zeros(2), spring=np.array([2.0, 0.5]))
    q, qd = np.array([0.5, 0.8]), np.array([0.0, 1.0])
    start = energy(p, q, qd)
    for _ in range(1000):
        q, qd = rk4_step(p, q, qd, np.zeros(2), 1e-3)
    assert abs(energy(p, q, qd) - start) < 1e-6 * abs(start)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="mass must be positive"):
        ArmParameters(mass=np.array([1.0, 0.0]))
