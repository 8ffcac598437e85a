"""Contact between dynamic bodies: points on one link against shapes fixed on another,
forces equal and opposite, the compiled path equal to the reference, gradients (with the
contact areas) against central differences, the conformance suite, and bad inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.testing import gradcheck, run_conformance
from codesign.tree import tree_vdot
from sim_rigid import RigidState, dynamics, kernels
from sim_rigid.contact import COEFFICIENTS
from sim_rigid.description import DescriptionError, load_description
from sim_rigid.scene import make_simulator
from sim_rigid.step import step, step_vjp


def pusher_and_block(shape: dict, *, block_joint: str = "revolute") -> dict:
    """A pusher on a prismatic joint along x carrying ``shape``, and a block beside it (on a
    revolute joint about z at x = 0.25 m, or a prismatic one along x) with two contact
    points about 1 cm inside the shape, areas 0.5 and 2; horizontal joints, so gravity does
    no work."""
    block = {"name": "slide", "type": "revolute", "parent": "world", "child": "block",
             "origin": [0.25, 0.0, 0.0], "axis": [0, 0, 1], "initial": 0.05}
    if block_joint == "prismatic":
        block.update(type="prismatic", axis=[1, 0, 0], initial=0.0)
    return {"links": [
        {"name": "pusher", "mass": 1.0, "inertia": [1e-3] * 3, "shapes": [shape]},
        {"name": "block", "mass": 0.5, "inertia": [2e-3, 2e-3, 2e-3],
         "contacts": [{"point": [-0.16, 0.02, 0.0], "area": 0.5},
                      {"point": [-0.16, -0.03, 0.01], "area": 2.0}]}],
        "joints": [{"name": "push", "type": "prismatic", "parent": "world", "child": "pusher",
                    "axis": [1, 0, 0], "initial": 0.0}, block]}


SPHERE = {"type": "sphere", "center": [0.0, 0.0, 0.0], "radius": 0.1}
CAPSULE = {"type": "capsule", "center": [0.0, 0.0, 0.0], "rpy": [0.3, 0.0, 0.0],
           "radius": 0.1, "half_length": 0.2}


def mesh_shape(models) -> dict:
    """A 0.2 x 0.2 x 0.3 m cuboid as a mesh shape, slightly turned."""
    vertices, faces = models.cuboid_mesh((0.1, 0.1, 0.15))
    return {"type": "mesh", "center": [-0.01, 0.0, 0.0], "rpy": [0.0, 0.0, 0.1],
            "vertices": vertices.tolist(), "faces": faces.tolist(), "resolution": 24}


def _shape(name, models):
    return {"sphere": SPHERE, "capsule": CAPSULE}.get(name) or mesh_shape(models)
COEFFICIENT_VALUES = {"contact_stiffness": 1e3, "contact_damping": 1e3, "friction": 0.3,
                      "friction_stiffness": 20.0}


def _model(shape, **options):
    return dataclasses.replace(load_description(pusher_and_block(shape, **options)),
                               **COEFFICIENT_VALUES)


def test_the_forces_on_the_two_bodies_are_equal_and_opposite():
    model = _model(SPHERE, block_joint="prismatic")
    tau = dynamics.inverse_dynamics(model, model.parameters(), np.zeros(2), np.zeros(2),
                                    np.zeros(2))
    # both joints slide along x; the sphere pushes the block to +x, so -Jᵀ f is -f_x on
    # the block and +f_x on the pusher
    assert tau[0] > 1.0 and tau[0] == pytest.approx(-tau[1], rel=1e-12)
    pushed = _model({**SPHERE, "center": [0.5, 0.0, 0.0]}, block_joint="prismatic")
    np.testing.assert_array_equal(dynamics.inverse_dynamics(
        pushed, pushed.parameters(), np.zeros(2), np.zeros(2), np.zeros(2)), 0.0)


def test_forces_scale_with_the_contact_areas():
    model = _model(SPHERE, block_joint="prismatic")
    params = model.parameters()
    tau = dynamics.inverse_dynamics(model, params, np.zeros(2), np.zeros(2), np.zeros(2))
    doubled = dynamics.inverse_dynamics(model, params | {"contact_area": 2 * params[
        "contact_area"]}, np.zeros(2), np.zeros(2), np.zeros(2))
    np.testing.assert_allclose(doubled, 2 * tau, rtol=1e-12)


@pytest.mark.parametrize("shape", ["sphere", "capsule", "mesh"])
def test_compiled_body_contact_and_its_tangents_equal_the_reference(models, shape):
    model = _model(_shape(shape, models))
    params = model.parameters()
    q, qd = np.array([0.01, 0.05]), np.array([0.3, -0.8])  # sliding: both friction terms
    rng = np.random.default_rng(3)
    tangents = {"q": rng.standard_normal((5, 2)), "qd": rng.standard_normal((5, 2)),
                "joint_origin": rng.standard_normal((5, 2, 3)),
                "contact_point": rng.standard_normal((5, 2, 3)),
                "contact_area": rng.standard_normal((5, 2))} | {
        name: rng.standard_normal(5) for name in COEFFICIENTS}
    expected = dynamics.inverse_dynamics_tangents(model, params, q, qd, np.zeros(2),
                                                  tangents=tangents)
    got = kernels.inverse_dynamics_tangents(model, params, q, qd, np.zeros(2),
                                            tangents=tangents)
    assert np.abs(expected[0]).max() > 1.0  # the contact acts
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("shape", ["sphere", "capsule", "mesh"])
def test_gradients_through_contact_between_bodies(models, shape):
    model = _model(_shape(shape, models))
    params = model.parameters()
    q = np.array([0.01, 0.05])
    velocity = np.array([0.2, -0.5])
    state = RigidState(q, velocity, q - 1e-3 * velocity, velocity, np.asarray(0, np.int64))
    fields = ("joint_q", "joint_qd", "joint_q_prev", "joint_qd_prev")
    steps, dt = 3, 1e-3
    trajectory = [state]
    for _ in range(steps):
        trajectory.append(step(model, trajectory[-1], np.zeros(2), params, dt))
    trajectory.pop()
    rng = np.random.default_rng(1)
    weights = RigidState(*(rng.standard_normal(2) for _ in fields), np.asarray(0, np.int64))

    def loss(inputs):
        current = RigidState(*(inputs["state"][f] for f in fields), state.step_count)
        merged = params | {k: v for k, v in inputs.items() if k in params}
        for _ in range(steps):
            current = step(model, current, np.zeros(2), merged, dt)
        return tree_vdot(current, weights)

    g_state, g_params = weights, {k: 0.0 for k in params}
    for before in reversed(trajectory):
        g_state, _, g_p = step_vjp(model, before, np.zeros(2), params, dt, g_state)
        g_params = {k: g_params[k] + g_p[k] for k in params}
    assert np.abs(g_params["contact_area"]).max() > 0.0
    assert np.abs(g_params["joint_axis"]).max() > 0.0  # the pusher's axis steers the touch
    inputs = {"state": {f: getattr(state, f) for f in fields}} | params
    grads = {"state": {f: getattr(g_state, f) for f in fields}} | g_params
    eps = {"contact_stiffness": 1e-1, "contact_damping": 1e-1, "friction_stiffness": 1e-4}
    for group in inputs:
        gradcheck(loss, inputs, grads, eps=eps.get(group, 1e-7), relative_step=False,
                  groups=[group], directions=2).assert_ok()


@pytest.mark.parametrize("shape", ["sphere", "capsule", "mesh"])
def test_compiled_steps_between_bodies_equal_the_reference(models, shape, paths_agree):
    # the pusher's shape moves into the block's points (torque on both joints), the
    # smooth friction law on
    model = dataclasses.replace(_model(_shape(shape, models)), friction_sharpness=2.0)
    q, velocity = np.array([0.01, 0.05]), np.array([0.2, -0.5])
    state = RigidState(q, velocity, q, velocity, np.asarray(0, np.int64))
    paths_agree(model, state, np.array([1.0, -0.2]), 3, 1e-3)
    paths_agree(model, state, np.array([1.0, -0.2]), 3, 1e-3, params=models.tilted(model, 2))


def test_conformance_of_two_bodies_in_contact():
    sim = make_simulator(robot=pusher_and_block(SPHERE), contact_stiffness=1e3,
                         contact_damping=1e3, friction_stiffness=20.0, friction=0.3)
    # the contact parameters (kn, kd of 1e3) get their own steps in the test above
    design = {name: value for name, value in sim.design_space().defaults().items()
              if not name.startswith("contact.")}
    run_conformance(sim, dt=1e-3, design=design, steps=(1, 4), rollout_steps=3, substeps=2)


def test_a_contact_point_inside_its_own_links_shape_is_refused():
    description = pusher_and_block(SPHERE)
    description["links"][1]["shapes"] = [{"type": "box", "center": [-0.16, 0.0, 0.0],
                                          "half_extents": [0.05, 0.05, 0.05]}]
    with pytest.raises(DescriptionError, match=r"contact point 0 of link 'block' lies 0.03 m "
                                               r"inside its own link's obstacle 1 \(box\)"):
        load_description(description)


@pytest.mark.parametrize(("shape", "message"), [
    ({"type": "sphere", "center": [0, 0, 0], "radius": 0.0},
     r"shapes\[0\] \(sphere\) radius is 0.0: it must be a number > 0"),
    ({"type": "capsule", "center": [0, 0, 0], "radius": 0.1, "half_length": -1},
     r"\(capsule\) half_length is -1: it must be a number > 0"),
    ({"type": "mesh", "faces": slice(0, -1)},
     r"\(mesh\): the mesh is not a closed outward triangle mesh"),
    ({"type": "mesh", "resolution": 1}, r"\(mesh\) resolution is 1: an integer >= 2"),
    ({"type": "sphere", "center": [0, 0, 0], "radius": 0.1, "half_extents": [1, 1, 1]},
     r"unknown keys \['half_extents'\]"),
])
def test_bad_shapes_get_clear_errors(models, shape, message):
    if shape["type"] == "mesh":
        mesh = mesh_shape(models)
        shape = mesh | shape | {"faces": mesh["faces"][shape.get("faces", slice(None))]}
    with pytest.raises(DescriptionError, match=message):
        load_description(pusher_and_block(shape))


def test_non_positive_shape_sizes_in_a_model_are_refused():
    model = _model(SPHERE)
    with pytest.raises(ValueError, match=r"obstacle 0 \(sphere\): half extents \[-0.1, -0.1, "
                                         r"-0.1\] m: each must be > 0"):
        dataclasses.replace(model, obstacle_half_extents=-model.obstacle_half_extents)
    with pytest.raises(ValueError, match=r"contact_area\[1\] is 0.0: areas must be > 0"):
        dataclasses.replace(model, contact_area=np.array([1.0, 0.0]))


def test_render_places_link_shapes_and_marks_points_touching_them():
    from sim_rigid.render import contact_points, obstacle_segments

    model = _model(SPHERE, block_joint="prismatic")
    params = model.parameters()
    moved = np.array([0.3, 0.0])  # the pusher 0.3 m along x: past the block's points
    frames = dynamics.link_frames(model, params, moved)
    segments = obstacle_segments(model, frames)
    # the sphere's bounding box, centred on the pusher
    np.testing.assert_allclose(segments.reshape(-1, 3).mean(axis=0), [0.3, 0.0, 0.0],
                               atol=1e-12)
    assert contact_points(model, params, np.zeros(2))[1].all()
    assert not contact_points(model, params, np.array([-0.3, 0.0]))[1].any()
