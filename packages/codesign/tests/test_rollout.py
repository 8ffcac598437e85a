import dataclasses
import math

import numpy as np
import pytest
from systems import SpringMass, WholeTrajectorySpringMass

from codesign import (
    ActionL2,
    Constraint,
    MLPController,
    Objective,
    OpenLoopController,
    Rollout,
    SimulationError,
    StateFieldObserver,
    TrajectoryTracking,
    UnstableTimeStepError,
    WeightedTerm,
)
from codesign.testing import check_rollout_gradients


class LinearFinal:
    """Final term <c, x_T>."""

    kind = "final"

    def __init__(self, c):
        self.c = np.asarray(c, float)

    def value(self, state, action, design, control_step):
        return float(self.c @ state.x)

    def grad(self, state, action, design, control_step):
        return type(state)(x=self.c.copy()), None, None


class FinalPosition:
    """Final term q_T of the spring-mass."""

    kind = "final"

    def value(self, state, action, design, control_step):
        return float(state.q[0])

    def grad(self, state, action, design, control_step):
        return type(state)(q=np.ones(1), v=np.zeros(1)), None, None


def open_loop_rollout(sim, steps, substeps, dt, **kwargs):
    ctrl = OpenLoopController(observation_size=0, action_size=sim.action_size,
                              control_steps=steps)
    return Rollout(sim, controller=ctrl, steps=steps, substeps=substeps, dt=dt, **kwargs)


def test_linear_system_matches_the_closed_form_value_and_gradients(linear_system):
    steps, substeps, dt = 7, 3, 0.05
    n = steps * substeps
    rollout = open_loop_rollout(linear_system, steps, substeps, dt)
    design = linear_system.design_space().defaults()
    rng = np.random.default_rng(0)
    table = rng.standard_normal((steps, 1))
    c = np.array([0.7, -1.3])
    objective = Objective.of(LinearFinal(c))
    result, (grad,) = rollout.value_and_grad(design, {"table": table}, objective)

    M = np.eye(2) + dt * linear_system.A
    inputs = np.repeat(table, substeps, axis=0)  # the action held over each control step
    x = np.linalg.matrix_power(M, n) @ design["x0"]
    for i in range(n):
        x = x + np.linalg.matrix_power(M, n - 1 - i) @ (dt * linear_system.B @ inputs[i])
    assert result.values[0] == pytest.approx(c @ x, abs=1e-12)
    np.testing.assert_allclose(grad.design["x0"], np.linalg.matrix_power(M, n).T @ c,
                               atol=1e-12)
    expected_rows = [sum(c @ np.linalg.matrix_power(M, n - 1 - i) @ (dt * linear_system.B)
                         for i in range(k * substeps, (k + 1) * substeps)) for k in range(steps)]
    np.testing.assert_allclose(grad.weights["table"], np.array(expected_rows), atol=1e-12)


def _closed_loop(spring_mass, checkpoint_every=None, steps=12, substeps=3):
    observer = StateFieldObserver(simulator=spring_mass, fields=["q", "v"])
    ctrl = MLPController(observation_size=2, action_size=1, hidden=[6], seed=3)
    rollout = Rollout(spring_mass, controller=ctrl, observer=observer, steps=steps,
                      substeps=substeps, dt=0.02, checkpoint_every=checkpoint_every)
    targets = np.linspace(1.0, 0.0, steps + 1)[:, None] * np.array([[1.0, 0.0]])
    objective = Objective((
        WeightedTerm(FinalPosition(), 2.0, "final"),
        WeightedTerm(ActionL2(), 1e-2, "effort"),
        WeightedTerm(TrajectoryTracking(observer=observer, targets=targets), 0.5, "track"),
    ))
    return rollout, ctrl.parameter_space().defaults(), objective


def test_closed_loop_rollout_gradients_pass_gradcheck(spring_mass):
    rollout, weights, objective = _closed_loop(spring_mass)
    design = spring_mass.design_space().defaults()
    report = check_rollout_gradients(rollout, design, weights, objective)
    assert report.passed, str(report)


