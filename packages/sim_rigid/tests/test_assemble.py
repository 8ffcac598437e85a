"""Assemble: the scene of the example (two prefixed fingers on a hand sliding in the plane, a
small box and a mount with a hole of boxes, both on unactuated planar joints), the contact
force scale, the right fingertip pressing the box with its gradient, the examples' quick
runs (the co-design in its three stages) and the Table IV metric of their run directories."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from codesign.plugins import get_registry
from codesign.runs import run_experiment
from sim_rigid.assemble import assemble_metric, main
from sim_rigid.kinematics import link_point
from sim_rigid.scene import SceneError, make_simulator, robot_description

EXAMPLES = Path(__file__).parents[1] / "src" / "sim_rigid" / "examples"
OPTIONS = yaml.safe_load((EXAMPLES / "assemble.yaml").read_text())["simulator"]["options"]
PRESS = {"right_phalanx1_joint": 0.3, "right_phalanx2_joint": 1.27,
         "box_slide_x": -0.0322, "box_slide_y": -0.02}
"""The right finger curled down, its tip's pad (facing -x at x = 6.08 cm) 1 mm inside the
box's +x face, the box moved in front of it."""


def _simulator(scale: float = 1.0, **positions):
    return make_simulator(**OPTIONS | {"contact_scale": scale,
                                       "initial_positions": PRESS | positions})


@pytest.fixture(scope="module")
def pressing():
    return _simulator()


def test_the_scene_has_a_sliding_hand_two_fingers_a_box_and_a_mount(pressing):
    model, names = pressing.model, list(pressing.model.link_names)
    assert pressing.action_size == 8
    assert [model.coordinate_names[k] for k in model.actuated] == [
        "hand_slide_x", "hand_slide_y", "right_knuckle_turn", "left_knuckle_turn",
        "right_phalanx1_joint", "left_phalanx1_joint", "right_phalanx2_joint",
        "left_phalanx2_joint"]
    assert {"mount_slide_x", "mount_turn", "box_slide_y", "box_turn"} <= \
        set(model.coordinate_names)  # coordinates, but no actuators
    # the box's shape, the mount's four boxes, then the floor
    assert model.obstacle_link.tolist() == [names.index("mount")] * 4 + \
        [names.index("box"), -1]
    # 18 pad points per finger, 2 at the hole's entrance, 8 round the box
    assert len(model.contact_link) == 46
    # the left finger points along -x, the right one along +x
    design = pressing.design_space().defaults()
    rest = make_simulator(**OPTIONS)
    q = rest.initial_state(design).joint_q
    tips = {side: link_point(rest.model, design["joint.origin"], q,
                             names.index(f"{side}_tip"), np.array([0.025, 0.0, 0.0]))
            for side in ("left", "right")}
    np.testing.assert_allclose(tips["right"], [0.135, 0.0, 0.08], atol=1e-12)
    np.testing.assert_allclose(tips["left"], [-0.135, 0.0, 0.08], atol=1e-12)


def test_fingers_are_named_by_their_prefix_and_bad_ones_refused():
    robot = robot_description({"fingers": [{"phalanges": 1, "prefix": "a_"},
                                           {"phalanges": 1, "prefix": "b_"}]})
    assert [link["name"] for link in robot["links"]] == [
        "a_base", "a_phalanx1", "a_tip", "b_base", "b_phalanx1", "b_tip"]
    assert [(j["name"], j["parent"]) for j in robot["joints"]][3:] == [
        ("b_base_joint", "world"), ("b_phalanx1_joint", "b_base"),
        ("b_tip_joint", "b_phalanx1")]
    with pytest.raises(SceneError, match="both finger and fingers"):
        robot_description({"finger": {"phalanges": 1}, "fingers": []})
    with pytest.raises(SceneError, match="robot.fingers must be a non-empty list"):
        robot_description({"fingers": []})
    with pytest.raises(SceneError, match="prefix must be a string"):
        robot_description({"fingers": [{"phalanges": 1, "prefix": 3}]})


def test_the_contact_scale_multiplies_every_contact_force(pressing):
    np.testing.assert_array_equal(_simulator(0.1).model.contact_area,
                                  0.1 * pressing.model.contact_area)
    box = pressing.model.coordinate_names.index("box_slide_x")

    def box_push(simulator):
        design = simulator.design_space().defaults()
        start = simulator.initial_state(design)
        # the box's rate after a step so short that the pad's depth barely changes:
        # dt f / m, linear in the contact force f
        return simulator.step(start, np.zeros(8), design, 1e-7).joint_qd[box]

    # the pad 1 mm deep pushes the box towards -x; a tenth of the force, a tenth of the push
    full, scaled = box_push(pressing), box_push(_simulator(0.1))
    assert full < -1e-5
    assert scaled == pytest.approx(0.1 * full, rel=1e-3)


@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_the_gradient_through_the_fingertip_pushing_the_box(scale, pressing_gradcheck):
    # as the Rubik's cube's (the same kn and kd): a step of 1e-7 m in the joint origins
    pressing_gradcheck(_simulator(scale), np.array([0.2, -0.1, 0.1, 0.0, -0.3, 0.1, 0.2, 0.0]),
                       eps=1e-7, dt=1e-3)


@pytest.mark.parametrize("example", ["assemble", "assemble_codesign", "assemble_cmaes"])
def test_the_metric_of_a_quick_run(example, tmp_path, capsys):
    out = tmp_path / "run"
    summary = run_experiment(EXAMPLES / f"{example}.yaml", get_registry(), out=out,
                             quick=True, progress=False, log=lambda message: None)
    if example != "assemble":
        assert [stage["set"] for stage in summary["stages"]] == [
            {"simulator.options.contact_scale": scale} for scale in (0.01, 0.1, 1.0)]
    metric = assemble_metric(out)
    # 4 steps of 1 ms: the box has not moved, 6.8 cm from the hole at both ends
    assert metric["initial"] == pytest.approx(np.hypot(0.065, 0.02), abs=1e-9)
    assert metric["final"] == pytest.approx(metric["initial"], abs=1e-9)
    main([str(out)])
    assert "normalized 1.000" in capsys.readouterr().out
