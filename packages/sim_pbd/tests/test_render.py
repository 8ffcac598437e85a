"""Frames of the robot: size, what is drawn, views."""

from __future__ import annotations

import numpy as np
import pytest

from sim_pbd.options import VIEWS
from sim_pbd.render import PROJECTIONS, end_effector_path, link_polylines, render_frame
from sim_pbd.simulator import PBDSimulator


def test_every_declared_view_has_a_projection():
    assert set(PROJECTIONS) == set(VIEWS)


def test_a_chain_is_drawn_inside_its_window_in_every_view(models):
    model = models.chain(3, length=0.5)
    sim = PBDSimulator(model)
    state = sim.initial_state({})
    params = model.parameters()
    for view in VIEWS:
        image = render_frame(model, state, params=params, width=120, height=100, view=view,
                             window=(-2.0, 2.0, -2.0, 2.0))
        assert image.shape == (100, 120, 3) and image.dtype == np.uint8
        drawn = np.any(image < 200, axis=2)
        assert drawn.any() and not drawn[0].any() and not drawn[-1].any()


def test_each_link_passes_through_its_joints(models):
    model = models.chain(3, length=0.5)
    state = PBDSimulator(model).initial_state({})
    polylines = link_polylines(model, state, model.parameters())
    assert [len(p) for p in polylines] == [2, 2, 2]  # two joints, two joints, joint + COM
    np.testing.assert_allclose(polylines[0][1], polylines[1][0], atol=1e-12)


def test_a_trace_is_drawn_and_bad_sizes_refused(models):
    model = models.chain(2)
    state = PBDSimulator(model).initial_state({})
    params = model.parameters()
    window = (-3.0, 3.0, -3.0, 3.0)
    plain = render_frame(model, state, params=params, width=64, height=64, window=window)
    trace = np.array([[2.0, 0.0, 2.0], [2.5, 0.0, 2.5]])
    traced = render_frame(model, state, params=params, width=64, height=64, window=window,
                          view="side", trace=trace)
    assert not np.array_equal(plain, traced)
    with pytest.raises(ValueError, match="at least 16"):
        render_frame(model, state, params=params, width=8, height=64)
    with pytest.raises(ValueError, match="unknown view"):
        render_frame(model, state, params=params, width=64, height=64, view="back")


def test_a_motion_is_drawn_with_the_end_effector_path_behind_it(models):
    model = models.chain(2)
    sim = PBDSimulator(model)
    design = sim.design_space().defaults()
    states = [sim.initial_state(design)]
    for _ in range(30):
        states.append(sim.step(states[-1], np.full(sim.action_size, 5.0), design, 0.01))
    params = model.parameters()
    path = end_effector_path(model, states, params)
    assert path.shape == (31, 3)
    np.testing.assert_allclose(path[0], link_polylines(model, states[0], params)[-1][-1])
    assert np.linalg.norm(path[-1] - path[0]) > 0.1  # driven by the torques, it swung
    frames = sim.render_sequence(states, design, width=64, height=64, actions=[None] * 31)
    assert len(frames) == 31
    untraced = sim.render(states[-1], design, width=64, height=64)
    assert not np.array_equal(frames[-1], untraced)  # the last frame carries the path
    np.testing.assert_array_equal(frames[0], sim.render(states[0], design, width=64, height=64))
