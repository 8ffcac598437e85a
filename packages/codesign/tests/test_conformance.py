import dataclasses

import numpy as np
import pytest

from codesign.testing import check_step_is_pure, check_vjp_structure, run_conformance


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