def test_checkpointed_and_fully_stored_sweeps_give_identical_gradients(spring_mass):
    design = spring_mass.design_space().defaults()
    results = []
    for k in (1, None, 5):
        rollout, weights, objective = _closed_loop(spring_mass, checkpoint_every=k)
        results.append(rollout.value_and_grad(design, weights, objective))
    (_, (full,)), *others = results
    for _, (grad,) in others:
        for name in full.design:
            assert np.array_equal(full.design[name], grad.design[name])
        for name in full.weights:
            assert np.array_equal(full.weights[name], grad.weights[name])
        assert np.array_equal(full.initial_state.q, grad.initial_state.q)


def test_states_held_for_ten_thousand_steps_stay_near_two_sqrt_n(linear_system):
    steps, substeps = 1000, 10
    n = steps * substeps
    rollout = open_loop_rollout(linear_system, steps, substeps, 1e-4)
    design = linear_system.design_space().defaults()
    objective = Objective.of(LinearFinal([1.0, 0.0]))
    result, _ = rollout.value_and_grad(design, {"table": np.zeros((steps, 1))}, objective)
    assert result.peak_states_held <= 2 * math.isqrt(n) + 2
    stored = open_loop_rollout(linear_system, 100, 10, 1e-4, checkpoint_every=1)
    result, _ = stored.value_and_grad(design, {"table": np.zeros((100, 1))}, objective)
    assert result.peak_states_held == 1000 + 1


def test_constraint_gradients_come_from_the_same_sweep(spring_mass):
    rollout, weights, objective = _closed_loop(spring_mass)
    design = spring_mass.design_space().defaults()
    constraint = Constraint(Objective.of(FinalPosition()), lower=0.0, upper=0.0, name="q_T")
    result, grads = rollout.value_and_grad(design, weights, objective, [constraint])
    assert len(grads) == 2 and result.values.shape == (2,)
    alone, (grad_alone,) = rollout.value_and_grad(design, weights, constraint.objective)
    assert result.values[1] == alone.values[0]
    for name in grad_alone.weights:
        np.testing.assert_array_equal(grads[1].weights[name], grad_alone.weights[name])


def test_undamped_spring_returns_after_one_period(spring_mass):
    design = dict(spring_mass.design_space().defaults(), damping=np.array(0.0))
    period = 2 * np.pi * np.sqrt(design["mass"] / design["stiffness"])
    dt = period / 2000
    rollout = open_loop_rollout(spring_mass, 200, 10, dt)
    result = rollout.forward(design, {"table": np.zeros((200, 1))}, Objective.of(FinalPosition()))
    assert result.values[0] == pytest.approx(1.0, abs=1e-4)


def test_record_returns_every_control_state(spring_mass):
    rollout = open_loop_rollout(spring_mass, 5, 2, 0.01)
    design = spring_mass.design_space().defaults()
    result = rollout.forward(design, {"table": np.zeros((5, 1))}, Objective.of(FinalPosition()),
                             record=True)
    assert len(result.states) == 6 and result.states[0].q[0] == 1.0


def test_mismatched_sizes_and_bad_time_settings_are_refused(spring_mass):
    ctrl = OpenLoopController(observation_size=0, action_size=2, control_steps=3)
    with pytest.raises(ValueError, match="takes 1"):
        Rollout(spring_mass, controller=ctrl, steps=3, dt=0.01)
    ctrl = MLPController(observation_size=4, action_size=1)
    with pytest.raises(ValueError, match="observer provides 0"):
        Rollout(spring_mass, controller=ctrl, steps=3, dt=0.01)
    ctrl = OpenLoopController(observation_size=0, action_size=1, control_steps=3)
    with pytest.raises(ValueError, match="dt must be"):
        Rollout(spring_mass, controller=ctrl, steps=3, dt=float("nan"))
    with pytest.raises(ValueError, match="steps"):
        Rollout(spring_mass, controller=ctrl, steps=0, dt=0.1)


def test_divergence_and_unstable_time_steps_are_reported(spring_mass):
    design = dict(spring_mass.design_space().defaults(), stiffness=np.array(1e6))
    rollout = open_loop_rollout(spring_mass, 50, 10, 0.1)
    with np.errstate(all="ignore"), pytest.raises(SimulationError, match="non-finite"):
        rollout.value_and_grad(design, {"table": np.zeros((50, 1))},
                               Objective.of(FinalPosition()))

    class Checked(type(spring_mass)):
        def check_time_step(self, design, dt):
            limit = 2 * np.sqrt(design["mass"] / design["stiffness"])
            if dt > limit:
                raise UnstableTimeStepError(f"dt {dt} exceeds the largest safe dt {limit:.3g}")

    checked = open_loop_rollout(Checked(), 5, 1, 0.1)
    with pytest.raises(UnstableTimeStepError, match="largest safe dt"):
        checked.forward(design, {"table": np.zeros((5, 1))}, Objective.of(FinalPosition()))


