import dataclasses

import numpy as np
import pytest
from systems import SpringMass, WholeTrajectorySpringMass

from codesign.testing import (
    check_simulate_matches_steps,
    check_step_is_pure,
    check_vjp_structure,
    run_conformance,
)


def test_the_test_systems_conform(linear_system, spring_mass):
    for sim in (linear_system, spring_mass):
        reports = run_conformance(sim, dt=0.01)
        assert all(r.passed for r in reports)


def test_a_mutating_step_is_caught(spring_mass):
    class Mutating(type(spring_mass)):
        def step(self, state, action, design, dt):
            state.q[0] += 1.0
            return super().step(state, action, design, dt)

    with pytest.raises(AssertionError, match="not deterministic|modified"):
        check_step_is_pure(Mutating(), dt=0.01)


def test_a_wrong_vjp_is_caught(spring_mass):
    class Wrong(type(spring_mass)):
        def step_vjp(self, state, action, design, dt, g_next):
            g_state, g_action, g_design = super().step_vjp(state, action, design, dt, g_next)
            return g_state, g_action, dict(g_design, damping=g_design["damping"] * 1.01)

    with pytest.raises(AssertionError, match="design.damping"):
        run_conformance(Wrong(), dt=0.01)


def test_wrong_vjp_shapes_are_caught(spring_mass):
    class BadShape(type(spring_mass)):
        def step_vjp(self, state, action, design, dt, g_next):
            g_state, g_action, g_design = super().step_vjp(state, action, design, dt, g_next)
            return dataclasses.replace(g_state, q=np.zeros(3)), g_action, g_design

    with pytest.raises(AssertionError, match="shapes"):
        check_vjp_structure(BadShape(), dt=0.01)


def test_whole_trajectory_hooks_conform_and_wrong_ones_are_caught():
    sim = WholeTrajectorySpringMass()
    assert all(r.passed for r in run_conformance(sim, dt=0.01))
    assert sim.calls["simulate_vjp"] >= 1

    class WrongGradient(WholeTrajectorySpringMass):
        def simulate_vjp(self, trajectory, actions, design, dt, g_states):
            g_start, g_actions, g_design = super().simulate_vjp(trajectory, actions, design, dt,
                                                                g_states)
            return g_start, g_actions, dict(g_design, mass=g_design["mass"] * 1.01)

    class DriftingStates(WholeTrajectorySpringMass):
        def simulate(self, state, actions, design, dt):
            trajectory = super().simulate(state, actions, design, dt)
            last = trajectory.states[-1]
            return dataclasses.replace(trajectory, states=[
                *trajectory.states[:-1], dataclasses.replace(last, q=last.q + 1e-6)])

    class OnlyForward(SpringMass):
        def simulate(self, state, actions, design, dt):
            raise NotImplementedError

    for broken, message in ((WrongGradient(), r"∂L/∂θ\['mass'\]"),
                            (DriftingStates(), "simulate's state 4"),
                            (OnlyForward(), "together")):
        with pytest.raises(AssertionError, match=message):
            check_simulate_matches_steps(broken, dt=0.01)
