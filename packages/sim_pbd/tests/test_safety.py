"""Safety checks: time steps the substeps resolve, joints that come apart, NaN."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.simulator import SimulationError, UnstableTimeStepError
from sim_pbd import safety
from sim_pbd.simulator import PBDSimulator


def test_swing_frequency_of_a_pendulum_is_the_physical_one(models):
    model = models.pendulum(length=1.0, mass=2.0)
    params = model.parameters()
    inertia = params["link_inertia"][0]
    d = np.linalg.norm(params["joint_child_x"][0])
    expected = np.sqrt(2.0 * 9.81 * d / (inertia[1, 1] + 2.0 * d**2))
    assert safety.swing_frequency(model, params) == pytest.approx(expected)


def test_a_time_step_the_substeps_cannot_resolve_names_the_fix(models):
    model = models.pendulum(length=0.05)
    params = model.parameters()
    omega = safety.swing_frequency(model, params)
    safe = safety.MAX_PHASE_PER_SUBSTEP * 10 / omega
    safety.check_time_step(model, params, 0.99 * safe, substeps=10)
    with pytest.raises(UnstableTimeStepError, match=r"use dt <= .* or substeps >= 11"):
        safety.check_time_step(model, params, 1.05 * safe, substeps=10)
    with pytest.raises(UnstableTimeStepError, match="positive number"):
        safety.check_time_step(model, params, float("nan"), substeps=10)


def test_a_joint_that_comes_apart_is_named(models):
    sim = PBDSimulator(models.chain(3))
    state = sim.initial_state(sim.design_space().defaults())
    sim.check_state(state, 0)
    moved = state.link_x.copy()
    moved[2] += [0.0, 0.0, 0.05]
    with pytest.raises(SimulationError, match=r"step 4: joint 'joint2' came apart by 0.05"):
        sim.check_state(dataclasses.replace(state, link_x=moved), 4)
    with pytest.raises(SimulationError, match=r"step 5: state.link_w holds NaN"):
        sim.check_state(dataclasses.replace(state, link_w=np.full_like(state.link_w, np.nan)),
                        5)


def test_a_prismatic_joint_sliding_is_not_a_gap(models):
    model = models.prismatic_chain()
    sim = PBDSimulator(model)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(20):
        state = sim.step(state, np.zeros(sim.action_size), design, 0.01)
    assert np.max(safety.joint_gaps(model, state, model.parameters())) < 1e-5


def test_step_inputs_of_the_wrong_shape_are_refused(models):
    model = models.chain(2)
    state = PBDSimulator(model).initial_state({})
    with pytest.raises(ValueError, match=r"state.link_q must have shape \(2, 4\)"):
        safety.check_step_inputs(model, dataclasses.replace(state, link_q=np.zeros((2, 3))),
                                 np.zeros(2))
