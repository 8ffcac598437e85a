"""The safety checks behind check_time_step and check_state."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.simulator import SimulationError, UnstableTimeStepError
from sim_rigid.simulator import RigidSimulator


@pytest.mark.parametrize("dt", [0.0, -0.01, float("nan"), float("inf"), "fast"])
def test_time_steps_must_be_positive_numbers(models, dt):
    sim = RigidSimulator(models.arm4())
    with pytest.raises(UnstableTimeStepError, match="dt must be a positive finite number"):
        sim.check_time_step({}, dt)
    sim.check_time_step({}, 0.5)  # the integrators are A-stable: no upper bound


def test_nan_states_are_refused_with_the_step(models):
    sim = RigidSimulator(models.arm4())
    state = sim.initial_state({})
    bad = dataclasses.replace(state, joint_qd=np.array([0.0, np.nan, 0.0, 0.0]))
    with pytest.raises(SimulationError, match="step 12: state.joint_qd holds NaN"):
        sim.check_state(bad, 12)
    with pytest.raises(SimulationError, match="state.joint_qd holds NaN or inf"):
        sim.step(bad, np.zeros(4), {}, 0.01)


def test_a_free_joint_at_its_euler_singularity_is_refused(models):
    sim = RigidSimulator(models.mixed_tree())
    state = sim.initial_state({})
    sim.check_state(state, 0)
    q = state.joint_q.copy()
    q[4] = np.pi / 2 - 0.01
    with pytest.raises(SimulationError, match=r"step 3: free joint 'float' turned to 1.561 "
                                              r"rad .* singular"):
        sim.check_state(dataclasses.replace(state, joint_q=q), 3)


def test_states_of_the_wrong_shape_are_refused(models):
    sim = RigidSimulator(models.arm4())
    state = sim.initial_state({})
    with pytest.raises(ValueError, match=r"state.joint_q must have shape \(4,\)"):
        sim.step(dataclasses.replace(state, joint_q=np.zeros(3)), np.zeros(4), {}, 0.01)
    with pytest.raises(ValueError, match="step_count must be an integer"):
        sim.step(dataclasses.replace(state, step_count=np.asarray(0.0)), np.zeros(4), {}, 0.01)
