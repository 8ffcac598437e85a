"""The free-form gripper (sim_rigid.freeform, sim_rigid.gripper_scene, sim_rigid.gripper):
the cube fingers' cages and their fabrication constraints, the layers' gradients, the
diamond, the scene and its predefined motion, the design gradient of an episode with
contact through the cage handles, the success-rate metric, and the errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codesign.plugins import get_registry
from codesign.runs import run_experiment
from codesign.testing import gradcheck
from codesign.tree import tree_vdot, tree_zeros_with
from sim_rigid import freeform as ff
from sim_rigid.cage_design import CageDesignError, CageSimulator
from sim_rigid.gripper import gripper_metric, held, start_poses
from sim_rigid.gripper_scene import (
    GraspLiftShake,
    diamond_mesh,
    grasp_schedule,
    gripper_description,
)
from sim_rigid.mesh_properties import mass_properties
from sim_rigid.scene import SceneError, make_simulator
from sim_rigid.sdf import closed_mesh_problem
from sim_rigid.terms import TouchPoint

EXAMPLE = Path(__file__).parents[1] / "src" / "sim_rigid" / "examples" / "freeform_gripper.yaml"

# a small gripper (mesh cut 2 x 2 x 2, cage 2 x 2 x 2: 6 inner handles per finger) whose
# fingers start pressed into the diamond, so that a few steps have contact
SMALL = {"fingers": {"divisions": 2, "cage_divisions": 2}, "diamond": {"resolution": 12}}
CONTACT = dict(obstacles=[{"type": "plane"}], actuation="position", servo_stiffness=1000.0,
               servo_damping=20.0, contact_stiffness=2000.0, contact_damping=100.0,
               friction=0.5, friction_stiffness=5.0, friction_sharpness=2.0)


def _moved(gripper, seed, spread=0.3):
    """θ (2 k 3,) within a fraction ``spread`` of the bounds, so the cages are not cubes."""
    rng = np.random.default_rng(seed)
    return np.concatenate([spread * rng.uniform(low, high).reshape(-1)
                           for low, high in zip(gripper.lower, gripper.upper, strict=True)])


def test_the_fingers_inner_handles_are_the_design():
    gripper = ff.freeform_gripper()
    cage_half = 1.15 * 0.02
    assert gripper.handle_count == 20     # a 5 x 5 inner side without its top row
    for k, inner in enumerate((-1.0, 1.0)):   # the left finger's inner side faces -y
        free = gripper.rest_handles[k][gripper.free_handles[k]]
        np.testing.assert_allclose(free[:, 1], inner * cage_half)
        assert free[:, 2].max() < cage_half - 1e-9
        pads = ff.finger_meshes(gripper, np.zeros(120))[k][gripper.contact_vertices[k]]
        assert len(pads) == 49
        np.testing.assert_allclose(pads[:, 1], inner * 0.02)
    # the bounds: 12 mm along y, 45 % of the 11.5 mm cell along x and z
    np.testing.assert_allclose(gripper.upper[0][0], [0.45 * 2 * cage_half / 4, 0.012,
                                                     0.45 * 2 * cage_half / 4])
    space = {p.name: p for p in ff.handle_parameters(gripper)}
    assert list(space) == ["handles.left_finger", "handles.right_finger"]
    assert space["handles.left_finger"].shape == (20, 3)
    # θ = 0 is the cubes: 4 cm of 500 kg/m^3, the contact points on the inner sides
    rest = ff.design(gripper, np.zeros(120))
    np.testing.assert_allclose(rest["link.mass"], [0.032, 0.032], rtol=1e-12)
    np.testing.assert_allclose(rest["link.inertia"][0], 0.032 * 0.04 ** 2 / 6 * np.eye(3),
                               atol=1e-15)


def test_a_handle_moves_only_the_inner_side_near_it():
    gripper = ff.freeform_gripper()
    theta = np.zeros((2, 20, 3))
    bottom = np.flatnonzero(gripper.rest_handles[0][gripper.free_handles[0], 2] < 0)
    theta[0, bottom, 1] = -0.01          # the left finger's lower inner handles inwards
    moved = ff.finger_meshes(gripper, theta.reshape(-1))
    rest = ff.finger_meshes(gripper, np.zeros(120))
    np.testing.assert_array_equal(moved[1], rest[1])
    shift = moved[0] - rest[0]
    pad = gripper.contact_vertices[0]
    low_pad = pad[rest[0][pad, 2] < -0.015]
    top_back = np.flatnonzero((rest[0][:, 2] > 0.019) & (rest[0][:, 1] > 0.019))
    assert shift[low_pad, 1].max() < -2e-3          # the pad's bottom bulges inwards
    assert np.abs(shift[top_back]).max() < 1e-4     # the mounted top's back barely moves


def test_the_layers_gradients_match_central_differences():
    gripper = ff.freeform_gripper(divisions=3, cage_divisions=2)
    theta = _moved(gripper, 0)
    rng = np.random.default_rng(1)
    shapes = {k: v.shape for k, v in ff.design(gripper, theta).items()}
    weights = {k: rng.normal(size=s) for k, s in shapes.items()}

    def loss(x):
        out = ff.design(gripper, x["theta"])
        return sum(float(np.sum(out[k] * weights[k])) for k in out)

    analytic = ff.design_vjp(gripper, theta, weights)
    gradcheck(loss, {"theta": theta}, {"theta": analytic}, eps=1e-6, relative_step=False,
              directions=4).assert_ok()
    jacobian = ff.design_jacobian(gripper, theta)
    np.testing.assert_allclose(sum(jacobian[k].T @ weights[k].reshape(-1) for k in weights),
                               analytic, rtol=1e-12, atol=1e-15)


def test_the_diamond_is_a_closed_gem_on_its_table():
    vertices, faces = diamond_mesh()
    assert closed_mesh_problem(vertices, faces) is None
    assert vertices[:, 2].min() == pytest.approx(-0.025)
    assert vertices[:, 2].max() == pytest.approx(0.025)
    # a side of the girdle faces each finger: its middle at the apothem on the y axis
    girdle = vertices[8:16]
    assert girdle[:, 1].max() == pytest.approx(0.022 * np.cos(np.pi / 8))
    # a frustum of octagons (area 2 sqrt(2) R^2) under a pyramid
    girdle_area, table_area = 2 * np.sqrt(2) * 0.022 ** 2, 2 * np.sqrt(2) * 0.013 ** 2
    volume = 0.025 / 3 * (girdle_area + table_area + np.sqrt(girdle_area * table_area)) \
        + 0.025 / 3 * girdle_area
    assert mass_properties(vertices, faces, 500.0)["mass"] == pytest.approx(500 * volume,
                                                                            rel=1e-12)
    with pytest.raises(ValueError, match="sides >= 3"):
        diamond_mesh(sides=2)
    with pytest.raises(ValueError, match="diamond sizes must be positive"):
        diamond_mesh(radius=-0.01)


def test_the_scene_builds_as_the_example_and_the_motion_is_the_papers():
    sim = make_simulator(robot={"gripper": {}}, design_space="cage", **CONTACT)
    assert isinstance(sim, CageSimulator)
    model = sim.model
    assert model.coordinate_names == ("shake", "diamond.x", "diamond.y", "diamond.z",
                                      "diamond.rz", "diamond.ry", "diamond.rx", "lift",
                                      "left_slide", "right_slide")
    assert sim.action_size == 4 and len(model.contact_link) == 2 * 49 + 16
    space = sim.design_space()
    assert space.names[:2] == ["handles.left_finger", "handles.right_finger"]
    assert "contact.point" not in space.names
    # the diamond stands on the floor, the cubes' bottoms 1 mm above its girdle
    frames = sim.inner.parameters(sim.expand(space.defaults()))["joint_origin"]
    assert frames[model.link_names.index("diamond")][2] == pytest.approx(0.025)
    assert frames[model.link_names.index("palm_x")][2] == pytest.approx(0.025 + 0.021 + 0.04)
    # the controller: close, lift, shake, in the action's order
    controller = GraspLiftShake(simulator=sim, observation_size=0, action_size=4,
                                control_steps=400, control_dt=5e-3)
    table = controller.parameter_space().defaults()["table"]
    times = 5e-3 * np.arange(1, 401)
    np.testing.assert_allclose(table, grasp_schedule(times))
    assert table[79, 2] == pytest.approx(0.016) and table[79, 1] == 0.0   # closed at 0.4 s
    assert table[199, 1] == pytest.approx(0.05) and table[199, 0] == 0.0  # lifted at 1 s
    np.testing.assert_allclose(table[249, [0, 1]], [0.0, 0.05], atol=1e-12)  # a period later
    assert table[:, 0].max() == pytest.approx(0.015, rel=1e-3)


def test_the_design_gradient_of_an_episode_with_contact_reaches_the_handles():
    sim = make_simulator(robot={"gripper": SMALL}, design_space="cage",
                         initial_positions={"left_slide": 0.0125, "right_slide": 0.0125},
                         **CONTACT)
    names = sim.finger.parameter_names
    design = sim.design_space().defaults()
    theta = _moved(sim.finger, 2).reshape(2, -1, 3)
    design |= {name: theta[k] for k, name in enumerate(names)}
    action, dt, steps = np.array([0.0, 0.0, 0.014, 0.014]), 5e-3, 3
    state = sim.initial_state(design)
    trajectory = [state]
    for _ in range(steps):
        trajectory.append(sim.step(trajectory[-1], action, design, dt))
    final = trajectory.pop()
    rng = np.random.default_rng(3)
    weights = tree_zeros_with(final, **{f: rng.normal(size=np.shape(getattr(final, f)))
                                        for f in ("joint_q", "joint_qd")})
    g_state, g_theta, pressed = weights, {name: 0.0 for name in names}, 0.0
    for before in reversed(trajectory):
        inner = sim.inner.step_vjp(before, action, sim.expand(design), dt, g_state)[2]
        pressed = max(pressed, float(np.abs(inner["contact.point"]).max()))
        g_state, _, g_step = sim.step_vjp(before, action, design, dt, g_state)
        g_theta = {name: g_theta[name] + g_step[name] for name in names}
    assert pressed > 0          # the pads press the diamond

    def loss(x):
        s = state
        for _ in range(steps):
            s = sim.step(s, action, design | x["theta"], dt)
        return tree_vdot(s, weights)

    gradcheck(loss, {"theta": {name: design[name] for name in names}}, {"theta": g_theta},
              eps=1e-7, relative_step=False, directions=3, tolerance=1e-6).assert_ok()


def test_success_counts_a_diamond_carried_with_the_palm():
    sim = make_simulator(robot={"gripper": SMALL}, design_space="cage", **CONTACT)
    model = sim.model
    poses = start_poses(model, 4, shift=0.004, turn=0.2, seed=1)
    np.testing.assert_array_equal(poses[0], model.joint_rest)
    moved = poses[1:] - poses[0]
    assert np.abs(moved[:, 1:3]).max() <= 0.004 and np.abs(moved[:, 4]).max() <= 0.2
    assert np.count_nonzero(moved[:, [0, 3, 5, 6, 7, 8, 9]]) == 0
    term = TouchPoint(simulator=sim, link="diamond", target_link="palm",
                      target_point=[0.0, 0.0, -0.061], dt=5e-3, substeps=1)
    design = sim.design_space().defaults()
    # the palm rises by 2 cm in 4 steps with the fingers open: the diamond stays behind
    lift = np.array([[0.0, 0.02, 0.0, 0.0]] * 4)
    ok, drift = held(term, sim, design, lift, poses[1], substeps=1, dt=5e-3)
    assert not ok and drift > 0.01
    ok, drift = held(term, sim, design, np.zeros((4, 4)), poses[1], substeps=1, dt=5e-3)
    assert ok and drift < 1e-3
    # a diamond that rises against the palm (here the palm sinks past it) is not a drop
    sink = np.array([[0.0, -0.02, 0.0, 0.0]] * 4)
    ok, drift = held(term, sim, design, sink, poses[1], substeps=1, dt=5e-3)
    assert ok and drift < 1e-3
    with pytest.raises(ValueError, match="count must be an integer >= 1"):
        start_poses(model, 0)
    with pytest.raises(ValueError, match="perturbs the diamond"):
        start_poses(make_simulator(robot="arm4").model, 2)


def test_the_metric_replays_a_run(tmp_path):
    run_experiment(EXAMPLE, get_registry(), out=tmp_path / "run",
                   settings={"run.steps": 3, "optimizer.iterations": 1,
                             "simulator.options.robot.gripper.fingers.divisions": 2,
                             "simulator.options.robot.gripper.fingers.cage_divisions": 2})
    metric = gripper_metric(tmp_path / "run", starts=2, tolerance=0.01)
    for key in ("initial", "final"):
        assert metric[key]["starts"] == 2 and metric[key]["successes"] == 2
        assert len(metric[key]["drift"]) == 2


def test_bad_inputs_name_the_fix():
    gripper = ff.freeform_gripper()
    with pytest.raises(ValueError, match=r"holds 20 handle displacements .* got shape \(60,\)"):
        ff.design(gripper, np.zeros(60))
    with pytest.raises(ValueError, match="must be finite"):
        ff.design(gripper, np.full(120, np.nan))
    with pytest.raises(ValueError, match="cage_margin must be > 1"):
        ff.freeform_gripper(cage_margin=1.0)
    with pytest.raises(ValueError, match="cage_divisions must be an integer >= 1"):
        ff.freeform_gripper(cage_divisions=0)
    with pytest.raises(ValueError, match="they would overlap"):
        ff.freeform_gripper(opening=0.01)
    with pytest.raises(ValueError, match=r"unknown keys \['palm', 'diamond.colour'\]"):
        gripper_description({"palm": 1, "diamond": {"colour": "red"}})
    with pytest.raises(SceneError, match="robot.gripper.fingers: .* unexpected keyword"):
        make_simulator(robot={"gripper": {"fingers": {"handles": 66}}}, design_space="cage")
    with pytest.raises(SceneError, match=r"remove the keys \['links'\]"):
        make_simulator(robot={"gripper": {}, "links": []})
    # a design of the wrong handle count, and a model built at another θ
    sim = make_simulator(robot={"gripper": SMALL}, design_space="cage", **CONTACT)
    with pytest.raises(CageDesignError, match=r"'handles.left_finger' has shape \(20, 3\); "
                                              r"it holds \(6, 3\)"):
        sim.step(sim.initial_state(sim.design_space().defaults()), np.zeros(4),
                 {"handles.left_finger": np.zeros((20, 3))}, 5e-3)
    gripper = sim.finger
    built = make_simulator(robot=gripper_description(SMALL, gripper, _moved(gripper, 4)),
                           **CONTACT)
    with pytest.raises(CageDesignError, match="not the cage-built finger at its rest shape"):
        CageSimulator(built, gripper, design=ff.design, design_jacobian=ff.design_jacobian,
                      parameters=ff.handle_parameters(gripper))
    with pytest.raises(CageDesignError, match="no links"):
        CageSimulator(make_simulator(robot="arm4"), gripper, design=ff.design,
                      design_jacobian=ff.design_jacobian,
                      parameters=ff.handle_parameters(gripper))
    with pytest.raises(ValueError, match="grasp_lift_shake drives the joints"):
        GraspLiftShake(simulator=make_simulator(robot="arm4"), observation_size=0,
                       action_size=4, control_steps=2, control_dt=0.01)
    with pytest.raises(ValueError, match="set actuation: position"):
        GraspLiftShake(simulator=make_simulator(robot={"gripper": SMALL}),
                       observation_size=0, action_size=4, control_steps=2, control_dt=0.01)
