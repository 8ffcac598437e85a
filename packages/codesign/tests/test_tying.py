"""Tied design parameters (codesign.tying): exposed shapes, expansion, summed gradients, a
parametrized start, and the conformance suite on the closed-form linear system."""

import numpy as np
import pytest
from systems import LinearState, LinearSystem, SpringMass, WholeTrajectorySpringMass

from codesign import ActionL2, Objective, OpenLoopController, Parameter, Rollout, WeightedTerm
from codesign.testing import run_conformance
from codesign.tying import Tie, TiedSimulator


def three_inputs():
    """x' = A x + B diag(gain) u with three states and three inputs."""
    A = np.array([[-0.5, 1.0, 0.0], [-1.0, -0.2, 0.3], [0.0, 0.4, -0.7]])
    B = np.array([[1.0, 0.0, 0.2], [0.0, 1.0, 0.0], [0.3, 0.0, 1.0]])
    return LinearSystem(A, B, x0=[1.0, -0.5, 0.25])


class ScaledStart:
    """x0 = scale × the wrapped default, with one design parameter ``start.scale``."""

    parameters = (Parameter("start.scale", (), 1.0, lower=0.0),)

    def __init__(self, x0):
        self.x0 = np.asarray(x0, dtype=float)

    def state(self, design):
        return LinearState(x=float(design["start.scale"]) * self.x0)

    def state_vjp(self, design, g_state):
        return {"start.scale": np.asarray(float(g_state.x @ self.x0))}


def test_a_scalar_tie_replaces_the_field_in_place_and_broadcasts():
    sim = TiedSimulator(three_inputs(), ties=[Tie("gain")])
    space = sim.design_space()
    assert space.names == ["gain", "x0"] and space["gain"].shape == ()
    assert float(space["gain"].default_array()) == 1.0
    assert (float(space["gain"].lower_array()), float(space["gain"].upper_array())) == (0, 10)
    assert "one value for every entry" in space["gain"].doc
    np.testing.assert_array_equal(sim.expand({"gain": np.asarray(2.5)})["gain"], [2.5] * 3)
    assert float(sim.reduce_gradient({"gain": np.array([1.0, 2.0, 4.0])})["gain"]) == 7.0


def test_grouped_ties_take_one_value_per_label_and_sum_their_gradients():
    inner = three_inputs()
    sim = TiedSimulator(inner, ties=[Tie("gain", name="input.gain", groups=[2, 0, 2],
                                         entity="input_group")])
    space = sim.design_space()
    assert space.names == ["input.gain", "x0"] and space["input.gain"].shape == (2,)
    assert sim.groupings["input.gain"].labels == [0, 2]
    assert space["input.gain"].entity == "input_group"
    full = sim.expand({"input.gain": np.array([3.0, 5.0]), "x0": inner.x0})
    np.testing.assert_array_equal(full["gain"], [5.0, 3.0, 5.0])
    assert "input.gain" not in full
    reduced = sim.reduce_gradient({"gain": np.array([1.0, 2.0, 4.0]), "x0": None})
    np.testing.assert_array_equal(reduced["input.gain"], [2.0, 5.0])
    assert "gain" not in reduced


def test_absent_tied_values_take_their_defaults_and_wrong_shapes_raise():
    sim = TiedSimulator(three_inputs(), ties=[Tie("gain", groups=[0, 1, 1])])
    np.testing.assert_array_equal(sim.expand({})["gain"], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"gain must have shape \(2,\)"):
        sim.expand({"gain": np.ones(3)})
    with pytest.raises(ValueError, match="2 labels for 3 entries"):
        TiedSimulator(three_inputs(), ties=[Tie("gain", groups=[0, 1])])


@pytest.mark.parametrize("groups", [None, [2, 0, 2]])
def test_tied_simulators_pass_the_conformance_suite(groups):
    sim = TiedSimulator(three_inputs(), ties=[Tie("gain", groups=groups)])
    sim.check_time_step(sim.design_space().defaults(), 0.01)  # the inner has no checks
    reports = run_conformance(sim, dt=0.01, action=np.array([0.5, -1.0, 0.25]))
    assert all(report.passed for report in reports)


