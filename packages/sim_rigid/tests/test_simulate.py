"""Many steps in one call (the core's optional ``simulate`` hooks): the compiled trajectory
and its sweep back equal the NumPy reference and the step-by-step results, a failed solve
names its step, and the examples' open-loop rollouts take this path with unchanged
gradients."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sim_rigid
from codesign import Rollout
from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_registry
from codesign.simulator import SimulationError
from codesign.testing import check_simulate_matches_steps
from codesign.validation import validate_config
from sim_rigid import RigidState
from sim_rigid.simulator import RigidSimulator
from sim_rigid.step import NewtonError, simulate, simulate_vjp


def _moving(model, count=0):
    rates = np.linspace(-1.0, 1.0, model.coordinate_count)
    return RigidState(model.joint_rest, rates, model.joint_rest, 0.5 * rates,
                      np.asarray(count, dtype=np.int64))


def test_compiled_trajectory_and_its_sweep_equal_the_numpy_reference(any_model, models):
    model = any_model
    params = model.parameters() | models.tilted(model)
    actions = np.random.default_rng(4).uniform(-0.5, 0.5, (5, len(model.actuated)))
    state = _moving(model)
    compiled = simulate(model, state, actions, params, 0.01)
    reference = simulate(model, state, actions, params, 0.01, kernels="numpy")
    assert reference.record is None and compiled.record is not None
    for got, want in zip(compiled.states, reference.states, strict=True):
        np.testing.assert_allclose(got.joint_q, want.joint_q, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(got.joint_qd_prev, want.joint_qd_prev, rtol=1e-12,
                                   atol=1e-13)
        assert int(got.step_count) == int(want.step_count)
    rng = np.random.default_rng(5)
    d = model.coordinate_count
    g_states = [None if i % 2 else RigidState(rng.normal(size=d), rng.normal(size=d), None,
                                               rng.normal(size=d), None)
                for i in range(len(actions) + 1)]
    got = simulate_vjp(model, compiled, actions, params, 0.01, g_states)
    want = simulate_vjp(model, reference, actions, params, 0.01, g_states, kernels="numpy")
    for name in ("joint_q", "joint_qd", "joint_q_prev", "joint_qd_prev"):
        np.testing.assert_allclose(getattr(got[0], name), getattr(want[0], name), rtol=1e-9,
                                   atol=1e-11)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9, atol=1e-11)
    assert set(want[2]) <= set(got[2])
    for name, value in want[2].items():
        np.testing.assert_allclose(got[2][name], value, rtol=1e-9,
                                   atol=1e-9 * max(np.abs(value).max(initial=0.0), 1.0))


def test_the_simulator_hooks_match_its_steps_with_contact(models):
    sim = RigidSimulator(models.mixed_tree())
    check_simulate_matches_steps(sim, dt=0.01, steps=6, state=_moving(sim.model, count=2))


def test_a_failed_solve_inside_a_trajectory_names_its_step(models):
    sim = RigidSimulator(models.arm4())
    design = sim.design_space().defaults()
    actions = np.zeros((6, 4))
    actions[3:] = 1000.0  # the fourth step's torques turn the arm too far for 50 ms steps
    start = _moving(sim.model, count=5)
    with pytest.raises(NewtonError, match=r"^step 8: Newton's method did not converge"):
        sim.simulate(start, actions, design, 0.05)
    state = start  # the same step fails step by step
    with pytest.raises(NewtonError, match=r"^step 8: "):
        for action in actions:
            state = sim.step(state, action, design, 0.05)


def test_bad_actions_for_a_trajectory_are_refused_naming_the_step(models):
    sim = RigidSimulator(models.arm4())
    design, state = sim.design_space().defaults(), _moving(sim.model, count=2)
    actions = np.zeros((4, 4))
    actions[2, 1] = np.nan
    with pytest.raises(SimulationError, match="action of step 4 is NaN or inf at joint"):
        sim.simulate(state, actions, design, 0.01)
    with pytest.raises(ValueError, match=r"shape \(N, 4\), got \(4,\)"):
        sim.simulate(state, np.zeros(4), design, 0.01)


@pytest.mark.parametrize("example", ["finger_reach_cage", "flip_box"])
def test_open_loop_examples_take_the_whole_trajectory_with_the_step_by_step_gradient(example):
    registry = get_registry()
    experiment = build_experiment(validate_config(load_config(
        Path(sim_rigid.__file__).parent / "examples" / f"{example}.yaml"), registry), registry)
    sim, rollout, objective = experiment.simulator, experiment.rollout, experiment.objective
    assert rollout.whole_trajectory

    class StepByStep:  # the simulator without its simulate hooks
        def __init__(self, inner):
            self.inner, self.action_size = inner, inner.action_size

        def __getattr__(self, name):
            if name in ("simulate", "simulate_vjp"):
                raise AttributeError(name)
            return getattr(self.inner, name)

    stepped = Rollout(StepByStep(sim), controller=rollout.controller, steps=rollout.steps,
                      substeps=rollout.substeps, dt=rollout.dt)
    assert not stepped.whole_trajectory
    design = sim.design_space().defaults()
    weights = {"table": np.random.default_rng(1).uniform(-0.1, 0.1, (rollout.steps,
                                                                      sim.action_size))}
    (whole, (g_whole,)), (steps, (g_steps,)) = (
        r.value_and_grad(design, weights, objective) for r in (rollout, stepped))
    np.testing.assert_allclose(whole.values, steps.values, rtol=1e-12)
    np.testing.assert_allclose(g_whole.weights["table"], g_steps.weights["table"], rtol=1e-8,
                               atol=1e-10)
    for name, value in g_steps.design.items():
        np.testing.assert_allclose(g_whole.design[name], value, rtol=1e-8,
                                   atol=1e-8 * max(np.abs(value).max(initial=0.0), 1.0))
