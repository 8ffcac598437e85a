import numpy as np
import pytest

from codesign import (
    ActionL2,
    Constraint,
    Objective,
    ParameterRegularizer,
    StateFieldObserver,
    TrajectoryTracking,
)
from codesign.observers import NullObserver
from codesign.testing import gradcheck


def check_term(term, state, action, design, control_step=0):
    def loss(inputs):
        return term.value(inputs["state"], inputs["action"], inputs["design"], control_step)

    gs, ga, gd = term.grad(state, action, design, control_step)
    inputs = {"state": state, "action": action, "design": design}
    report = gradcheck(loss, inputs, {"state": gs, "action": ga, "design": gd or {}})
    assert report.passed, str(report)


def test_action_l2(spring_mass):
    design = spring_mass.design_space().defaults()
    state = spring_mass.initial_state(design)
    check_term(ActionL2(), state, np.array([0.3]), design)
    assert ActionL2().value(state, np.array([3.0, 4.0]), design, 0) == 25.0


def test_parameter_regularizer(spring_mass):
    reg = ParameterRegularizer(simulator=spring_mass, names=["stiffness"], reference={
        "stiffness": 2.0})
    design = spring_mass.design_space().defaults()
    assert reg.value(None, None, design, 0) == pytest.approx(4.0)
    check_term(reg, spring_mass.initial_state(design), None, design)


def test_state_field_observer_and_tracking(spring_mass):
    observer = StateFieldObserver(simulator=spring_mass, fields=["q", "v"])
    assert observer.size == 2
    design = spring_mass.design_space().defaults()
    state = spring_mass.initial_state(design)
    targets = np.array([[0.5, 0.1], [np.nan, np.nan], [0.2, np.nan]])
    tracking = TrajectoryTracking(observer=observer, targets=targets)
    np.testing.assert_allclose(tracking.weights, [0.5, 0.0, 0.5])
    assert tracking.value(state, None, design, 1) == 0.0  # missing frame
    check_term(tracking, state, None, design, control_step=0)
    check_term(tracking, state, None, design, control_step=2)


def test_bad_inputs_are_refused(spring_mass):
    with pytest.raises(ValueError, match="unknown state field"):
        StateFieldObserver(simulator=spring_mass, fields=["x"])
    with pytest.raises(ValueError, match="shape"):
        TrajectoryTracking(observer=NullObserver(), targets=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="kind"):
        Objective.of(object())
    with pytest.raises(ValueError, match="lower"):
        Constraint(Objective.of(ActionL2()), lower=1.0, upper=0.0)
    with pytest.raises(ValueError, match="finite"):
        Constraint(Objective.of(ActionL2()))
