"""End-effector kinematics and the end_effector observer: the Jacobian against finite
differences of the forward kinematics, the velocity against J q̇, VJPs by gradcheck."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_pbd.end_effector import end_effector, end_effector_chain
from sim_pbd.kinematics import link_matrices
from sim_pbd.scene import make_simulator
from sim_pbd.simulator import PBDSimulator
from sim_pbd.state import PBDState
from sim_pbd.terms import EndEffectorObserver

POINT = np.array([0.03, -0.02, 0.05])
JOINT_Q = np.array([0.3, -0.2, 0.05])
JOINT_QD = np.array([0.5, 0.1, -0.4])


def _tip(model, state, link):
    _, matrix = link_matrices(state.link_q)
    return state.link_x[link] + matrix[link] @ POINT


def test_the_jacobian_is_the_tips_derivative_by_the_joints_and_maps_rates_to_its_velocity(
        models):
    model = models.chain_3d()  # tilted frames, a prismatic last joint
    link = model.link_count - 1
    state = models.state_at(model, JOINT_Q, JOINT_QD)
    position, velocity, jacobian = end_effector(model, model.parameters(), state, link=link,
                                                point=POINT)
    np.testing.assert_allclose(position, _tip(model, state, link))
    h = 1e-6
    for j in range(model.joint_count):
        step = h * np.eye(model.joint_count)[j]
        difference = (_tip(model, models.state_at(model, JOINT_Q + step), link)
                      - _tip(model, models.state_at(model, JOINT_Q - step), link)) / (2 * h)
        np.testing.assert_allclose(jacobian[:, j], difference, atol=1e-8)
    np.testing.assert_allclose(velocity, jacobian @ JOINT_QD, atol=1e-7)


def test_joints_off_the_chain_give_zero_columns(models):
    model = models.chain_3d()
    assert end_effector_chain(model, 1).tolist() == [0, 1]
    state = models.state_at(model, JOINT_Q)
    _, _, jacobian = end_effector(model, model.parameters(), state, link=1, point=POINT)
    assert np.all(jacobian[:, 2] == 0.0) and np.all(jacobian[:, :2] != 0.0)


def test_end_effector_observer_vjp(models):
    model = models.chain_3d()
    sim = PBDSimulator(model)
    state = models.state_at(model, JOINT_Q, JOINT_QD)
    observer = EndEffectorObserver(simulator=sim, point=POINT.tolist())
    assert observer.size == 6 + 3 * model.joint_count
    design = sim.design_space().defaults()
    weights = np.linspace(-1.0, 1.0, observer.size)

    def loss(inputs):
        s = PBDState(**inputs["state"])
        return float(weights @ observer.observe(s, {**design, **inputs["design"]}))

    g_state, g_design = observer.observe_vjp(state, design, weights)
    assert set(g_design) == {"joint.child_origin"}
    inputs = {"state": dict(vars(state)), "design": {"joint.child_origin":
                                                    design["joint.child_origin"]}}
    report = gradcheck(loss, inputs, {"state": dict(vars(g_state)), "design": g_design},
                       eps=1e-6, tolerance=1e-6)
    report.assert_ok()


def test_the_double_pendulums_tip_is_its_second_mass_and_follows_the_link_lengths():
    sim = make_simulator(urdf="double_pendulum")
    observer = EndEffectorObserver(simulator=sim)
    design = sim.design_space().defaults()
    design["joint.child_origin"] = np.array([[-2.7, 0.0, 0.0], [-0.3, 0.0, 0.0]])
    observation = observer.observe(sim.initial_state(design), design)
    np.testing.assert_allclose(observation[:3], [3.0, 0.0, 0.0], atol=1e-12)
    # both joints turn about z: the tip moves along y, 3.0 m and 0.3 m per radian
    np.testing.assert_allclose(observation[6:].reshape(3, 2), [[0, 0], [3.0, 0.3], [0, 0]],
                               atol=1e-12)


def test_bad_end_effector_options_are_refused(models):
    sim = PBDSimulator(models.chain_3d())
    with pytest.raises(ValueError, match="end_effector: unknown link 'hand'"):
        EndEffectorObserver(simulator=sim, link="hand")
    with pytest.raises(ValueError, match=r"point must be \[x, y, z\] in metres"):
        EndEffectorObserver(simulator=sim, point=[0.0, 1.0])
