"""The contact shapes' signed distances: analytic values, gradients and Hessians against
finite differences, the compiled ones against the reference, mesh grids and bad meshes."""

from __future__ import annotations

import numpy as np
import pytest

from sim_rigid import _kernels
from sim_rigid.sdf import (
    BOX,
    CAPSULE,
    MESH,
    PLANE,
    SPHERE,
    closed_mesh_problem,
    mesh_grid,
    shape_distance,
)

HALF = np.array([0.1, 0.2, 0.3])


def _shapes(models):
    vertices, faces = models.cuboid_mesh(HALF)
    half, grid = mesh_grid(vertices, faces, resolution=21)
    empty = np.zeros((0, 0, 0))
    return {"plane": (PLANE, np.zeros(3), empty), "box": (BOX, HALF, empty),
            "sphere": (SPHERE, np.full(3, 0.2), empty),
            "capsule": (CAPSULE, np.array([0.1, 0.1, 0.35]), empty),
            "mesh": (MESH, half, grid)}


@pytest.mark.parametrize(("name", "z", "expected"), [
    ("plane", [0.3, -1.0, -0.02], -0.02),
    ("box", [0.05, 0.1, 0.27], -0.03),
    ("box", [0.15, 0.0, 0.4], np.hypot(0.05, 0.1)),
    ("sphere", [0.1, 0.05, 0.0], np.hypot(0.1, 0.05) - 0.2),
    ("capsule", [0.03, 0.04, 0.1], 0.05 - 0.1),       # beside the segment
    ("capsule", [0.0, 0.06, 0.33], np.hypot(0.06, 0.08) - 0.1),  # over its end (l = 0.25)
    ("mesh", [0.02, 0.03, 0.1], -0.08),
    ("mesh", [0.14, 0.05, 0.0], 0.04),
])
def test_distances_equal_the_analytic_ones(models, name, z, expected):
    kind, half, grid = _shapes(models)[name]
    distance = shape_distance(kind, half, grid, z)[0]
    # the mesh grid interpolates linearly between nodes 2 cm apart: exact on flat faces
    # away from the medial planes
    assert distance == pytest.approx(expected, abs=1e-12 if name != "mesh" else 2e-3)


@pytest.mark.parametrize("name", ["plane", "box", "sphere", "capsule", "mesh"])
@pytest.mark.parametrize("seed", range(4))
def test_gradients_and_hessians_equal_finite_differences(models, name, seed):
    kind, half, grid = _shapes(models)[name]
    rng = np.random.default_rng(seed)
    # inside a mesh's grid: outside it only φ's value is kept (no force acts there)
    z = rng.uniform(-0.35, 0.35, 3) if name != "mesh" else rng.uniform(-0.9, 0.9, 3) * half
    value, gradient, hessian = shape_distance(kind, half, grid, z)
    eps = 1e-7
    steps = np.eye(3) * eps
    numeric_gradient = [(shape_distance(kind, half, grid, z + e)[0]
                         - shape_distance(kind, half, grid, z - e)[0]) / (2 * eps) for e in steps]
    numeric_hessian = np.array([(shape_distance(kind, half, grid, z + e)[1]
                                 - shape_distance(kind, half, grid, z - e)[1]) / (2 * eps)
                                for e in steps])
    np.testing.assert_allclose(gradient, numeric_gradient, atol=1e-6)
    np.testing.assert_allclose(hessian, numeric_hessian,
                               atol=1e-5 * max(1.0, np.abs(hessian).max()))
    compiled = _kernels.shape_distance(kind, half, grid.ravel(),
                                       np.array(grid.shape, dtype=np.int64), 0, z)
    assert compiled[0] == pytest.approx(value, abs=1e-15)
    np.testing.assert_allclose(compiled[1], gradient, atol=1e-15)
    np.testing.assert_allclose(compiled[2], hessian, atol=1e-12)


@pytest.mark.parametrize("z", [[0.1, 0.0, 0.0], [0.1, -0.2, 0.3], [0.05, 0.2, -0.1]])
def test_a_point_on_a_box_surface_has_a_face_normal(z):
    # a box's contact points sit on its own corners and edges (a hinged box resting on a
    # floor): the distance there is 0 with a unit face normal, not 0/0
    z = np.array(z)
    value, gradient, hessian = shape_distance(BOX, HALF, np.zeros((0, 0, 0)), z)
    assert value == 0.0 and np.linalg.norm(gradient) == 1.0 and not hessian.any()
    compiled = _kernels.shape_distance(BOX, HALF, np.zeros(0), np.zeros(3, np.int64), 0, z)
    assert compiled[0] == 0.0
    np.testing.assert_array_equal(compiled[1], gradient)


def test_a_mesh_grid_is_negative_inside_and_its_border_outside(models):
    vertices, faces = models.cuboid_mesh(HALF)
    half, grid = mesh_grid(vertices, faces, resolution=11)
    assert np.all(half > HALF) and grid.min() < 0.0
    border = np.concatenate([grid[[0, -1]].ravel(), grid[:, [0, -1]].ravel(),
                             grid[:, :, [0, -1]].ravel()])
    assert border.min() > 0.0


@pytest.mark.parametrize(("change", "message"), [
    (lambda v, f: (v, f[:-1]), "belongs to one face only: the mesh has a hole"),
    (lambda v, f: (v, f[:, ::-1]), "faces point inward"),
    (lambda v, f: (v, np.vstack([f[:-1], f[-1, [0, 2, 1]]])), "is run the same way by two faces"),
])
def test_open_or_inverted_meshes_are_named(models, change, message):
    vertices, faces = change(*models.cuboid_mesh(HALF))
    assert message in closed_mesh_problem(vertices, faces)
    with pytest.raises(ValueError, match="not a closed outward triangle mesh"):
        mesh_grid(vertices, faces)
