"""Co-design of several fingers through their cage parameters (``design_space: cage`` with
``robot: {fingers: [...]}``, sim_rigid.morphology.HandMorphology): the design space of the
Assemble example (each finger's θ named by its prefix), the fingers' layers mapped onto their
own links, an Assemble episode's loss differentiated with respect to both fingers' θ through
contact, the stations whose height is free, and the errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_registry
from codesign.testing import gradcheck
from codesign.validation import validate_config
from sim_rigid import morphology as mo
from sim_rigid.cage_design import FABRICATION_LIMITS, CageDesignError, CageSimulator
from sim_rigid.scene import SceneError, make_simulator

EXAMPLE = Path(__file__).parents[1] / "src" / "sim_rigid" / "examples" / "assemble_cage.yaml"
CONFIG = yaml.safe_load(EXAMPLE.read_text())
OPTIONS = CONFIG["simulator"]["options"]
SET_BY_THETA = {"link.mass", "link.com", "link.inertia", "joint.origin", "contact.point"}
PRESS = {"right_phalanx1_joint": 0.3, "right_phalanx2_joint": 1.27,
         "box_slide_x": -0.0322, "box_slide_y": -0.02}
"""The right finger curled down, its tip's pad 1 mm inside the box's +x face (as
test_assemble.py's)."""


@pytest.fixture(scope="module")
def hand():
    return make_simulator(**OPTIONS)


def _finger_parameters(prefix: str) -> list[str]:
    """A two-phalanx finger's θ with free heights at the weld and the tip, ``prefix``ed."""
    parts = [("length", p) for p in ("base", "phalanx1", "phalanx2", "tip")] + \
        [("width", s) for s in ("base", "joint1", "joint2", "tip_joint", "tip")] + \
        [("height", s) for s in ("tip_joint", "tip")]
    return [f"{kind}.{prefix}{part}" for kind, part in parts]


def test_each_fingers_theta_is_named_by_its_prefix_within_fabrication_limits(hand):
    assert isinstance(hand, CageSimulator)
    theta = _finger_parameters("right_") + _finger_parameters("left_")
    space = hand.design_space()
    assert list(hand.finger.parameter_names) == theta
    assert space.names[:len(theta)] == theta
    assert space.names[len(theta):] == [name for name in hand.inner.design_space().names
                                        if name not in SET_BY_THETA]
    for name in theta:
        parameter = space[name]
        assert parameter.shape == () and parameter.unit == "m"
        assert (float(parameter.lower_array()), float(parameter.upper_array())) == \
            FABRICATION_LIMITS
    defaults = space.defaults()
    assert float(defaults["length.left_phalanx2"]) == 0.04
    assert float(defaults["height.right_tip_joint"]) == 0.015
    # the example frees 8 per finger, each within the fabrication limits
    design = CONFIG["design"]
    assert len(design) == 16 and set(design) <= set(theta)
    assert {name.split(".")[1].removeprefix("left_") for name in design if "left_" in name} \
        == {name.split(".")[1].removeprefix("right_") for name in design if "right_" in name}
    for bounds in design.values():
        assert FABRICATION_LIMITS[0] <= bounds["lower"] < bounds["upper"] <= FABRICATION_LIMITS[1]


def test_each_fingers_layers_set_its_own_links_only(hand):
    model, base = hand.model, hand.inner.design_space().defaults()
    at_rest = hand.expand(hand.design_space().defaults())
    for name in SET_BY_THETA:
        np.testing.assert_array_equal(at_rest[name], base[name])
    design = hand.design_space().defaults()
    design["length.left_phalanx1"] = np.float64(0.05)
    design["width.left_tip"] = np.float64(0.03)
    design["height.left_tip_joint"] = np.float64(0.025)
    expanded = hand.expand(design)
    left = hand.finger.fingers[1]
    theta_left = hand.cage_parameters(design)[len(hand.finger.fingers[0].parameter_names):]
    finger = mo.design(left, theta_left)
    links = [model.link_names.index("left_" + name) for name in left.link_names]
    others = [k for k in range(model.link_count) if k not in links]
    for name in ("link.mass", "link.com", "link.inertia", "joint.origin"):
        np.testing.assert_array_equal(expanded[name][links], finger[name])
        np.testing.assert_array_equal(expanded[name][others], base[name][others])
    on_left = np.isin(model.contact_link, links)
    np.testing.assert_array_equal(expanded["contact.point"][on_left], finger["contact.point"])
    np.testing.assert_array_equal(expanded["contact.point"][~on_left],
                                  base["contact.point"][~on_left])
    # the longer first phalanx moves the second one's joint out by 1 cm
    joint = model.link_names.index("left_phalanx2")
    np.testing.assert_allclose(expanded["joint.origin"][joint], [0.05, 0.0, 0.0], atol=1e-12)


def test_the_hand_jacobian_is_each_fingers_block():
    hand = mo.HandMorphology((mo.assemble_finger(1), mo.assemble_finger(2)), ("a_", "b_"))
    theta = hand.parameter_defaults * np.random.default_rng(0).uniform(0.9, 1.1, 18)
    jacobian = mo.hand_design_jacobian(hand, theta)
    first = mo.design_jacobian(hand.fingers[0], theta[:8])
    second = mo.design_jacobian(hand.fingers[1], theta[8:])
    for name, block in first.items():
        rows = block.shape[0]
        np.testing.assert_array_equal(jacobian[name][:rows, :8], block)
        np.testing.assert_array_equal(jacobian[name][rows:, 8:], second[name])
        assert not jacobian[name][:rows, 8:].any() and not jacobian[name][rows:, :8].any()
    g_design = {name: np.random.default_rng(1).normal(size=value.shape)
                for name, value in mo.hand_design(hand, theta).items()}
    g_theta = sum(jacobian[name].T @ g_design[name].reshape(-1) for name in g_design)
    gradcheck(lambda x: sum(float(np.vdot(value, g_design[name]))
                            for name, value in mo.hand_design(hand, x["theta"]).items()),
              {"theta": theta}, {"theta": g_theta}, eps=1e-6, relative_step=False).assert_ok()


@pytest.fixture(scope="module")
def pressing_episode(tmp_path_factory):
    """The example's experiment, 6 ms long (3 control steps of 2), with the right fingertip
    pressing the box from the start, the contact forces at full scale (no stages)."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["simulator"]["options"]["initial_positions"] = PRESS
    data["run"] = data["run"] | {"steps": 3, "substeps": 2}
    data.pop("stages")
    data.pop("quick")
    path = tmp_path_factory.mktemp("assemble_cage") / "pressing.yaml"
    path.write_text(yaml.safe_dump(data))
    with build_experiment(validate_config(load_config(path), get_registry()),
                          get_registry()) as experiment:
        yield experiment


def test_an_episodes_loss_differentiates_with_respect_to_both_fingers_theta(pressing_episode):
    simulator, problem = pressing_episode.simulator, pressing_episode.problem
    design = simulator.design_space().defaults()
    box = simulator.model.coordinate_names.index("box_slide_x")
    # the pad pushes the box from the first step
    assert simulator.step(simulator.initial_state(design), np.zeros(8), design,
                          1e-7).joint_qd[box] < -1e-5
    assert sorted(problem.free) == sorted(CONFIG["design"])
    # the scaled vector holds the 16 scalar θ first, then the controller's weights
    theta_names = problem.space.names[:len(problem.free)]
    assert all(name.startswith("design.") for name in theta_names)
    design_entries = np.arange(problem.size) < len(theta_names)
    rng = np.random.default_rng(2)
    x0 = problem.x0()
    # θ off its rest values (the cages no boxes) and controls that move every joint
    x0 = x0 + np.where(design_entries, 0.05, 0.3) * rng.uniform(-1, 1, x0.size)
    x0 = np.clip(x0, problem.lower, problem.upper)
    evaluation = problem.evaluate(x0)
    g_theta = evaluation.grad[design_entries]
    for side in ("right_", "left_"):
        on_side = [side in name for name in theta_names]
        assert np.abs(g_theta[on_side]).max() > 0

    def loss(inputs):
        x = x0.copy()
        x[design_entries] = inputs["theta"]
        return problem.evaluate(x, grad=False).loss

    gradcheck(loss, {"theta": x0[design_entries]}, {"theta": g_theta}, eps=1e-6,
              relative_step=False, directions=3).assert_ok()


def test_free_heights_add_a_height_per_station_and_keep_the_rest_shape():
    plain = mo.assemble_finger(2)
    free = mo.assemble_finger(2, free_heights=("tip_joint", "tip"))
    assert plain.parameter_names[-1] == "height.tip"
    assert free.parameter_names[-2:] == ("height.tip_joint", "height.tip")
    rest = mo.design(plain, plain.parameter_defaults)
    for name, value in mo.design(free, free.parameter_defaults).items():
        np.testing.assert_allclose(value, rest[name], rtol=1e-12, atol=1e-15)
    theta = free.parameter_defaults.copy()
    theta[free.parameter_names.index("height.tip_joint")] = 0.03
    taller = mo.design(free, theta)
    # the weld's height grows the second phalanx's far end and the tip's near end only
    grown = ~np.isclose(taller["link.mass"], rest["link.mass"], rtol=1e-12)
    assert grown.tolist() == [False, False, True, True]
    np.testing.assert_allclose(taller["joint.origin"], rest["joint.origin"], atol=1e-15)
    with pytest.raises(ValueError, match=r"free_heights .* among \['tip_joint', 'tip'\] "
                                         r"\(a joint's station scales only along its axis\)"):
        mo.assemble_finger(2, free_heights=("joint1",))


def test_several_fingers_bad_inputs_are_refused(hand):
    two = {"fingers": [{"phalanges": 1, "prefix": "a_"}, {"phalanges": 1, "prefix": "a_"}]}
    with pytest.raises(SceneError, match=r"prefixes \['a_'\] repeat: give each finger its own"):
        make_simulator(robot=two, design_space="cage")
    unnamed = {"fingers": [{"phalanges": 1}, {"phalanges": 2}]}
    with pytest.raises(SceneError, match=r"prefixes \[''\] repeat"):
        make_simulator(robot=unnamed, design_space="cage")
    with pytest.raises(SceneError, match=r"robot.fingers\[1\] must be a mapping"):
        make_simulator(robot={"fingers": [{"phalanges": 1, "prefix": "a_"}, "b_"]},
                       design_space="cage")
    with pytest.raises(SceneError, match=r"robot.fingers\[0\]: free_heights"):
        make_simulator(robot={"fingers": [{"phalanges": 1, "free_heights": ["base"]}]},
                       design_space="cage")
    # a hand whose finger the robot does not hold
    built = make_simulator(robot={"fingers": [{"phalanges": 1, "prefix": "a_"},
                                              {"phalanges": 1, "prefix": "b_"}]})
    stranger = mo.HandMorphology((mo.assemble_finger(1), mo.assemble_finger(1)), ("a_", "c_"))
    with pytest.raises(CageDesignError, match=r"no links \['c_base', 'c_phalanx1', 'c_tip'\]"):
        CageSimulator(built, stranger, design=mo.hand_design,
                      design_jacobian=mo.hand_design_jacobian)
    # θ of the wrong shape, by parameter and whole
    with pytest.raises(CageDesignError, match=r"'width.left_tip' has shape \(2,\)"):
        hand.expand(hand.design_space().defaults() | {"width.left_tip": np.ones(2)})
    with pytest.raises(ValueError, match=r"the hand's cage parameters are 22 values .* got "
                                         r"shape \(21,\)"):
        mo.hand_design(hand.finger, np.ones(21))
    with pytest.raises(ValueError, match="one prefix per finger"):
        mo.HandMorphology((mo.assemble_finger(1),), ("a_", "b_"))


def test_the_example_runs_the_co_designs_stages_and_budgets():
    codesign = yaml.safe_load((EXAMPLE.parent / "assemble_codesign.yaml").read_text())
    for section in ("stages", "optimizer", "run", "objective", "controller", "quick"):
        assert CONFIG[section] == codesign[section]
    # the same scene, its fingers built with free heights, seen through their cages
    assert OPTIONS["design_space"] == "cage"
    assert {k: v for k, v in OPTIONS.items() if k != "design_space"} == \
        codesign["simulator"]["options"] | {"robot": OPTIONS["robot"]}
    assert [{k: v for k, v in finger.items() if k != "free_heights"}
            for finger in OPTIONS["robot"]["fingers"]] == \
        codesign["simulator"]["options"]["robot"]["fingers"]
