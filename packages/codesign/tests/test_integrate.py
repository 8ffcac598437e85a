"""The RK4 step for reference trajectories."""

import numpy as np

from codesign.testing import rk4_step


def test_rk4_follows_a_harmonic_oscillator_to_fourth_order():
    def spring(q, v):
        return -q

    errors = []
    for steps in (20, 40):
        q, v = np.array([1.0]), np.array([0.0])
        for _ in range(steps):
            q, v = rk4_step(q, v, spring, 1.0 / steps)
        errors.append(abs(q[0] - np.cos(1.0)) + abs(v[0] + np.sin(1.0)))
    assert errors[1] < 1e-7
    assert 14.0 < errors[0] / errors[1] < 18.0  # halving dt divides the error by 2⁴
