"""Co-design through the cage parameters θ (sim_rigid.cage_design): the wrapper's design
space, its expansion into the simulator's design, gradients from steps with contact and from
the task terms back to θ, the core's conformance suite, and the errors of the option
``design_space: cage``."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck, run_conformance
from codesign.tree import tree_vdot, tree_zeros_with
from sim_rigid import morphology as mo
from sim_rigid.cage_design import FABRICATION_LIMITS, CageDesignError, CageSimulator
from sim_rigid.scene import SceneError, make_simulator
from sim_rigid.simulator import RigidSimulator
from sim_rigid.terms import ReachTargets, TouchPoint

SET_BY_THETA = {"link.mass", "link.com", "link.inertia", "joint.origin", "contact.point"}

# a finger riding a carriage beside a hinged box (Flip Box's scene, smaller): the finger's
# links are not the model's first ones, and the box's contact points are not the finger's
CARRIAGE_SCENE = {
    "finger": {"phalanges": 2, "parent": "carriage", "mount": [0.0, 0.0, 0.0],
               "initial": [0.2, 0.3]},
    "links": [{"name": "carriage", "mass": 0.01, "inertia": [1e-6, 1e-6, 1e-6]},
              {"name": "box", "mass": 0.2, "com": [0.03, 0, 0.03],
               "inertia": [1e-4, 1e-4, 1e-4], "contacts": [[0.06, 0.0, 0.0]],
               "shapes": [{"type": "box", "center": [0.03, 0, 0.03],
                           "half_extents": [0.03, 0.03, 0.03]}]}],
    "joints": [{"name": "hinge", "type": "revolute", "parent": "world", "child": "box",
                "origin": [0.3, 0.0, 0.0], "axis": [0, -1, 0], "actuated": False},
               {"name": "slide", "type": "prismatic", "parent": "world", "child": "carriage",
                "origin": [0.0, 0.0, 0.1], "axis": [1, 0, 0], "damping": 1.0}],
}


def _moved(sim, seed, spread=0.02):
    """The defaults with θ moved by up to ``spread`` (relative), so the cages are not
    boxes."""
    design = sim.design_space().defaults()
    rng = np.random.default_rng(seed)
    for name in sim.finger.parameter_names:
        design[name] = design[name] * (1 + spread * rng.uniform(-1, 1))
    return design


@pytest.fixture(scope="module")
def pressing():
    """A two-phalanx finger whose pads press into a floor (the rest pose sinks them),
    tilted so that the base's length matters, with friction that sticks."""
    return make_simulator(robot={"finger": {"phalanges": 2, "initial": [0.2, 0.3]}},
                          design_space="cage",
                          obstacles=[{"type": "plane", "point": [0.05, 0, 0.093],
                                      "normal": [0.1, 0.0, 1.0]}],
                          contact_stiffness=300.0, contact_damping=100.0, friction=1.0,
                          friction_stiffness=20.0)


@pytest.fixture(scope="module")
def carriage():
    """The carriage scene without a floor: smooth motion (contact is the other
    fixture's)."""
    return make_simulator(robot=CARRIAGE_SCENE, design_space="cage")


def test_the_design_space_holds_theta_and_what_theta_does_not_set(pressing):
    space = pressing.design_space()
    finger = pressing.finger
    wrapped = pressing.inner.design_space()
    assert space.names[:len(finger.parameter_names)] == list(finger.parameter_names)
    assert space.names[len(finger.parameter_names):] == [
        name for name in wrapped.names if name not in SET_BY_THETA]
    assert finger.parameter_names[-1] == "height.tip"
    for name, default in zip(finger.parameter_names, finger.parameter_defaults, strict=True):
        parameter = space[name]
        assert parameter.shape == () and parameter.unit == "m"
        assert float(parameter.default_array()) == default
        assert (float(parameter.lower_array()), float(parameter.upper_array())) == \
            FABRICATION_LIMITS


def test_the_expansion_sets_the_fingers_rows_and_keeps_the_others(carriage):
    model = carriage.model
    base = carriage.inner.design_space().defaults()
    at_rest = carriage.expand(carriage.design_space().defaults())
    for name in SET_BY_THETA:
        np.testing.assert_array_equal(at_rest[name], base[name])
    design = _moved(carriage, 0, spread=0.2)
    theta = carriage.cage_parameters(design)
    expanded = carriage.expand(design)
    finger = mo.design(carriage.finger, theta)
    links = [model.link_names.index(name) for name in carriage.finger.link_names]
    others = [k for k in range(model.link_count) if k not in links]
    for name in ("link.mass", "link.com", "link.inertia", "joint.origin"):
        np.testing.assert_array_equal(expanded[name][links], finger[name])
        np.testing.assert_array_equal(expanded[name][others], base[name][others])
    # the deformed centres of mass: a phalanx grown by 2 cm moves its centre 1 cm out
    defaults = carriage.design_space().defaults()
    longer = carriage.expand(defaults | {"length.phalanx1": defaults["length.phalanx1"] + 0.02})
    phalanx = model.link_names.index("phalanx1")
    np.testing.assert_allclose(longer["link.com"][phalanx, 0] - at_rest["link.com"][phalanx, 0],
                               0.01, rtol=1e-9)
    box_point = model.contact_link == model.link_names.index("box")
    np.testing.assert_array_equal(expanded["contact.point"][~box_point],
                                  finger["contact.point"])
    np.testing.assert_array_equal(expanded["contact.point"][box_point],
                                  base["contact.point"][box_point])
    # the other parameters pass through, and a new θ is not served the last one's design
    assert expanded["joint.damping"] is design["joint.damping"]
    again = carriage.expand(carriage.design_space().defaults())
    np.testing.assert_array_equal(again["link.mass"], base["link.mass"])


