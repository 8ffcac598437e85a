"""Swings against an independent reference: Pinocchio's articulated-body algorithm on the same
model (``reference.py``: rebuilt joint by joint), integrated by RK4 at 0.1 ms (its own error,
from doubling its step, is about 1e-12 rad).

BDF2 is second order: the 4-link arm released under gravity with its joint damping
(0.05 N m s/rad) is off by 9.1e-5 rad at most over 1 s at Δt = 1 ms, 3.6e-4 at 2 ms, 2.3e-3
at 5 ms and 9.1e-3 at 10 ms (the package README has the 2 s figures).
"""

from __future__ import annotations

import numpy as np
import pytest

from sim_rigid.simulator import RigidSimulator


def _release(sim, duration: float, dt: float, *, sample: float = 0.01) -> np.ndarray:
    """Our coordinates every ``sample`` [s] (rows) from the rest pose, no action."""
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    rows, every = [state.joint_q], int(round(sample / dt))
    for k in range(int(round(duration / dt))):
        state = sim.step(state, np.zeros(sim.action_size), design, dt)
        if (k + 1) % every == 0:
            rows.append(state.joint_q)
    return np.array(rows)


@pytest.fixture(scope="module")
def arm_reference(reference):
    from sim_rigid.description import load_description
    from sim_rigid.scene import robot_path

    model = load_description(robot_path("arm4"))
    expected = reference.release(reference.pinocchio_model(model), model.joint_rest,
                                 np.zeros(4), damping=model.joint_damping, duration=1.0,
                                 sample=0.01)
    return model, expected


def test_the_arm_swings_as_pinocchio_within_1e4_rad(arm_reference):
    model, expected = arm_reference
    error = np.abs(_release(RigidSimulator(model), 1.0, 1e-3) - expected).max()
    assert error < 1.0e-4  # 9.1e-5 measured


def test_the_error_is_second_order_in_the_step(arm_reference):
    model, expected = arm_reference
    sim = RigidSimulator(model)
    coarse = np.abs(_release(sim, 1.0, 5e-3) - expected).max()
    fine = np.abs(_release(sim, 1.0, 2.5e-3) - expected).max()
    assert 3.5 < coarse / fine < 4.5


def test_a_floating_tree_falls_and_turns_as_pinocchio(models, reference):
    # a free joint (6 coordinates) carrying a revolute-prismatic arm and a fixed plate with
    # a flap, tumbling under gravity from a spin
    model = models.mixed_tree()
    sim = RigidSimulator(model)
    design = sim.design_space().defaults()
    spin = np.linspace(-1.0, 1.0, model.coordinate_count)
    expected = reference.release(reference.pinocchio_model(model), model.joint_rest, spin,
                                 damping=model.joint_damping, duration=0.3, sample=0.01)
    errors = []
    for dt in (2e-3, 1e-3):
        state = sim.initial_state(design)
        state = type(state)(state.joint_q, spin, state.joint_q_prev, spin, state.step_count)
        rows = [state.joint_q]
        for k in range(int(round(0.3 / dt))):
            state = sim.step(state, np.zeros(sim.action_size), design, dt)
            if (k + 1) % int(round(0.01 / dt)) == 0:
                rows.append(state.joint_q)
        errors.append(np.abs(np.array(rows) - expected).max())
    assert errors[1] < 2.5e-5  # 1.8e-5 measured (7.2e-5 at 2 ms)
    assert 3.0 < errors[0] / errors[1] < 5.0
