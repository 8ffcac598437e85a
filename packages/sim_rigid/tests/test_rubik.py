"""Rotate Rubik's Cube: the scene of the example (a finger on an x-y carriage that turns about
z, over a cube whose top layer turns on an unactuated joint), the finger's pad dragging the
layer round by friction with its gradient, the examples' quick runs and the Table IV metric
of their run directories (sim_rigid.flip, generic over a joint_target term)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from codesign.plugins import get_registry
from codesign.runs import run_experiment
from sim_rigid.flip import flip_metric, main
from sim_rigid.scene import make_simulator

EXAMPLES = Path(__file__).parents[1] / "src" / "sim_rigid" / "examples"


def _simulator(press: float):
    """The example's scene with the carriage 4 cm back and phalanx 1 bent down by ``press``
    [rad], phalanx 2 back to level: at 0.95 rad its pad rests on the layer's top face."""
    options = yaml.safe_load((EXAMPLES / "rubik_rotate.yaml").read_text())["simulator"]
    return make_simulator(**options["options"] | {"initial_positions": {
        "slide_x": -0.04, "phalanx1_joint": press, "phalanx2_joint": -press}})


@pytest.fixture(scope="module")
def pressing():
    return _simulator(0.95)


def test_the_scene_has_a_turning_carriage_and_an_unactuated_layer(pressing):
    model = pressing.model
    assert pressing.action_size == 6
    assert [model.coordinate_names[k] for k in model.actuated] == \
        ["slide_x", "slide_y", "turn", "phalanx1_joint", "phalanx2_joint", "phalanx3_joint"]
    assert model.actuated_gear.tolist() == [3.0, 3.0, 0.03, 0.03, 0.03, 0.03]
    assert "layer_turn" in model.coordinate_names  # a coordinate, but no actuator
    # the block's shape on the welded cube, the layer's on the layer, then the floor
    names = list(model.link_names)
    assert model.obstacle_link.tolist() == [names.index("cube"), names.index("layer"), -1]


def test_the_pad_drags_the_pressed_layer_round_and_a_lifted_finger_does_not(pressing):
    push = np.array([0.0, 0.5, 0.0, 0.3, 0.0, 0.0])  # the carriage sideways, along +y
    layer = pressing.model.coordinate_names.index("layer_turn")
    lifted = _simulator(0.9)  # the pad 3 mm above the layer

    def angle(simulator):
        design = simulator.design_space().defaults()
        state = simulator.initial_state(design)
        for _ in range(6):
            state = simulator.step(state, push, design, 5e-3)
        return state.joint_q[layer]

    # the pad, 2 to 4 cm out on the +x side, moving towards +y turns the layer about +z
    assert angle(pressing) > 0.004
    assert angle(lifted) == 0.0


def test_the_gradient_through_the_contact_with_the_turning_layer(pressing, pressing_gradcheck):
    # the pad presses 1 mm deep (kn 1000 N/m, kd 100 N s/m^2): the loss curves sharply in the
    # joint origins' z, so a step of 1e-6 m leaves a truncation error of 1e-5; 1e-7 m does not
    pressing_gradcheck(pressing, np.array([0.2, 0.5, -0.3, 0.3, 0.1, -0.2]), eps=1e-7)


@pytest.mark.parametrize("example", ["rubik_rotate", "rubik_rotate_codesign"])
def test_the_metric_of_a_quick_run(example, tmp_path, capsys):
    out = tmp_path / "run"
    run_experiment(EXAMPLES / f"{example}.yaml", get_registry(), out=out, quick=True,
                   progress=False, log=lambda message: None)
    metric = flip_metric(out)
    # 4 steps of 5 ms: the finger has not reached the layer, a quarter turn off at both ends
    assert metric["joint"] == "layer_turn"
    assert metric["initial"] == pytest.approx(np.pi / 2, abs=1e-9)
    assert metric["final"] == pytest.approx(np.pi / 2, abs=1e-9)
    main([str(out)])
    assert f"layer_turn error at the end 1.571 -> 1.571, normalized " \
           f"{metric['normalized']:.3f}" in capsys.readouterr().out
