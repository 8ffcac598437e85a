"""The Baxter fake robot's dynamics (Pinocchio with the true parameters), its spring and the
error when Pinocchio is missing."""

import dataclasses
import sys

import numpy as np
import pytest

from ros_bridge.baxter import (
    LEFT_ARM,
    NOMINAL_SPRING,
    TRUE_BAXTER,
    BaxterTruth,
    require_pinocchio,
)

POSE = np.array([0.3, -0.5, 0.8, 1.0, -0.6, 0.9, 0.2])
RATE = np.array([0.2, -0.4, 0.1, 0.3, -0.5, 0.6, 1.0])
TORQUE = np.array([1.0, -2.0, 0.5, 0.3, -0.2, 0.1, 0.05])
# the URDF's merged left-arm link masses (sim_pbd's README; equal to Pinocchio's to 2e-16)
URDF_MASS = np.array([5.70044, 3.22708, 4.31272, 2.07216, 2.24675, 1.60979, 0.54278])


def test_a_missing_pinocchio_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pinocchio", None)  # import pinocchio now fails
    with pytest.raises(ImportError, match=r"ros_bridge\[fake-baxter\]"):
        require_pinocchio()


def test_the_truth_is_checked():
    with pytest.raises(ValueError, match="mass_scale must be 7 finite numbers"):
        BaxterTruth(mass_scale=np.ones(6))
    with pytest.raises(ValueError, match="is not one of"):
        BaxterTruth(spring=dataclasses.replace(NOMINAL_SPRING, joint="right_s1"))


pin = pytest.importorskip("pinocchio", reason="the Baxter fake robot needs Pinocchio (pin)")

from ros_bridge.baxter import BaxterArm, baxter_urdf, reduced_model  # noqa: E402


@pytest.fixture(scope="module")
def arm():
    return BaxterArm()


def test_the_true_masses_are_the_urdfs_scaled(arm):
    np.testing.assert_allclose(arm.link_mass, URDF_MASS * TRUE_BAXTER.mass_scale, rtol=1e-5)
    nominal = reduced_model(baxter_urdf(), LEFT_ARM)
    for i in range(1, 8):  # centre of mass and inertia about it are kept
        np.testing.assert_array_equal(arm.model.inertias[i].lever, nominal.inertias[i].lever)
        np.testing.assert_array_equal(arm.model.inertias[i].inertia,
                                      nominal.inertias[i].inertia)


def test_forward_dynamics_is_pinocchios_with_spring_and_damping(arm):
    # M q̈ + nle = τ + τ_spring − b q̇, M and nle by Pinocchio's CRBA and RNEA (not ABA)
    data = arm.model.createData()
    mass = pin.crba(arm.model, data, POSE)
    mass = np.triu(mass) + np.triu(mass, 1).T
    bias = pin.nonLinearEffects(arm.model, data, POSE, RATE)
    spring = np.zeros(7)
    spring[1] = TRUE_BAXTER.spring.torque(POSE[1])
    expected = np.linalg.solve(mass, TORQUE + spring - TRUE_BAXTER.damping * RATE - bias)
    np.testing.assert_allclose(arm.forward_dynamics(POSE, RATE, TORQUE), expected,
                               rtol=1e-9, atol=1e-9)


def test_steps_follow_pinocchios_forward_dynamics(arm):
    # 2 ms (the fake robot's tick) in four RK4 steps against 2000 semi-implicit Euler steps
    # on Pinocchio's ABA, spring and damping added here
    data = arm.model.createData()
    q, qd = POSE.copy(), RATE.copy()
    for _ in range(2000):
        passive = -TRUE_BAXTER.damping * qd
        passive[1] += TRUE_BAXTER.spring.torque(q[1])
        qd = qd + 1e-6 * pin.aba(arm.model, data, q, qd, TORQUE + passive)
        q = q + 1e-6 * qd
    q_step, qd_step = POSE, RATE
    for _ in range(4):
        q_step, qd_step = arm.step(q_step, qd_step, TORQUE, 5e-4)
    np.testing.assert_allclose(q_step, q, atol=1e-6)  # Euler's own error: 4e-7
    np.testing.assert_allclose(qd_step, qd, atol=5e-4)  # Euler: 1e-4 on the wrist
    assert np.abs(q_step - POSE).max() > 1e-3  # it moved


def test_the_rest_pose_needs_no_torque(arm):
    rest = arm.rest_pose([0.0, 0.55, 0.0, 1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(arm.forward_dynamics(rest, np.zeros(7), np.zeros(7)), 0.0,
                               atol=1e-8)
    with pytest.raises(ValueError, match="no rest pose found"):
        arm.rest_pose([0.0, 0.55, 0.0, 1.0, 0.0, 0.0, 0.0], iterations=1)


def test_s0s_link_mass_is_invisible_to_the_joints_so_the_truth_keeps_the_urdfs():
    # s0 turns about the vertical with its link's centre of mass 18 mm from the axis: 10 %
    # more mass leaves every gravity torque as it is and changes the mass matrix by 4e-5 to
    # 5e-5 (s0's own inertia only); 10 % more on any other link changes M by 1.2e-3 (s1, the
    # least) to 3.5e-2 and g by 4e-3 to 3.5e-2 at every pose. A perturbed s0 mass in the truth
    # would test only the fit's hold.
    poses = np.array([POSE, [0.0, 0.55, 0.0, 1.0, 0.0, 0.0, 0.0],
                      [0.0, 0.1, 0.0, 0.9, 0.0, 0.4, 0.0], [-0.8, 0.3, -1.2, 0.5, 1.0, -0.7, 0.5]])

    def dynamics(mass_scale):  # M(q) and g(q) at each pose
        arm = BaxterArm(BaxterTruth(mass_scale=mass_scale))
        upper = [np.triu(pin.crba(arm.model, arm.data, q)) for q in poses]
        return [(m + np.triu(m, 1).T, arm.gravity(q)) for m, q in zip(upper, poses, strict=True)]

    def relative_change(link):  # of M and of g, (2, poses), with the link's mass × 1.1
        scaled = dynamics(np.where(np.arange(7) == link, 1.1, 1.0))
        return np.array([[np.linalg.norm(new[k] - old[k]) / np.linalg.norm(old[k])
                          for new, old in zip(scaled, nominal, strict=True)] for k in (0, 1)])

    nominal = dynamics(np.ones(7))
    s0_mass, s0_gravity = relative_change(0).max(axis=1)
    assert s0_mass < 1e-4 and s0_gravity < 1e-12
    for link in range(1, 7):
        mass, gravity = relative_change(link).min(axis=1)
        assert mass > 1e-3 and gravity > 1e-3, LEFT_ARM[link]
    assert TRUE_BAXTER.mass_scale[0] == 1.0
    assert np.all(np.abs(TRUE_BAXTER.mass_scale[1:] - 1.0) > 0.05)  # the others perturbed
