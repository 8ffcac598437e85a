"""Frames of the robot: size, what is drawn, views."""

from __future__ import annotations

import dataclasses

import numpy as np

from sim_rigid.dynamics import link_frames
from sim_rigid.options import VIEWS
from sim_rigid.render import (
    PROJECTIONS,
    contact_points,
    link_segments,
    obstacle_segments,
    render_frame,
)
from sim_rigid.simulator import RigidSimulator


def test_every_declared_view_has_a_projection():
    assert set(PROJECTIONS) == set(VIEWS)


def test_the_arm_is_drawn_inside_its_window_in_every_view(models):
    model = models.arm4()
    state = RigidSimulator(model).initial_state({})
    for view in VIEWS:
        image = render_frame(model, state, params=model.parameters(), width=120, height=100,
                             view=view, window=(-1.5, 1.5, -1.5, 1.5))
        assert image.shape == (100, 120, 3) and image.dtype == np.uint8
        drawn = np.any(image < 200, axis=2)
        assert drawn.any() and not drawn[0].any() and not drawn[-1].any()


def test_segments_join_the_joints_and_end_at_the_last_centre_of_mass(models):
    model = models.arm4()
    params = model.parameters()
    rotation, origin = link_frames(model, params, model.joint_rest)
    segments = link_segments(model, params, model.joint_rest)
    assert len(segments) == 4
    np.testing.assert_allclose(segments[:3, 0], origin[:3])
    np.testing.assert_allclose(segments[:3, 1], origin[1:])
    np.testing.assert_allclose(segments[3, 1], origin[3] + rotation[3] @ model.link_com[3])
    # each pitch link is as long as the next joint's origin says
    np.testing.assert_allclose(np.linalg.norm(segments[:3, 1] - segments[:3, 0], axis=1),
                               [0.3, 0.25, 0.2])


def test_the_simulator_frames_the_rest_pose(models):
    sim = RigidSimulator(models.mixed_tree(), view="side")
    design = sim.design_space().defaults()
    image = sim.render(sim.initial_state(design), design, width=64, height=48)
    assert image.shape == (48, 64, 3) and np.any(image < 200)


def test_contact_points_and_obstacles_are_drawn(models):
    from sim_rigid.scene import make_simulator

    sim = make_simulator(robot=models.box_description(), view="front",
                         view_window=[-0.5, 0.5, -0.3, 0.7],
                         obstacles=[{"type": "plane"},
                                    {"type": "box", "center": [0, 0.3, 0.1],
                                     "half_extents": [0.1, 0.1, 0.1]}])
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    points, touching = contact_points(sim.model, sim.parameters(design), state.joint_q)
    # the cube rests on its bottom face, exactly on the plane: nothing penetrates yet
    assert points.shape == (8, 3) and not touching.any()
    sunk = dataclasses.replace(state, joint_q=state.joint_q - np.array([0, 0, 0.01, 0, 0, 0]))
    _, touching = contact_points(sim.model, sim.parameters(design), sunk.joint_q)
    assert touching.sum() == 4
    assert len(obstacle_segments(sim.model)) == 2 + 12
    image = sim.render(sunk, design, width=100, height=100)
    red = (image[:, :, 0] > 180) & (image[:, :, 1] < 100)
    assert red.any()


def test_contact_points_are_drawn_where_the_design_puts_them(models):
    from sim_rigid.scene import make_simulator

    sim = make_simulator(robot=models.box_description(), obstacles=[{"type": "plane"}])
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    # the design lowers every corner by 1 cm (a cage design moves the finger's pads so)
    lowered = design | {"contact.point": design["contact.point"] - [0.0, 0.0, 0.01]}
    before, _ = contact_points(sim.model, sim.parameters(design), state.joint_q)
    after, touching = contact_points(sim.model, sim.parameters(lowered), state.joint_q)
    np.testing.assert_allclose(after - before, np.tile([0.0, 0.0, -0.01], (8, 1)), atol=1e-12)
    assert touching.sum() == 4  # the bottom corners now sink into the plane
