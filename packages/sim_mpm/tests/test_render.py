"""Video frames: shapes, colors by group / actuation / material, 3D depth order, boundaries."""

import numpy as np
import pytest

from sim_mpm import MPMState
from sim_mpm.options import MPMOptions
from sim_mpm.render import project_points, render_frame
from sim_mpm.scene import build_scene_model

BACKGROUND = np.array([250, 250, 250])


def state_of(model, x=None):
    x = model.particle_rest_x if x is None else x
    n, d = x.shape
    return MPMState(x, np.zeros((n, d)), np.broadcast_to(np.eye(d), (n, d, d)).copy(),
                    np.zeros((n, d, d)))


def pixel_at(frame, model, point):
    (col, row), = project_points(np.asarray([point]), dim=model.dim,
                                 domain_size=model.domain_size, width=frame.shape[1],
                                 height=frame.shape[0])[0]
    return frame[int(row), int(col)].astype(int)


def two_box_model(**options):
    bodies = [{"shape": "box", "lower": [0.2, 0.2], "size": [0.1, 0.1], "actuator": 0},
              {"shape": "box", "lower": [0.5, 0.2], "size": [0.1, 0.1], "youngs_modulus": 30.0}]
    return build_scene_model(MPMOptions(grid_resolution=32, bodies=bodies,
                             actuators=[{"max_stress": 1.0}], **options))


def test_frame_shape_and_group_colors():
    model = two_box_model()
    frame = render_frame(model, state_of(model), width=120, height=90)
    assert frame.shape == (90, 120, 3) and frame.dtype == np.uint8
    left, right = pixel_at(frame, model, [0.25, 0.25]), pixel_at(frame, model, [0.55, 0.25])
    empty = pixel_at(frame, model, [0.5, 0.7])
    np.testing.assert_array_equal(empty, BACKGROUND)
    assert not np.array_equal(left, BACKGROUND) and not np.array_equal(left, right)


def test_y_axis_points_up():
    model = two_box_model(boundaries=[])
    frame = render_frame(model, state_of(model), width=100, height=100)
    rows = np.flatnonzero(np.any(np.abs(frame.astype(int) - BACKGROUND).sum(-1) > 100, axis=1))
    # the boxes span y in [0.2, 0.3]: rows 70..80 of a 100-pixel frame (row 0 at the top)
    assert 65 <= rows.min() and rows.max() <= 82


def test_actuation_colors_follow_the_signal():
    model = two_box_model()
    state = state_of(model)
    contract = render_frame(model, state, width=100, height=100, color_by="actuation",
                            action=np.array([1.0]))
    expand = render_frame(model, state, width=100, height=100, color_by="actuation",
                          action=np.array([-1.0]))
    red, blue = pixel_at(contract, model, [0.25, 0.25]), pixel_at(expand, model, [0.25, 0.25])
    assert red[0] > red[2] + 100 and blue[2] > blue[0] + 100
    np.testing.assert_array_equal(pixel_at(contract, model, [0.55, 0.25]),
                                  pixel_at(expand, model, [0.55, 0.25]))


def test_material_colors_follow_youngs_modulus():
    model = two_box_model()
    frame = render_frame(model, state_of(model), width=100, height=100, color_by="material")
    soft, stiff = pixel_at(frame, model, [0.25, 0.25]), pixel_at(frame, model, [0.55, 0.25])
    assert soft[2] > soft[0] and stiff[0] > stiff[2]
    swapped = render_frame(model, state_of(model), width=100, height=100, color_by="material",
                           youngs_modulus=np.where(model.particle_rest_x[:, 0] < 0.4, 50.0, 1.0))
    np.testing.assert_array_equal(pixel_at(swapped, model, [0.25, 0.25]), stiff)


def test_boundaries_and_terrain_are_drawn():
    model = two_box_model(boundaries=[{"type": "terrain", "heights": [0.1, 0.1, 0.1],
                                       "spacing": 0.5}])
    frame = render_frame(model, state_of(model), width=100, height=100)
    row = int(round(100 * (1 - 0.1)))
    line = frame[row - 2:row + 2, 20:80].astype(int)
    assert np.any(np.abs(line - BACKGROUND).sum(-1) > 200)