def test_a_start_state_adds_its_parameters_and_its_gradient():
    inner = three_inputs()
    sim = TiedSimulator(inner, ties=[Tie("gain")], start=ScaledStart(inner.x0))
    space = sim.design_space()
    assert space.names == ["gain", "x0", "start.scale"]
    design = dict(space.defaults(), **{"start.scale": np.asarray(2.0)})
    np.testing.assert_allclose(sim.initial_state(design).x, 2.0 * inner.x0)
    assert "start.scale" not in sim.expand(design)
    reports = run_conformance(sim, dt=0.01, action=np.array([0.5, -1.0, 0.25]))
    assert all(report.passed for report in reports)


def test_render_sequence_reaches_the_inner_simulator_with_the_expanded_design():
    inner, seen = three_inputs(), []

    class Drawn(LinearSystem):
        def render(self, state, design, *, width, height, action=None):
            seen.append(("render", design["gain"].tolist(), action))
            return np.zeros((height, width, 3), dtype=np.uint8)

    sim = TiedSimulator(Drawn(inner.A, inner.B), ties=[Tie("gain")])
    design = {"gain": np.asarray(2.0), "x0": np.zeros(3)}
    frames = sim.render_sequence(["s0", "s1"], design, width=4, height=4, actions=[1.0, None])
    assert len(frames) == 2
    assert seen == [("render", [2.0] * 3, 1.0), ("render", [2.0] * 3, None)]

    class Sequenced(Drawn):
        def render_sequence(self, states, design, *, width, height, actions):
            seen.append(("sequence", design["gain"].tolist(), list(states)))
            return []

    seen.clear()
    sim = TiedSimulator(Sequenced(inner.A, inner.B), ties=[Tie("gain")])
    sim.render_sequence(["s0"], design, width=4, height=4, actions=[None])
    assert seen == [("sequence", [2.0] * 3, ["s0"])]


def test_whole_trajectory_hooks_pass_through_exactly_when_the_inner_simulator_has_them():
    steps, substeps = 4, 3
    table = {"table": np.linspace(-1.0, 1.0, steps)[:, None]}
    objective = Objective((WeightedTerm(ActionL2(), 0.1), WeightedTerm(Position(), 1.0)))
    results = []
    for inner in (SpringMass(), WholeTrajectorySpringMass()):
        sim = TiedSimulator(inner, ties=[Tie("stiffness", name="spring.k")])
        assert hasattr(sim, "simulate") == hasattr(sim, "simulate_vjp") == hasattr(
            inner, "simulate")
        controller = OpenLoopController(observation_size=0, action_size=1,
                                        control_steps=steps)
        rollout = Rollout(sim, controller=controller, steps=steps, substeps=substeps, dt=0.05)
        design = dict(sim.design_space().defaults(), **{"spring.k": np.array(6.0)})
        results.append(rollout.value_and_grad(design, table, objective))
    assert inner.calls == {"simulate": 1, "simulate_vjp": 1}
    (value_a, (grad_a,)), (value_b, (grad_b,)) = results
    np.testing.assert_allclose(value_b.values, value_a.values, rtol=1e-14)
    assert set(grad_b.design) == {"mass", "spring.k", "damping"} == set(grad_a.design)
    for name in grad_a.design:
        np.testing.assert_allclose(grad_b.design[name], grad_a.design[name], rtol=1e-12)
    np.testing.assert_allclose(grad_b.weights["table"], grad_a.weights["table"], rtol=1e-12)


class Position:
    """The spring-mass's position at every control step: a trajectory term."""

    kind = "trajectory"

    def value(self, state, action, design, control_step):
        return float(state.q[0])

    def grad(self, state, action, design, control_step):
        return type(state)(q=np.ones(1), v=np.zeros(1)), None, None
