"""The double pendulum design loss (the paper's Eq. 30): circle tracking and joint work,
their VJPs, and a closed-loop rollout's gradient with respect to the link lengths."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from codesign import CircleTrajectory, Objective, Rollout, TaskSpaceStiffnessController
from codesign.cli import main
from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_registry
from codesign.testing import gradcheck
from codesign.validation import validate_config
from sim_pbd.kinematics import joint_positions
from sim_pbd.options import PBDOptions
from sim_pbd.scene import ROBOT_DIRECTORY, build_model
from sim_pbd.simulator import PBDSimulator
from sim_pbd.state import PBDState
from sim_pbd.terms import CircleTracking, EndEffectorObserver, JointWork

CIRCLE = {"centre": [2.7, 0.0, 0.0], "radius": 0.3, "period": 2.0}
LENGTHS = np.array([[-2.9, 0.0, 0.0], [-0.2, 0.0, 0.0]])
FD_STEP = 1e-4
"""Finite-difference step (fourth-order stencil) through XPBD steps, as in test_gradients:
the velocity update divides the positions' round-off by the substep."""


def _check_term(term, sim, state, action, design, control_step=3):
    """gradcheck of term.grad in the state, the action and joint.child_origin."""

    def loss(inputs):
        return term.value(PBDState(**inputs["state"]), inputs["action"],
                          {**design, **inputs["design"]}, control_step)

    g_state, g_action, g_design = term.grad(state, action, design, control_step)
    inputs = {"state": dict(vars(state)), "action": action,
              "design": {"joint.child_origin": design["joint.child_origin"]}}
    gradients = {"state": dict(vars(g_state)),
                 "action": np.zeros_like(action) if g_action is None else g_action,
                 "design": {"joint.child_origin": g_design["joint.child_origin"]}}
    gradcheck(loss, inputs, gradients, eps=FD_STEP, relative_step=False,
              tolerance=1e-6).assert_ok()


def _pendulum(substeps: int = 10):
    """The bundled double pendulum (l1 = 2.9 m, l2 = 0.2 m) swinging, and its design."""
    sim = PBDSimulator(build_model(PBDOptions(urdf="double_pendulum")), substeps=substeps)
    design = {**sim.design_space().defaults(), "joint.child_origin": LENGTHS}
    state = sim.initial_state(design)
    for _ in range(3):
        state = sim.step(state, np.array([3.0, -0.4]), design, 0.01)
    return sim, design, state


def test_circle_tracking_is_the_tips_distance_from_the_circles_point_and_its_vjp():
    sim, design, state = _pendulum()
    term = CircleTracking(simulator=sim, dt=0.005, substeps=2, **CIRCLE)
    tip = EndEffectorObserver(simulator=sim).observe(state, design)[:3]
    target = CircleTrajectory(**CIRCLE).position(3 * 0.01)
    assert term.value(state, None, design, 3) == np.linalg.norm(tip - target)
    _check_term(term, sim, state, np.zeros(2), design)


def test_joint_work_is_the_torque_times_the_next_steps_displacement_and_its_vjp():
    sim, design, state = _pendulum()
    action = np.array([2.0, -0.7])
    term = JointWork(simulator=sim, dt=0.005, substeps=2)
    end = sim.step(sim.step(state, action, design, 0.005), action, design, 0.005)
    params = sim.parameters(design)
    displacement = (joint_positions(sim.model, params, end)[0]
                    - joint_positions(sim.model, params, state)[0])
    assert term.value(state, action, design, 0) == pytest.approx(np.dot(action, displacement),
                                                                 rel=1e-12)
    _check_term(term, sim, state, action, design)


def test_joint_work_sums_to_the_kinetic_energy_gained_without_damping():
    sim, design, state = _pendulum(substeps=200)
    term = JointWork(simulator=sim, dt=0.01)
    params = sim.parameters(design)

    def kinetic(s):
        spin = np.einsum("ni,nij,nj->", s.link_w, params["link_inertia"], s.link_w)
        return 0.5 * (params["link_mass"] @ np.sum(s.link_v**2, axis=1) + spin)

    start, work = state, 0.0
    for step in range(20):
        action = np.array([4.0 * np.cos(0.3 * step), -0.5])
        work += term.value(state, action, design, step)
        state = sim.step(state, action, design, 0.01)
    gained = kinetic(state) - kinetic(start)
    assert gained > 0.1
    assert abs(work - gained) < 0.01 * gained  # 0.2 %: XPBD's numerical dissipation


def test_joint_work_wraps_a_revolute_joint_past_half_a_turn():
    sim, design, _ = _pendulum()
    model = dataclasses.replace(sim.model, joint_rest=np.array([np.pi - 0.01, 0.0]))
    sim = PBDSimulator(model)
    state = sim.initial_state(design)
    state = dataclasses.replace(state, link_v=np.array([[0.0, -2.9 * 3.0, 0.0],
                                                        [0.0, -3.1 * 3.0, 0.0]]),
                                link_w=np.array([[0.0, 0.0, 3.0], [0.0, 0.0, 3.0]]))
    before = joint_positions(sim.model, sim.parameters(design), state)[0][0]
    after = joint_positions(sim.model, sim.parameters(design),
                            sim.step(state, np.zeros(2), design, 0.01))[0][0]
    assert before > 3.1 and after < -3.1  # joint 1 crossed the branch cut at ±π
    work = JointWork(simulator=sim, dt=0.01).value(state, np.array([1.0, 0.0]), design, 0)
    assert 0.02 < work < 0.04


def test_a_closed_loop_rollouts_gradient_by_the_link_lengths():
    sim = PBDSimulator(build_model(PBDOptions(urdf="double_pendulum")), substeps=200)
    observer = EndEffectorObserver(simulator=sim)
    controller = TaskSpaceStiffnessController(observation_size=observer.size, action_size=2,
                                              control_dt=0.01, **CIRCLE)
    objective = Objective.of(CircleTracking(simulator=sim, dt=0.01, **CIRCLE),
                             JointWork(simulator=sim, dt=0.01), weights=[1.0, 25.0])
    rollout = Rollout(sim, controller=controller, observer=observer, steps=4, dt=0.01)
    design = {**sim.design_space().defaults(), "joint.child_origin": LENGTHS}
    weights = controller.parameter_space().defaults()

    def loss(inputs):
        return rollout.forward({**design, **inputs["design"]}, weights, objective).values[0]

    _, (gradient,) = rollout.value_and_grad(design, weights, objective)
    g_lengths = gradient.design["joint.child_origin"]
    assert np.all(g_lengths[:, 0] != 0.0)
    gradcheck(loss, {"design": {"joint.child_origin": LENGTHS}},
              {"design": {"joint.child_origin": g_lengths}}, eps=FD_STEP,
              relative_step=False, tolerance=1e-6).assert_ok()


def test_the_design_example_validates_and_its_quick_run_shortens_the_loss(tmp_path, capsys):
    path = ROBOT_DIRECTORY / "double_pendulum_design.yaml"
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    registry = get_registry()
    with build_experiment(validate_config(load_config(path, quick=True), registry),
                          registry) as experiment:
        start = experiment.problem.evaluate(experiment.problem.x0(), grad=False).loss
    out = tmp_path / "run"
    assert main(["run", str(path), "--quick", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    lengths = np.array(summary["design"]["design.joint.child_origin"])
    assert summary["final_loss"] < start
    assert np.all(lengths[:, 1:] == 0.0) and not np.allclose(lengths[:, 0], [-3.0, -0.1])