def _open_loop_terms(steps):
    """Running, final and trajectory terms and a constraint on the spring-mass."""
    observer = StateFieldObserver(simulator=SpringMass(), fields=["q", "v"])
    targets = np.linspace(1.0, 0.0, steps + 1)[:, None] * np.array([[1.0, 0.0]])
    objective = Objective((
        WeightedTerm(FinalPosition(), 2.0, "final"),
        WeightedTerm(ActionL2(), 1e-2, "effort"),
        WeightedTerm(TrajectoryTracking(observer=observer, targets=targets), 0.5, "track"),
    ))
    return objective, [Constraint(Objective.of(FinalPosition()), lower=0.0, upper=0.0)]


def test_whole_trajectory_hooks_give_the_step_by_step_values_and_gradients():
    steps, substeps, dt = 6, 4, 0.03
    objective, constraints = _open_loop_terms(steps)
    table = {"table": np.random.default_rng(2).standard_normal((steps, 1))}
    step_by_step, whole = SpringMass(), WholeTrajectorySpringMass()
    design = whole.design_space().defaults()
    outcomes = []
    for sim in (step_by_step, whole):
        rollout = open_loop_rollout(sim, steps, substeps, dt)
        outcomes.append((rollout.whole_trajectory,
                         rollout.forward(design, table, objective, constraints, record=True),
                         *rollout.value_and_grad(design, table, objective, constraints)))
    (flag_a, forward_a, result_a, grads_a), (flag_b, forward_b, result_b, grads_b) = outcomes
    assert (flag_a, flag_b) == (False, True)
    assert whole.calls == {"simulate": 2, "simulate_vjp": 2}  # one sweep per function
    np.testing.assert_allclose(forward_b.values, forward_a.values, rtol=1e-14)
    np.testing.assert_allclose(result_b.values, result_a.values, rtol=1e-14)
    assert [s.q[0] for s in forward_b.states] == pytest.approx([s.q[0] for s in forward_a.states],
                                                              rel=1e-14)
    assert result_b.peak_states_held == steps * substeps + 1
    for a, b in zip(grads_a, grads_b, strict=True):
        for name in a.design:
            np.testing.assert_allclose(b.design[name], a.design[name], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(b.weights["table"], a.weights["table"], rtol=1e-12,
                                   atol=1e-15)
        np.testing.assert_allclose(b.initial_state.q, a.initial_state.q, rtol=1e-12)


def test_whole_trajectory_rollout_gradients_pass_gradcheck():
    steps = 5
    objective, _ = _open_loop_terms(steps)
    sim = WholeTrajectorySpringMass()
    rollout = open_loop_rollout(sim, steps, 3, 0.02)
    report = check_rollout_gradients(rollout, sim.design_space().defaults(),
                                     {"table": np.full((steps, 1), 0.3)}, objective)
    assert report.passed, str(report)
    assert sim.calls["simulate_vjp"] == 1


def test_closed_loop_rollouts_step_even_when_the_simulator_offers_whole_trajectories():
    sim = WholeTrajectorySpringMass()
    rollout, weights, objective = _closed_loop(sim)
    rollout.value_and_grad(sim.design_space().defaults(), weights, objective)
    assert not rollout.whole_trajectory and sim.calls == {"simulate": 0, "simulate_vjp": 0}


def test_a_trajectory_of_the_wrong_length_is_refused():
    class Short(WholeTrajectorySpringMass):
        def simulate(self, state, actions, design, dt):
            trajectory = super().simulate(state, actions, design, dt)
            return dataclasses.replace(trajectory, states=trajectory.states[:-1])

    sim = Short()
    rollout = open_loop_rollout(sim, 3, 2, 0.01)
    with pytest.raises(ValueError, match="returned 6 states for 6 steps"):
        rollout.forward(sim.design_space().defaults(), {"table": np.zeros((3, 1))},
                        Objective.of(FinalPosition()))
