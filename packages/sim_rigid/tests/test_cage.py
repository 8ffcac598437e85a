"""Mean value coordinates of closed triangle cages (sim_rigid.cage) and the box meshes that
serve as components and cages (sim_rigid.components)."""

from __future__ import annotations

import numpy as np
import pytest

from sim_rigid.cage import CageError, check_cage, mean_value_coordinates
from sim_rigid.components import box_mesh


def l_shaped_cage():
    """A non-convex cage: the unit cube with a 0.5 x 0.5 notch cut out of one edge (an L
    prism), triangulated by hand, outward."""
    outline = np.array([[0, 0], [1, 0], [1, 0.5], [0.5, 0.5], [0.5, 1], [0, 1]])
    n = len(outline)
    vertices = np.vstack([np.c_[outline, np.zeros(n)], np.c_[outline, np.ones(n)]])
    # the L's bottom (z = 0, seen from below: clockwise) and top, fanned from the notch
    # corner 3, which sees every other corner
    fan = [(3, 4, 5), (3, 5, 0), (3, 0, 1), (3, 1, 2)]
    faces = [(a, c, b) for a, b, c in fan] + [(a + n, b + n, c + n) for a, b, c in fan]
    for k in range(n):
        j = (k + 1) % n
        faces += [(k, j, j + n), (k, j + n, k + n)]
    return vertices, np.array(faces)


def test_box_mesh_is_a_closed_outward_cage():
    vertices, faces = box_mesh([0, -1, -2], [3, 1, 2], (3, 2, 1))
    check_cage(vertices, faces)
    assert len(vertices) == 4 * 3 * 2      # the grid's points: none is interior at nz = 1
    assert len(faces) == 2 * 2 * (3 * 2 + 2 * 1 + 1 * 3)
    assert vertices.min(axis=0) == pytest.approx([0, -1, -2])
    assert vertices.max(axis=0) == pytest.approx([3, 1, 2])
    with pytest.raises(ValueError, match="low < high"):
        box_mesh([0, 0, 0], [1, 0, 1])


@pytest.mark.parametrize("cage", ["box", "l_shape"])
def test_coordinates_reproduce_linear_functions(cage):
    rng = np.random.default_rng(1)
    if cage == "box":
        vertices, faces = box_mesh([-0.3, -0.1, 0.0], [0.5, 0.2, 0.4], (2, 1, 2))
        inside = rng.uniform([-0.3, -0.1, 0.0], [0.5, 0.2, 0.4], (200, 3))
    else:
        vertices, faces = l_shaped_cage()
        inside = rng.uniform(0.0, 1.0, (400, 3))
        inside = inside[(inside[:, 0] < 0.5) | (inside[:, 1] < 0.5)]
    weights = mean_value_coordinates(vertices, faces, inside)
    assert weights.shape == (len(inside), len(vertices))
    assert np.abs(weights.sum(axis=1) - 1.0).max() < 1e-12
    # round-off grows for points near the plane of a face they are outside of (the L's
    # notch planes): 1e-11 seen
    assert np.abs(weights @ vertices - inside).max() < 1e-10
    # any affine function f(x) = A x + b of the cage vertices comes back at the points
    a, b = rng.normal(size=(2, 3)), rng.normal(size=2)
    assert np.abs(weights @ (vertices @ a.T + b) - (inside @ a.T + b)).max() < 1e-10


def test_coordinates_of_cage_vertices_faces_and_edges():
    vertices, faces = l_shaped_cage()
    weights = mean_value_coordinates(vertices, faces, vertices)
    np.testing.assert_allclose(weights, np.eye(len(vertices)), atol=1e-15)
    # on a face: that triangle's barycentric coordinates; on an edge: the edge's
    a, b, c = vertices[faces[3]]
    points = np.array([0.2 * a + 0.3 * b + 0.5 * c, 0.25 * a + 0.75 * b])
    weights = mean_value_coordinates(vertices, faces, points)
    expected = np.zeros((2, len(vertices)))
    expected[0, faces[3]] = [0.2, 0.3, 0.5]
    expected[1, faces[3][:2]] = [0.25, 0.75]
    np.testing.assert_allclose(weights, expected, atol=1e-12)


def test_coordinates_are_smooth_across_a_face():
    # 1e-9 inside a face, the weights are within about that of the face's barycentric ones
    vertices, faces = box_mesh([0, 0, 0], [1, 1, 1])
    on_face = np.array([[0.3, 0.6, 1.0]])
    near = on_face - [0.0, 0.0, 1e-9]
    difference = mean_value_coordinates(vertices, faces, near) - \
        mean_value_coordinates(vertices, faces, on_face)
    assert np.abs(difference).max() < 1e-7


def test_open_cage_is_refused():
    vertices, faces = box_mesh([0, 0, 0], [1, 1, 1])
    with pytest.raises(CageError, match=r"not closed: edge \[\d+, \d+\] belongs to 1 faces"):
        mean_value_coordinates(vertices, faces[:-1], [[0.5, 0.5, 0.5]])


def test_inverted_face_is_refused():
    vertices, faces = box_mesh([0, 0, 0], [1, 1, 1])
    flipped = faces.copy()
    flipped[5] = flipped[5][::-1]
    with pytest.raises(CageError, match="cage face 5 .* is inverted"):
        check_cage(vertices, flipped)


def test_inside_out_cage_is_refused():
    vertices, faces = box_mesh([0, 0, 0], [1, 1, 1])
    with pytest.raises(CageError, match=r"faces are inverted \(enclosed volume -1 m\^3"):
        check_cage(vertices, faces[:, ::-1])


@pytest.mark.parametrize(("vertices", "faces", "message"), [
    (np.zeros((3, 3)), np.zeros((4, 3), int), r"\(h, 3\) array with h >= 4"),
    (np.eye(4, 3), [[0, 1, 2]], r"\(f, 3\) integer array with f >= 4"),
    (np.eye(4, 3), [[0, 1, 2], [0, 1, 5], [0, 1, 2], [0, 1, 2]], r"index vertices 0\.\.3"),
    (np.eye(5, 3), [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], r"\[4\] belong to no face"),
    (np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 0, 1.0]]),
     [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], "zero area"),
])
def test_malformed_cages_are_refused(vertices, faces, message):
    with pytest.raises(CageError, match=message):
        check_cage(vertices, faces)