def test_3d_nearest_particle_wins():
    bodies = [{"shape": "box", "lower": [0.4, 0.4, 0.2], "size": [0.1, 0.1, 0.1], "group": 0},
              {"shape": "box", "lower": [0.4, 0.4, 0.6], "size": [0.1, 0.1, 0.1], "group": 1}]
    model = build_scene_model(MPMOptions(dim=3, grid_resolution=16, bodies=bodies, boundaries=[]))
    state = state_of(model)
    # Looking along -z (azimuth 0, elevation 0) the box at z = 0.65 (group 1, orange) hides
    # the one at z = 0.25 (group 0, blue); from behind (azimuth 180) it is the other way.
    front = render_frame(model, state, width=80, height=80, azimuth=0.0, elevation=0.0)
    back = render_frame(model, state, width=80, height=80, azimuth=180.0, elevation=0.0)
    (col, row), = project_points(np.array([[0.45, 0.45, 0.65]]), dim=3, domain_size=1.0,
                                 width=80, height=80, azimuth=0.0, elevation=0.0)[0]
    (col_back, _), = project_points(np.array([[0.45, 0.45, 0.65]]), dim=3, domain_size=1.0,
                                    width=80, height=80, azimuth=180.0, elevation=0.0)[0]
    orange, blue = front[int(row), int(col)].astype(int), back[int(row), int(col_back)].astype(int)
    assert orange[0] > orange[2] + 100
    assert blue[2] > blue[0] + 100


def test_bad_arguments():
    model = two_box_model()
    with pytest.raises(ValueError, match="color_by"):
        render_frame(model, state_of(model), width=50, height=50, color_by="rainbow")
    with pytest.raises(ValueError, match="8x8"):
        render_frame(model, state_of(model), width=4, height=50)


def test_walls_are_drawn_as_the_domain_and_their_inner_faces():
    """The domain's edge is outlined and the wall layer (``margin`` cells) shaded, so the
    box a viewer sees is the domain, with the faces where particles stop inside it."""
    model = two_box_model(boundaries=[{"type": "walls", "margin": 3}])  # dx = 1/32
    frame = render_frame(model, state_of(model), width=160, height=100)
    # the domain [0, 1]² is the centered 100-pixel square: columns 30 to 129
    outline, wall, inside = frame[50, 30], pixel_at(frame, model, [0.05, 0.5]), \
        pixel_at(frame, model, [0.12, 0.5])
    assert np.abs(outline.astype(int) - BACKGROUND).sum() > 300  # the domain's edge
    assert 0 < np.abs(wall.astype(int) - BACKGROUND).sum() < 150  # the shaded wall layer
    np.testing.assert_array_equal(inside, BACKGROUND)  # free space inside the inner faces
    np.testing.assert_array_equal(frame[50, 10], BACKGROUND)  # outside the domain
    (col, _), = project_points(np.array([[3 / 32, 0.5]]), dim=2, domain_size=1.0, width=160,
                               height=100)[0]
    assert np.abs(frame[50, int(round(col))].astype(int) - BACKGROUND).sum() > 100  # inner face


def test_3d_walls_outline_the_domain_cube():
    bodies = [{"shape": "box", "lower": [0.4, 0.4, 0.4], "size": [0.1, 0.1, 0.1]}]
    model = build_scene_model(MPMOptions(dim=3, grid_resolution=16, bodies=bodies,
                                         boundaries=[{"type": "walls", "margin": 2}]))
    frame = render_frame(model, state_of(model), width=80, height=80)
    for corner in ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]):
        (col, row), = project_points(np.array([corner]), dim=3, domain_size=1.0, width=80,
                                     height=80)[0]
        patch = frame[int(row) - 1:int(row) + 2, int(col) - 1:int(col) + 2].astype(int)
        assert np.any(np.abs(patch - BACKGROUND).sum(-1) > 300), corner
