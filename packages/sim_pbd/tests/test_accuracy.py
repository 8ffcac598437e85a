"""Baxter's left arm released under gravity against an independent reference: Pinocchio's
articulated-body algorithm on the same reduced model, integrated by fine RK4
(``reference.py``). Joint limits are off (every swing under gravity leaves them).

XPBD's error is first order in the substep. At the default settings the damped release is
off by 3.5e-3 rad after 0.25 s and 7.8e-2 rad after 2 s (the 2 s table against substeps and
iterations: ``benchmarks/pbd_accuracy.py``, the package README).
"""

import numpy as np
import pytest

from sim_pbd.kinematics import joint_positions
from sim_pbd.scene import make_simulator

LEFT_ARM = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]
POSE = [0.3, -0.5, 0.8, 1.0, -0.6, 0.9, 0.2]
"""The release pose [rad], left_s0 … left_w2: every joint away from zero, the arm out."""
DAMPING = 0.7  # [N m s/rad], the URDF's <dynamics damping> of every arm joint


def _release(duration: float, *, damping: float, **settings):
    """Our joint positions and rates every 0.01 s (rows), released at rest from POSE."""
    sim = make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False,
                         initial_positions=POSE, damping=damping, **settings)
    design = sim.design_space().defaults()
    params = sim.parameters(design)
    state = sim.initial_state(design)
    rows = [joint_positions(sim.model, params, state)]
    for _ in range(int(round(duration / 0.01))):
        state = sim.step(state, np.zeros(sim.action_size), design, 0.01)
        rows.append(joint_positions(sim.model, params, state))
    return np.array([q for q, _ in rows]), np.array([qd for _, qd in rows])


@pytest.fixture(scope="module")
def arm(reference):
    """Pinocchio's model of the same arm (the rest of Baxter locked at 0)."""
    return reference.reduced_baxter(LEFT_ARM)


def test_reference_is_converged(reference, arm):
    # the reference's own error, from halving its step, is far below the errors it judges
    fine, _ = reference.release(arm, POSE, damping=DAMPING, duration=2.0)
    coarse, _ = reference.release(arm, POSE, damping=DAMPING, duration=2.0, dt=5e-4)
    assert np.max(np.abs(fine - coarse)) < 1e-8
    assert np.ptp(fine[:, 1]) > 1.0  # the shoulder swings through more than a radian


def test_damped_release_over_two_seconds(reference, arm):
    expected, _ = reference.release(arm, POSE, damping=DAMPING, duration=2.0)
    error = reference.angle_error(_release(2.0, damping=DAMPING)[0], expected).max(axis=1)
    # 10 substeps of 2 iterations: 3.5e-3 rad over 0.25 s, 7.8e-2 rad over 2 s (the
    # implicit damping impulse of before: 2.1e-2 and 0.64)
    assert error[:26].max() < 4e-3
    assert error.max() < 8e-2


def test_damped_release_converges_to_the_reference_at_first_order(reference, arm):
    expected, _ = reference.release(arm, POSE, damping=DAMPING, duration=0.25)
    default = reference.angle_error(_release(0.25, damping=DAMPING)[0], expected).max()
    fine = reference.angle_error(_release(0.25, damping=DAMPING, substeps=20)[0],
                                 expected).max()
    assert 1.8 < default / fine < 2.2  # halving the substep halves the error (2.03)


def test_undamped_swing_for_a_quarter_second_and_its_energy(reference, arm):
    # Undamped, the swing is chaotic (a 1e-6 rad start error grows to ~0.5 rad in 2 s), so
    # only its first 0.25 s is compared; XPBD loses energy (first-order numerical damping)
    # where the reference keeps it.
    expected_q, expected_qd = reference.release(arm, POSE, damping=0.0, duration=0.25)
    ours_q, ours_qd = _release(0.25, damping=0.0)
    assert reference.angle_error(ours_q, expected_q).max() < 4e-3  # 3.3e-3 rad
    start = reference.energy(arm, expected_q[0], expected_qd[0])
    assert abs(reference.energy(arm, expected_q[-1], expected_qd[-1]) - start) < 1e-6
    kinetic = reference.energy(arm, expected_q[-1], expected_qd[-1]) \
        - reference.energy(arm, expected_q[-1], np.zeros(7))
    lost = start - reference.energy(arm, ours_q[-1], ours_qd[-1])
    assert 0.0 < lost < 0.01 * kinetic  # 0.15 J of the 31.5 J gained