def test_step_gradients_reach_theta_through_contact(pressing):
    design = _moved(pressing, 3)
    state = pressing.initial_state(design)
    action, dt, steps = np.array([0.01, -0.005]), 2e-3, 4
    trajectory = [state]
    for _ in range(steps):
        trajectory.append(pressing.step(trajectory[-1], action, design, dt))
    final = trajectory.pop()
    rng = np.random.default_rng(4)
    weights = tree_zeros_with(final, **{f: rng.normal(size=np.shape(getattr(final, f)))
                                        for f in ("joint_q", "joint_qd", "joint_q_prev",
                                                  "joint_qd_prev")})
    g_state, g_theta = weights, {}
    inner_contact = 0.0
    for before in reversed(trajectory):
        expanded = pressing.expand(design)
        inner = pressing.inner.step_vjp(before, action, expanded, dt, g_state)[2]
        inner_contact = max(inner_contact, float(np.abs(inner["contact.point"]).max()))
        g_state, _, g_step = pressing.step_vjp(before, action, design, dt, g_state)
        g_theta = {k: g_theta.get(k, 0.0) + g_step[k] for k in pressing.finger.parameter_names}
    assert inner_contact > 0  # the pads touch the floor
    assert SET_BY_THETA.isdisjoint(g_step)

    def loss(x):
        s = state
        for _ in range(steps):
            s = pressing.step(s, action, design | x["theta"], dt)
        return tree_vdot(s, weights)
    theta = {k: design[k] for k in pressing.finger.parameter_names}
    gradcheck(loss, {"theta": theta}, {"theta": g_theta}, eps=1e-6, relative_step=False,
              directions=3).assert_ok()


def test_conformance_with_contact(pressing):
    design = _moved(pressing, 5)
    run_conformance(pressing, dt=2e-3, action=np.array([0.01, -0.005]), design=design,
                    steps=(1, 3), rollout_steps=2, substeps=2)


def test_the_conformance_of_a_finger_beside_other_links(carriage):
    # without the contact law's coefficients (nothing touches here; the other fixture checks
    # them): their default 1e4 N/m would set the finite-difference step of the whole design
    design = {k: v for k, v in _moved(carriage, 6).items() if not k.startswith("contact.")}
    run_conformance(carriage, dt=5e-3, action=np.array([0.5, 0.01, -0.01]), design=design,
                    steps=(2,), rollout_steps=2, substeps=2)


def test_task_terms_differentiate_with_respect_to_theta(carriage):
    design = _moved(carriage, 7, spread=0.1)
    rng = np.random.default_rng(8)
    state = carriage.initial_state(design)
    state = tree_zeros_with(state, joint_q=rng.uniform(-0.3, 0.3, state.joint_q.shape))
    terms = [ReachTargets(simulator=carriage, targets=[[0.15, 0.0, 0.1]], start_times=[0.0],
                          point=[0.025, 0.0, 0.0], dt=0.01, substeps=2),
             TouchPoint(simulator=carriage, target_link="box", target_point=[0.06, 0, 0.04],
                        point=[0.025, 0.0, -0.0075], dt=0.01, substeps=2)]
    theta = {k: design[k] for k in carriage.finger.parameter_names}
    for term in terms:
        _, _, g_design = term.grad(state, None, design, 3)
        # θ's, and the joint axes' that θ does not set
        assert set(g_design) == set(theta) | {"joint.axis"}
        gradcheck(lambda x, term=term: term.value(state, None, design | x["theta"], 3),
                  {"theta": theta}, {"theta": {k: g_design[k] for k in theta}}, eps=1e-6,
                  relative_step=False).assert_ok()


def test_design_space_cage_needs_a_cage_built_finger():
    with pytest.raises(SceneError, match=r"design_space: cage .* robot is arm4; give robot: "
                                         r"\{finger:"):
        make_simulator(robot="arm4", design_space="cage")
    built = make_simulator(robot={"finger": {"phalanges": 2, "phalanx_length": 0.05}})
    with pytest.raises(CageDesignError, match="not the cage-built finger at its rest shape"):
        CageSimulator(built, mo.assemble_finger(2))
    with pytest.raises(CageDesignError, match=r"no links \['phalanx3'\]"):
        CageSimulator(built, mo.assemble_finger(3))
    assert isinstance(make_simulator(robot={"finger": {"phalanges": 2}}), RigidSimulator)


def test_the_finger_options_give_the_cage_parameters_their_defaults():
    sim = make_simulator(robot={"finger": {"phalanges": 2, "phalanx_length": 0.05,
                                           "damping": 0.02, "gear": 0.1}},
                         design_space="cage")
    design = sim.design_space().defaults()
    assert float(design["length.phalanx2"]) == 0.05
    np.testing.assert_array_equal(design["joint.damping"], [0.02, 0.02])
    with pytest.raises(SceneError, match="robot.finger: .* unexpected keyword"):
        make_simulator(robot={"finger": {"phalanges": 2, "knuckles": 1}}, design_space="cage")
