"""The task terms (sim_rigid.terms): reach_targets (targets by time window), joint_target
and touch_point (Flip Box's); their values, their gradients with respect to the state and
the joint origins against finite differences, and their input checks."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.controllers import OpenLoopController
from codesign.rollout import Rollout
from codesign.terms import Objective
from codesign.testing import gradcheck
from codesign.tree import tree_zeros_with
from sim_rigid.kinematics import link_point
from sim_rigid.scene import make_simulator
from sim_rigid.terms import JointTarget, ReachTargets, TouchPoint

TARGETS = [[0.15, 0.0, 0.16], [0.21, 0.0, 0.02], [0.10, 0.0, 0.0]]


@pytest.fixture(scope="module")
def simulator():
    return make_simulator(robot={"finger": {"phalanges": 2}})


def _term(simulator, **changes):
    options = dict(simulator=simulator, targets=TARGETS, start_times=[0.0, 0.1, 0.2],
                   point=[0.025, 0.0, 0.0], dt=0.01, substeps=2) | changes
    return ReachTargets(**options)


def test_each_target_holds_over_its_window_and_the_value_is_the_distance(simulator):
    term = _term(simulator)
    assert [term.target(t).tolist() for t in (0.0, 0.099, 0.1, 0.25)] == \
        [TARGETS[0], TARGETS[0], TARGETS[1], TARGETS[2]]
    design = simulator.design_space().defaults()
    state = simulator.initial_state(design)
    assert term.value(state, None, design, 0) == 0.0  # the given start is not scored
    tip = link_point(simulator.model, design["joint.origin"], state.joint_q, 3,
                     [0.025, 0.0, 0.0])
    # control step 6 is at 6 x 2 x 0.01 = 0.12 s: the second target's window
    assert term.value(state, None, design, 6) == pytest.approx(
        np.linalg.norm(tip - TARGETS[1]), abs=1e-15)


def test_gradient_with_respect_to_the_state_and_the_joint_origins_and_axes(simulator):
    term = _term(simulator)
    state, design = _moved(simulator, 0)
    g_state, g_action, g_design = term.grad(state, None, design, 7)
    assert g_action is None and set(g_design) == {"joint.origin", "joint.axis"}
    # a tilted axis moves the tip: the term reads the design's axes, not the model's
    assert term.value(state, None, design, 7) != pytest.approx(
        term.value(state, None, design | {"joint.axis": simulator.model.joint_axis}, 7),
        abs=1e-9)
    _check_gradient(term, state, design, 7)
    assert term.grad(state, None, design, 0) == (None, None, None)


def test_bad_options_are_named(simulator):
    with pytest.raises(ValueError, match="link 'thumb' is not one of the robot's links"):
        _term(simulator, link="thumb")
    with pytest.raises(ValueError, match="one time per target .* increasing from 0"):
        _term(simulator, start_times=[0.0, 0.2, 0.1])
    with pytest.raises(ValueError, match="one time per target"):
        _term(simulator, start_times=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"targets must be a list of \[x, y, z\]"):
        _term(simulator, targets=[[0.1, 0.0]], start_times=[0.0])
    with pytest.raises(ValueError, match=r"point is \[x, y, z\]"):
        _term(simulator, point=[0.0, 0.0])


def _moved(simulator, seed):
    """A design with moved joint origins and tilted joint axes of other lengths, and a state
    with random joint angles."""
    design = simulator.design_space().defaults()
    rng = np.random.default_rng(seed)
    design["joint.origin"] = design["joint.origin"] + rng.uniform(-0.01, 0.01, (4, 3))
    design["joint.axis"] = (design["joint.axis"] + rng.uniform(-0.2, 0.2, (4, 3))) * 1.5
    state = tree_zeros_with(simulator.initial_state(design),
                            joint_q=rng.uniform(-0.5, 0.5, 2))
    return state, design


def _check_gradient(term, state, design, control_step):
    g_state, g_action, g_design = term.grad(state, None, design, control_step)
    assert g_action is None

    def value(inputs):
        moved = tree_zeros_with(state, joint_q=inputs["q"])
        return term.value(moved, None, design | {"joint.origin": inputs["origin"],
                                                 "joint.axis": inputs["axis"]}, control_step)

    inputs = {"q": state.joint_q, "origin": design["joint.origin"],
              "axis": design["joint.axis"]}
    grads = {"q": g_state.joint_q,
             "origin": (g_design or {}).get("joint.origin", np.zeros((4, 3))),
             "axis": (g_design or {}).get("joint.axis", np.zeros((4, 3)))}
    gradcheck(value, inputs, grads).assert_ok()


def test_joint_target_is_the_squared_error_of_one_coordinate(simulator):
    term = JointTarget(simulator=simulator, joint="phalanx2_joint", target=0.3)
    state, design = _moved(simulator, 1)
    assert term.value(state, None, design, 0) == 0.0  # the given start is not scored
    assert term.value(state, None, design, 4) == pytest.approx(
        (state.joint_q[1] - 0.3) ** 2, abs=1e-15)
    assert JointTarget(simulator=simulator, joint="phalanx1_joint").target == np.pi / 2
    _check_gradient(term, state, design, 4)
    assert term.grad(state, None, design, 0) == (None, None, None)


def test_joint_target_relative_to_scores_the_difference_of_two_coordinates(simulator):
    term = JointTarget(simulator=simulator, joint="phalanx2_joint", target=0.1,
                       relative_to="phalanx1_joint")
    state, design = _moved(simulator, 1)
    q = state.joint_q
    assert term.value(state, None, design, 4) == pytest.approx((q[1] - q[0] - 0.1) ** 2,
                                                               abs=1e-15)
    _check_gradient(term, state, design, 4)
    with pytest.raises(ValueError, match="joint_target: relative_to 'lid' is not one of"):
        JointTarget(simulator=simulator, joint="phalanx2_joint", relative_to="lid")
    with pytest.raises(ValueError, match="relative_to is the joint itself"):
        JointTarget(simulator=simulator, joint="phalanx2_joint", relative_to="phalanx2_joint")


def test_joint_target_at_end_scores_the_last_state_once(simulator):
    term = JointTarget(simulator=simulator, joint="phalanx2_joint", target=0.3, at_end=True)
    assert term.kind == "final"
    assert JointTarget(simulator=simulator, joint="phalanx2_joint").kind == "trajectory"
    state, design = _moved(simulator, 3)
    assert term.value(state, None, design, 5) == pytest.approx(
        (state.joint_q[1] - 0.3) ** 2, abs=1e-15)
    _check_gradient(term, state, design, 5)
    # in a rollout it counts once, after the last step, and its gradient reaches the
    # torques through the adjoint of every step
    controller = OpenLoopController(observation_size=0, action_size=2, control_steps=3)
    rollout = Rollout(simulator, controller=controller, steps=3, substeps=2, dt=0.01)
    objective = Objective.of(term)
    table = np.random.default_rng(4).uniform(-0.05, 0.05, (3, 2))
    result, (gradient,) = rollout.value_and_grad(design, {"table": table}, objective)
    assert result.values[0] == pytest.approx(
        (result.final_state.joint_q[1] - 0.3) ** 2, abs=1e-15)

    def value(inputs):
        return float(rollout.forward(design, inputs, objective).values[0])

    gradcheck(value, {"table": table}, {"table": gradient.weights["table"]}, eps=1e-6,
              relative_step=False).assert_ok()


def test_touch_point_follows_the_touched_link_until_its_time(simulator):
    term = TouchPoint(simulator=simulator, link="tip", point=[0.025, 0.0, -0.0075],
                      target_link="phalanx1", target_point=[0.02, 0.0, 0.01], until=0.1,
                      dt=0.01, substeps=2)
    state, design = _moved(simulator, 2)
    model, origin, q = simulator.model, design["joint.origin"], state.joint_q
    axis = design["joint.axis"]
    offset = (link_point(model, origin, q, 3, [0.025, 0.0, -0.0075], joint_axis=axis)
              - link_point(model, origin, q, 1, [0.02, 0.0, 0.01], joint_axis=axis))
    # control steps are 0.02 s apart: steps 1 to 4 are before 0.1 s, step 5 is at it
    assert [term.counts(k) for k in (0, 1, 4, 5)] == [False, True, True, False]
    assert term.value(state, None, design, 3) == pytest.approx(offset @ offset, abs=1e-15)
    assert term.value(state, None, design, 5) == 0.0
    assert term.grad(state, None, design, 5) == (None, None, None)
    _check_gradient(term, state, design, 3)


def test_bad_flip_options_are_named(simulator):
    with pytest.raises(ValueError, match="joint_target: joint 'hinge' is not one of"):
        JointTarget(simulator=simulator, joint="hinge")
    with pytest.raises(ValueError, match="joint_target: target must be a finite number"):
        JointTarget(simulator=simulator, joint="phalanx1_joint", target=float("nan"))
    with pytest.raises(ValueError, match="joint_target: at_end must be true .* or false"):
        JointTarget(simulator=simulator, joint="phalanx1_joint", at_end="last")
    touch = dict(simulator=simulator, target_link="phalanx1", target_point=[0, 0, 0],
                 dt=0.01, substeps=2)
    with pytest.raises(ValueError, match="touch_point: target_link 'box' is not one of"):
        TouchPoint(**touch | {"target_link": "box"})
    with pytest.raises(ValueError, match="link and target_link are both 'phalanx1'"):
        TouchPoint(**touch | {"link": "phalanx1"})
    with pytest.raises(ValueError, match=r"touch_point: target_point is \[x, y, z\]"):
        TouchPoint(**touch | {"target_point": [0.0, 0.0]})
    with pytest.raises(ValueError, match="until must be a time > 0"):
        TouchPoint(**touch | {"until": 0.0})
