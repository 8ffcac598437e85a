"""step_vjp against central finite differences (codesign.testing.gradcheck, float64) over
rollouts of 1, 2 and 8 steps (SDIRK2's start, then BDF2), with torque and position
actuation: gradients with respect to the initial state, the action and every parameter."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from codesign.tree import tree_vdot
from sim_rigid import RigidState
from sim_rigid.description import load_description
from sim_rigid.step import step, step_vjp

# Finite-difference steps per input (fourth-order stencil): the arm's inertias are down to
# 8e-5 kg m², so their step is far below that; the others' 1e-4 keeps the Newton solves'
# round-off (near 1e-14 of the loss) far below 1e-6 of small derivatives.
EPS = {"link_inertia": 1e-7}
FIELDS = ("joint_q", "joint_qd", "joint_q_prev", "joint_qd_prev")


def _moving_state(model, seed):
    rng = np.random.default_rng(seed)
    d = model.coordinate_count
    q = model.joint_rest + 0.2 * rng.standard_normal(d)
    qd = rng.standard_normal(d)
    return RigidState(q, qd, q - 0.01 * qd, qd + 0.1 * rng.standard_normal(d),
                      np.asarray(0, dtype=np.int64))


def _check(model, *, steps, dt=0.01, seed=0, start_count=0, overrides=None, **settings):
    """gradcheck of every input group; ``overrides`` replace the model's parameters by name.
    Returns the gradients by input group."""
    params = {k: np.array(v, dtype=np.float64)
              for k, v in (model.parameters() | (overrides or {})).items()}
    state = _moving_state(model, seed)
    state = RigidState(*(getattr(state, f) for f in FIELDS),
                       np.asarray(start_count, dtype=np.int64))
    rng = np.random.default_rng(seed + 1)
    action = rng.standard_normal(len(model.actuated))
    if settings.get("actuation") == "position":
        action = model.joint_rest[model.actuated] + 0.3 * action
    trajectory = [state]
    for _ in range(steps):
        trajectory.append(step(model, trajectory[-1], action, params, dt, **settings))
    final = trajectory.pop()
    weights = RigidState(*(rng.standard_normal(np.shape(getattr(final, f))) for f in FIELDS),
                         np.asarray(0, dtype=np.int64))

    def loss(inputs):
        current = RigidState(*(inputs["state"][f] for f in FIELDS), state.step_count)
        merged = params | {k: v for k, v in inputs.items() if k in params}
        for _ in range(steps):
            current = step(model, current, inputs["action"], merged, dt, **settings)
        return tree_vdot(current, weights)

    g_state, g_action = weights, np.zeros_like(action)
    g_params = {k: 0.0 for k in params}
    for before in reversed(trajectory):
        g_state, g_a, g_p = step_vjp(model, before, action, params, dt, g_state, **settings)
        g_action = g_action + g_a
        g_params = {k: g_params[k] + g_p[k] for k in params}
    inputs = {"state": {f: getattr(state, f) for f in FIELDS}, "action": action} | params
    grads = {"state": {f: getattr(g_state, f) for f in FIELDS}, "action": g_action} | g_params
    for group in inputs:
        gradcheck(loss, inputs, grads, eps=EPS.get(group, 1e-4), relative_step=False,
                  groups=[group], directions=2, seed=seed).assert_ok()
    return grads


@pytest.mark.parametrize("steps", [1, 2])
def test_first_steps(any_model, steps):
    _check(any_model, steps=steps)


@pytest.mark.parametrize("actuation", ["torque", "position"])
def test_eight_steps(any_model, actuation):
    _check(any_model, steps=8, actuation=actuation, seed=2)


def test_bdf2_steps_from_a_history(models):
    # a state that already has a previous step: BDF2 from the first step on, so the
    # previous coordinates and rates get their gradients
    _check(models.arm4(), steps=3, start_count=5, seed=3)


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("actuation", ["torque", "position"])
def test_joint_axes_and_centres_of_mass_off_the_model(any_model, models, steps, actuation):
    # tilted directions of other lengths: the normalization's VJP is part of the gradient;
    # the mixed tree's free joint and fixed plate have no axis: zero gradient in their rows
    grads = _check(any_model, steps=steps, actuation=actuation, seed=5,
                   overrides=models.tilted(any_model, 6))
    moving = any_model.joint_type <= 1
    assert np.abs(grads["joint_axis"][moving]).min() > 1e-6
    assert np.abs(grads["joint_axis"][~moving]).max(initial=0.0) == 0.0
    assert np.abs(grads["link_com"]).max() > 1e-3


def test_gears_and_an_unactuated_joint(models):
    # the flap's hinge takes no action (only gravity and the torso move it) and the slider's
    # action is scaled by its gear: the action gradient covers the two actuated joints only
    description = models.mixed_tree_description()
    description["joints"][4]["actuated"] = False
    description["joints"][2]["gear"] = 3.0
    description["joints"][1]["gear"] = 0.5
    _check(load_description(description), steps=3, seed=4)
