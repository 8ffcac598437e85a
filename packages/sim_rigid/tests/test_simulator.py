"""RigidSimulator against the core's contract: conformance, design parameters, the factory,
bad inputs."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from codesign.simulator import SimulationError
from codesign.testing import run_conformance
from sim_rigid.description import load_description
from sim_rigid.scene import make_simulator
from sim_rigid.simulator import DESIGN_FIELDS, RigidSimulator


@pytest.mark.parametrize("actuation", ["torque", "position"])
def test_conformance_of_the_arm(models, actuation):
    sim = RigidSimulator(models.arm4(), actuation=actuation)
    design = sim.design_space().defaults()
    # the inertias (down to 8e-5 kg m²) need finite-difference steps far below the rest's
    # (test_gradients checks them with their own): the suite's one step checks the others
    del design["link.inertia"]
    action = sim.model.joint_rest + 0.2 if actuation == "position" else np.array(
        [0.3, -0.2, 0.1, 0.05])
    run_conformance(sim, dt=0.01, action=action, design=design, steps=(1, 4),
                    rollout_steps=3, substeps=2, eps=1e-5)


def test_conformance_of_a_floating_tree(models):
    sim = RigidSimulator(models.mixed_tree())
    design = sim.design_space().defaults()
    del design["link.inertia"]
    run_conformance(sim, dt=0.01, design=design, steps=(1, 3), rollout_steps=2, substeps=2,
                    eps=1e-5)


def test_design_parameters_replace_the_model_values(models):
    sim = RigidSimulator(models.arm4())
    design = sim.design_space().defaults()
    assert set(design) == {"link.mass", "link.com", "link.inertia", "joint.origin",
                           "joint.axis", "joint.damping"}
    params = sim.parameters({**design, "link.mass": np.array([2.0, 3.0, 1.0, 1.0])})
    np.testing.assert_array_equal(params["link_mass"], [2.0, 3.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="link.mass must be positive"):
        sim.parameters({"link.mass": np.array([1.0, 0.0, 1.0, 1.0])})
    with pytest.raises(ValueError, match=r"joint.origin.*shape \(4, 3\)"):
        sim.parameters({"joint.origin": np.zeros(3)})


def test_centres_of_mass_and_joint_axes_are_design_parameters(models):
    sim = RigidSimulator(models.arm4())
    space = sim.design_space()
    com, axis = space["link.com"], space["joint.axis"]
    assert com.shape == axis.shape == (4, 3)
    assert com.unit == "m" and com.entity == "link" and axis.entity == "joint"
    np.testing.assert_array_equal(com.default_array(), sim.model.link_com)
    np.testing.assert_array_equal(axis.default_array(), sim.model.joint_axis)
    assert np.all(np.isinf(com.lower_array())) and np.all(np.isinf(com.upper_array()))
    np.testing.assert_array_equal(axis.lower_array(), -np.ones((4, 3)))
    np.testing.assert_array_equal(axis.upper_array(), np.ones((4, 3)))
    design = space.defaults()
    moved = sim.parameters(design | {"link.com": sim.model.link_com + 0.01})
    np.testing.assert_array_equal(moved["link_com"], sim.model.link_com + 0.01)
    # a direction of any length is the unit axis it points along; a moved centre of mass
    # changes the motion
    state = sim.initial_state(design)
    action = np.array([0.3, -0.2, 0.1, 0.05])
    unit = sim.step(state, action, design, 0.01)
    longer = sim.step(state, action, design | {"joint.axis": 2.5 * sim.model.joint_axis}, 0.01)
    np.testing.assert_allclose(longer.joint_q, unit.joint_q, rtol=0, atol=1e-14)
    shifted = sim.step(state, action, design | {"link.com": sim.model.link_com + 0.01}, 0.01)
    assert np.abs(shifted.joint_q - unit.joint_q).max() > 1e-6


@pytest.mark.parametrize("bad", [np.zeros(3), np.array([np.nan, 0.0, 1.0])])
def test_a_zero_or_nan_joint_axis_is_refused(models, bad):
    sim = RigidSimulator(models.arm4())
    design = sim.design_space().defaults()
    axes = sim.model.joint_axis.copy()
    axes[1] = bad
    with pytest.raises(ValueError, match=r"joint.axis of joint 'shoulder' is .*finite "
                                         r"nonzero axis direction"):
        sim.parameters(design | {"joint.axis": axes})
    with pytest.raises(ValueError, match="joint.axis of joint 'shoulder'"):
        sim.step(sim.initial_state(design), np.zeros(4), design | {"joint.axis": axes}, 0.01)


def test_a_robot_with_contact_points_gets_contact_parameters(models):
    from sim_rigid.scene import make_simulator

    sim = make_simulator(robot=models.box_description(), obstacles=[{"type": "plane"}],
                         friction=0.3)
    design = sim.design_space().defaults()
    assert set(design) == set(DESIGN_FIELDS)
    assert design["contact.point"].shape == (8, 3) and float(design["contact.friction"]) == 0.3
    params = sim.parameters({**design, "contact.stiffness": np.asarray(5e3)})
    assert float(params["contact_stiffness"]) == 5e3
    assert sim.design_space()["contact.stiffness"].unit == "N/m"


def test_longer_links_swing_slower(models):
    # the design's joint origins are the link lengths the step sees
    sim = RigidSimulator(models.arm4())
    design = sim.design_space().defaults()
    longer = {**design, "joint.origin": design["joint.origin"] * 1.5}
    finals = []
    for current in (design, longer):
        state = sim.initial_state(current)
        for _ in range(10):
            state = sim.step(state, np.zeros(4), current, 0.01)
        finals.append(state.joint_q[1])
    # the shoulder falls from -0.3 rad (up) under gravity, less far with the longer arm
    assert finals[0] > finals[1] > -0.3


def test_the_factory_builds_the_bundled_arm():
    sim = make_simulator(robot="arm4", initial_positions={"elbow": 0.5}, damping=0.2)
    assert sim.action_size == 4 and sim.model.joint_names == ("yaw", "shoulder", "elbow",
                                                               "wrist")
    design = sim.design_space().defaults()
    np.testing.assert_array_equal(design["joint.damping"], np.full(4, 0.2))
    state = sim.initial_state(design)
    assert state.joint_q[2] == 0.5
    for step_index in range(5):
        state = sim.step(state, np.zeros(4), design, 0.01)
        sim.check_state(state, step_index)
    assert int(state.step_count) == 5


def test_wrong_actions_get_clear_errors(models):
    sim = RigidSimulator(models.arm4())
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    with pytest.raises(ValueError, match=r"one value per actuated joint .* shape \(4,\)"):
        sim.step(state, np.zeros(3), design, 0.01)
    with pytest.raises(SimulationError, match="NaN or inf at joint.*elbow"):
        sim.step(state, np.array([0.0, 0.0, np.nan, 0.0]), design, 0.01)


def test_the_action_is_torque_over_gear_and_skips_unactuated_joints(models):
    description = models.mixed_tree_description()
    geared = copy.deepcopy(description)
    geared["joints"][1]["gear"] = 2.0
    geared["joints"][4]["actuated"] = False
    plain, sim = (RigidSimulator(load_description(d)) for d in (description, geared))
    assert (plain.action_size, sim.action_size) == (3, 2)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    # shoulder 0.3 at gear 2 is 0.6 N m; the hinge gets no torque
    expected = plain.step(state, np.array([0.6, -0.2, 0.0]), design, 0.01)
    np.testing.assert_allclose(sim.step(state, np.array([0.3, -0.2]), design, 0.01).joint_q,
                               expected.joint_q, rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="gears scale torque actuation"):
        RigidSimulator(load_description(geared), actuation="position")


def test_unknown_options_are_refused(models):
    with pytest.raises(ValueError, match="actuation"):
        RigidSimulator(models.arm4(), actuation="velocity")
