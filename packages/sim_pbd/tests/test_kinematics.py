"""Forward kinematics and joint positions from link states: values and VJPs."""

from __future__ import annotations

import numpy as np

from codesign.testing import gradcheck
from sim_pbd import PBDState
from sim_pbd.kinematics import (
    forward_kinematics,
    forward_kinematics_vjp,
    joint_positions,
    joint_positions_vjp,
)


def test_pendulum_pose_matches_closed_form(models):
    model = models.pendulum(length=1.0)
    theta = 0.7
    link_x, _ = forward_kinematics(model, model.parameters(), np.array([theta]))
    np.testing.assert_allclose(link_x[0], [-0.5 * np.sin(theta), 0.0, -0.5 * np.cos(theta)],
                               atol=1e-15)


def test_joint_positions_invert_forward_kinematics(any_model, models):
    model = any_model
    rng = np.random.default_rng(0)
    joint_q = rng.uniform(-3.0, 3.0, model.joint_count)
    joint_qd = rng.standard_normal(model.joint_count)
    q, qd = joint_positions(model, model.parameters(), models.state_at(model, joint_q, joint_qd))
    np.testing.assert_allclose(q, joint_q, atol=1e-12)
    np.testing.assert_allclose(qd, joint_qd, atol=1e-7)


def test_revolute_angle_is_continuous_through_a_half_turn(models):
    model = models.pendulum()
    angles = np.linspace(-3.1, 3.1, 63)
    read = [joint_positions(model, model.parameters(), models.state_at(model, [a]))[0][0]
            for a in angles]
    np.testing.assert_allclose(read, angles, atol=1e-12)


def test_forward_kinematics_vjp(any_model):
    model = any_model
    rng = np.random.default_rng(1)
    joint_q = rng.uniform(-2.0, 2.0, model.joint_count)
    params = {k: model.parameters()[k] for k in ("joint_parent_x", "joint_child_x")}
    w_x = rng.standard_normal((model.link_count, 3))
    w_q = rng.standard_normal((model.link_count, 4))

    def loss(inputs):
        x, q = forward_kinematics(model, inputs["params"], inputs["joint_q"])
        return float(np.sum(w_x * x) + np.sum(w_q * q))

    g_joint_q, g_params = forward_kinematics_vjp(model, params, joint_q, w_x, w_q)
    gradcheck(loss, {"joint_q": joint_q, "params": params},
              {"joint_q": g_joint_q, "params": g_params}, tolerance=1e-7).assert_ok()


def test_joint_positions_vjp(any_model, models):
    model = any_model
    rng = np.random.default_rng(2)
    base = models.state_at(model, rng.uniform(-2.0, 2.0, model.joint_count),
                    rng.standard_normal(model.joint_count))
    # off the constraint manifold and off the unit sphere: the VJP holds for any state
    state = PBDState(*(getattr(base, f) + 0.05 * rng.standard_normal(getattr(base, f).shape)
                       for f in ("link_x", "link_q", "link_v", "link_w")))
    params = {k: model.parameters()[k] for k in ("joint_parent_x", "joint_child_x")}
    w_q, w_qd = rng.standard_normal((2, model.joint_count))

    def loss(inputs):
        q, qd = joint_positions(model, inputs["params"], inputs["state"])
        return float(w_q @ q + w_qd @ qd)

    g_state, g_params = joint_positions_vjp(model, params, state, w_q, w_qd)
    gradcheck(loss, {"state": state, "params": params},
              {"state": g_state, "params": g_params}, tolerance=1e-7).assert_ok()
