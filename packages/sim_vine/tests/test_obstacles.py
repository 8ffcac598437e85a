import numpy as np
import pytest

from sim_vine.obstacles import (
    Circle,
    ObstacleError,
    Polygon,
    Wall,
    obstacle_from_dict,
    rectangle,
    signed_distance,
)

SHAPES = [
    Circle([0.1, -0.2], 0.3),
    rectangle([0.0, 0.1], [0.4, 0.2], angle=0.5),
    Polygon([[0.0, 0.0], [0.3, 0.05], [0.1, 0.3]]),
    Wall([-0.2, 0.0], [0.3, 0.2], thickness=0.04),
]


def test_known_distances():
    phi, normal, _ = signed_distance(Circle([0.0, 0.0], 1.0), [[2.0, 0.0], [0.0, 0.5]])
    np.testing.assert_allclose(phi, [1.0, -0.5])
    np.testing.assert_allclose(normal, [[1.0, 0.0], [0.0, 1.0]])
    square = rectangle([0.0, 0.0], [2.0, 2.0])
    phi, normal, dnormal = signed_distance(square, [[2.0, 0.5], [2.0, 2.0], [0.5, 0.0]])
    np.testing.assert_allclose(phi, [1.0, np.sqrt(2.0), -0.5])
    np.testing.assert_allclose(normal[0], [1.0, 0.0])
    np.testing.assert_allclose(normal[1], [np.sqrt(0.5), np.sqrt(0.5)])  # radial at a corner
    np.testing.assert_allclose(normal[2], [1.0, 0.0])
    np.testing.assert_allclose(dnormal[0], 0.0)
    phi, normal, _ = signed_distance(Wall([0, 0], [1, 0], thickness=0.2), [[0.5, 0.3], [1.5, 0]])
    np.testing.assert_allclose(phi, [0.2, 0.4])
    np.testing.assert_allclose(normal, [[0, 1], [1, 0]])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: type(s).__name__)
def test_normal_is_gradient_and_dnormal_its_derivative(shape):
    rng = np.random.default_rng(0)
    points = rng.uniform(-0.6, 0.6, size=(200, 2))
    phi, normal, dnormal = signed_distance(shape, points)
    h = 1e-6
    for axis in range(2):
        step = np.zeros(2)
        step[axis] = h
        phi_p, normal_p, _ = signed_distance(shape, points + step)
        phi_m, normal_m, _ = signed_distance(shape, points - step)
        # skip points whose nearest feature switches within the stencil (medial axis)
        smooth = np.linalg.norm(normal_p - normal_m, axis=1) < 1e-3
        np.testing.assert_allclose(((phi_p - phi_m) / (2 * h))[smooth], normal[smooth, axis],
                                   atol=1e-6)
        np.testing.assert_allclose(((normal_p - normal_m) / (2 * h))[smooth],
                                   dnormal[smooth, :, axis], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(normal, axis=1), 1.0)


def test_corner_normals_turn_continuously():
    square = rectangle([0.0, 0.0], [2.0, 2.0], angle=0.3)
    corner = square.vertices[0]
    angles = np.linspace(0, 2 * np.pi, 720)
    points = corner + 1e-3 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    phi, normal, _ = signed_distance(square, points)
    both_outside = (phi[1:] > 0) & (phi[:-1] > 0)
    jumps = np.linalg.norm(np.diff(normal, axis=0), axis=1)[both_outside]
    assert both_outside.sum() > 500 and np.all(jumps < 0.05)


def test_bad_shapes_raise():
    with pytest.raises(ObstacleError, match="radius"):
        Circle([0, 0], -1.0)
    with pytest.raises(ObstacleError, match="convex"):
        Polygon([[0, 0], [1, 0], [0.2, 0.2], [0, 1]])
    with pytest.raises(ObstacleError, match="size"):
        rectangle([0, 0], [1.0, 0.0])
    with pytest.raises(ObstacleError, match="start and end"):
        Wall([0, 0], [0, 0])
    with pytest.raises(ObstacleError, match="unknown obstacle type"):
        obstacle_from_dict({"type": "blob"})
    with pytest.raises(ObstacleError, match="bad fields"):
        obstacle_from_dict({"type": "circle", "centre": [0, 0], "radius": 1})
    with pytest.raises(ObstacleError, match="center"):
        obstacle_from_dict({"type": "circle", "center": [0, float("nan")], "radius": 1})


def test_clockwise_polygon_is_reoriented():
    ccw = Polygon([[0, 0], [1, 0], [0, 1]])
    cw = Polygon([[0, 0], [0, 1], [1, 0]])
    points = [[0.2, 0.2], [2.0, 2.0]]
    np.testing.assert_allclose(signed_distance(cw, points)[0], signed_distance(ccw, points)[0])
