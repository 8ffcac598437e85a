"""Flip Box: the scene of the example (a finger on an x-z carriage beside a box on an
unactuated hinge, a finger and other links in one robot option), contact between the
finger's pad and the moving box with its gradient, the example's quick run and the Table IV
metric of its run directory (sim_rigid.flip)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from codesign.plugins import get_registry
from codesign.runs import run_experiment
from sim_rigid.flip import final_error, flip_metric, main
from sim_rigid.scene import SceneError, make_simulator
from sim_rigid.terms import JointTarget

EXAMPLES = Path(__file__).parents[1] / "src" / "sim_rigid" / "examples"


def _options(**changes):
    options = yaml.safe_load((EXAMPLES / "flip_box.yaml").read_text())["simulator"]["options"]
    return options | changes


@pytest.fixture(scope="module")
def simulator():
    # the finger's pad 0.5 mm inside the box's top face: touching from the start
    return make_simulator(**_options(initial_positions={"slide_z": -0.033}))


def test_the_scene_has_a_finger_on_a_carriage_and_an_unactuated_hinge(simulator):
    model = simulator.model
    assert simulator.action_size == 6
    actuated = [model.coordinate_names[k] for k in model.actuated]
    assert actuated == ["slide_x", "slide_z", "phalanx1_joint", "phalanx2_joint",
                        "phalanx3_joint", "phalanx4_joint"]
    assert model.actuated_gear.tolist() == [6.0, 6.0, 0.1, 0.1, 0.1, 0.1]
    # the finger's base hangs from the carriage, the box's shape from the box
    base = model.link_names.index("base")
    assert model.link_names[model.joint_parent[base]] == "carriage_z"
    assert model.obstacle_link.tolist() == [model.link_names.index("box"), -1]


def test_a_pressing_finger_turns_the_box_away_and_gravity_holds_it_on_the_floor(simulator):
    design = simulator.design_space().defaults()
    hinge = simulator.model.coordinate_names.index("hinge")
    state = simulator.initial_state(design)
    alone = make_simulator(**_options())  # the finger 3 cm above the box
    idle = alone.initial_state(design)
    for _ in range(10):
        state = simulator.step(state, np.zeros(6), design, 5e-3)
        idle = alone.step(idle, np.zeros(6), design, 5e-3)
    # pressed down beyond the hinge line, the box turns towards -θ (into the floor, which
    # pushes back through the box's corner points): a small angle, not a fall through it
    assert -0.05 < state.joint_q[hinge] < idle.joint_q[hinge] <= 0.0
    assert idle.joint_q[hinge] > -0.01


def test_the_gradient_through_the_contact_with_the_hinged_box(simulator, pressing_gradcheck):
    # the joint axes' derivatives here are 5e-5 against the Newton solves' 5e-11 noise in
    # the loss, under the 1e-6 test at any step; the other scenes check them through contact
    pressing_gradcheck(simulator, np.array([0.3, -0.2, 0.4, 0.2, -0.1, 0.3]), eps=1e-6,
                       names=("joint.origin", "link.com", "contact.point"))


def test_extra_links_beside_a_finger_are_checked():
    with pytest.raises(SceneError, match=r"unknown keys \['gravity'\] beside finger"):
        make_simulator(robot={"finger": {"phalanges": 2}, "gravity": [0, 0, -1]})
    with pytest.raises(SceneError, match="robot.links beside a finger must be a list"):
        make_simulator(robot={"finger": {"phalanges": 2}, "links": {"name": "box"}})
    with pytest.raises(SceneError, match="parent 'cart' is not a link or world"):
        make_simulator(robot={"finger": {"phalanges": 2, "parent": "cart"}})


@pytest.mark.parametrize("example", ["flip_box", "flip_box_codesign", "flip_box_cage"])
def test_the_metric_of_a_quick_run(example, tmp_path, capsys):
    out = tmp_path / "run"
    run_experiment(EXAMPLES / f"{example}.yaml", get_registry(), out=out, quick=True,
                   progress=False, log=lambda message: None)
    metric = flip_metric(out)
    # 4 steps of 5 ms: the box has not moved, an error of a quarter turn at both ends
    assert metric["initial"] == pytest.approx(np.pi / 2, abs=0.01)
    assert metric["normalized"] == pytest.approx(metric["final"] / metric["initial"])
    main([str(out)])
    assert f"normalized {metric['normalized']:.3f}" in capsys.readouterr().out


def test_the_final_error_is_the_terms_after_the_last_step(simulator):
    term = JointTarget(simulator=simulator, joint="hinge", target=0.5)
    design = simulator.design_space().defaults()
    actions = np.array([[0.1, 0.0, 0.2, 0.0, 0.0, 0.1], [0.0, 0.1, 0.0, 0.0, 0.0, 0.0]])
    state = simulator.initial_state(design)
    for action in actions:
        for _ in range(2):
            state = simulator.step(state, action, design, 5e-3)
    assert final_error(term, simulator, design, actions, substeps=2, dt=5e-3) == \
        pytest.approx(abs(state.joint_q[1] - 0.5), abs=1e-15)


def test_the_metric_refuses_a_run_without_a_joint_target(tmp_path):
    out = tmp_path / "run"
    run_experiment(EXAMPLES / "flip_box.yaml", get_registry(), out=out, quick=True,
                   progress=False, log=lambda message: None,
                   settings={"objective": [{"term": "action_l2", "weight": 1.0}]})
    with pytest.raises(ValueError, match="needs one joint_target term"):
        flip_metric(out)
