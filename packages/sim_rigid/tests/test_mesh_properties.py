"""Deformation, mass properties and lumped areas of closed triangle meshes, with their VJPs
(sim_rigid.mesh_properties)."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_rigid.components import box_mesh
from sim_rigid.description import rpy_matrix
from sim_rigid.mesh_properties import (
    deform,
    deform_vjp,
    mass_properties,
    mass_properties_vjp,
    vertex_areas,
    vertex_areas_vjp,
)


def icosphere(radius: float, subdivisions: int):
    """A sphere-like mesh: an icosahedron's faces split in four ``subdivisions`` times,
    vertices pushed onto the sphere of ``radius`` [m], outward."""
    t = (1 + 5 ** 0.5) / 2
    vertices = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t],
                [0, -1, -t], [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    faces = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9],
             [5, 11, 4], [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6],
             [3, 6, 8], [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    vertices = [np.array(v, dtype=float) / np.linalg.norm(v) for v in vertices]
    for _ in range(subdivisions):
        middle, split = {}, []

        def mid(i, j, middle=middle):
            key = (min(i, j), max(i, j))
            if key not in middle:
                point = vertices[i] + vertices[j]
                vertices.append(point / np.linalg.norm(point))
                middle[key] = len(vertices) - 1
            return middle[key]
        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            split += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
        faces = split
    return radius * np.array(vertices), np.array(faces)


def test_box_mass_properties_match_the_formulas():
    size = np.array([0.3, 0.1, 0.05])
    vertices, faces = box_mesh(-size / 2, size / 2, (3, 2, 1))
    rotation, offset = rpy_matrix([0.3, -0.5, 1.1]), np.array([0.2, -0.1, 0.4])
    props = mass_properties(vertices @ rotation.T + offset, faces, 1200.0)
    mass = 1200.0 * np.prod(size)
    expected = mass / 12 * np.diag([size[1] ** 2 + size[2] ** 2, size[0] ** 2 + size[2] ** 2,
                                    size[0] ** 2 + size[1] ** 2])
    assert props["mass"] == pytest.approx(mass, rel=1e-13)
    np.testing.assert_allclose(props["com"], offset, atol=1e-15)
    np.testing.assert_allclose(props["inertia"], rotation @ expected @ rotation.T,
                               atol=1e-13 * np.trace(expected))


def test_sphere_like_mesh_approaches_the_solid_sphere():
    radius, density = 0.05, 1000.0
    vertices, faces = icosphere(radius, 4)
    props = mass_properties(vertices + [1.0, 2.0, 3.0], faces, density)
    mass = density * 4 / 3 * np.pi * radius ** 3
    # the inscribed polyhedron (5120 faces) falls short of the sphere: 0.22 % of the mass,
    # 0.36 % of the inertia seen
    assert props["mass"] == pytest.approx(mass, rel=5e-3)
    np.testing.assert_allclose(props["com"], [1.0, 2.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(props["inertia"], 0.4 * mass * radius ** 2 * np.eye(3),
                               rtol=0, atol=1e-2 * 0.4 * mass * radius ** 2)


def test_inside_out_mesh_is_refused():
    vertices, faces = box_mesh([0, 0, 0], [1, 1, 1])
    with pytest.raises(ValueError, match="encloses a volume of -1 m\\^3: it must be closed"):
        mass_properties(vertices, faces[:, ::-1], 1.0)


def test_mass_properties_vjp_matches_finite_differences():
    rng = np.random.default_rng(3)
    vertices, faces = box_mesh([0.0, -0.02, -0.01], [0.1, 0.02, 0.01], (2, 2, 1))
    vertices = vertices + rng.normal(scale=2e-3, size=vertices.shape)
    weights = {"mass": rng.normal(), "com": rng.normal(size=3),
               "inertia": rng.normal(size=(3, 3))}

    def loss(inputs):
        props = mass_properties(inputs["vertices"], faces, inputs["density"])
        return sum(float(np.sum(weights[key] * props[key])) for key in weights)

    g_vertices, g_density = mass_properties_vjp(vertices, faces, 900.0, weights)
    # scaled to the loss: the inertia is ~1e-5 kg m² while the com is ~1e-1 m
    for key, scale in (("mass", 1.0), ("com", 1.0), ("inertia", 1e5)):
        single = {key: scale * np.asarray(weights[key])}

        def single_loss(inputs, key=key, scale=scale):
            props = mass_properties(inputs["vertices"], faces, inputs["density"])
            return scale * float(np.sum(weights[key] * props[key]))
        g_v, g_d = mass_properties_vjp(vertices, faces, 900.0, single)
        gradcheck(single_loss, {"vertices": vertices, "density": np.asarray(900.0)},
                  {"vertices": g_v, "density": np.asarray(g_d)}, eps=1e-6,
                  directions=3).assert_ok()
    gradcheck(loss, {"vertices": vertices, "density": np.asarray(900.0)},
              {"vertices": g_vertices, "density": np.asarray(g_density)},
              directions=3).assert_ok()


def test_vertex_areas_sum_to_the_surface_and_their_vjp():
    vertices, faces = box_mesh([0, 0, 0], [0.3, 0.2, 0.1], (3, 2, 1))
    areas = vertex_areas(vertices, faces)
    assert areas.sum() == pytest.approx(2 * (0.06 + 0.03 + 0.02), rel=1e-14)
    corner = np.flatnonzero(np.all(vertices == 0, axis=1))[0]
    # 0.1 m quads split along the diagonal through the low corner: the corner has both
    # triangles (0.005 m² each) of one quad on each of its three sides, a third of each
    assert areas[corner] == pytest.approx(3 * 2 * 0.005 / 3, rel=1e-14)
    rng = np.random.default_rng(4)
    vertices = vertices + rng.normal(scale=5e-3, size=vertices.shape)
    g_areas = rng.normal(size=len(vertices))
    gradcheck(lambda x: float(g_areas @ vertex_areas(x["vertices"], faces)),
              {"vertices": vertices},
              {"vertices": vertex_areas_vjp(vertices, faces, g_areas)}, directions=3).assert_ok()


def test_deform_and_its_vjp():
    rng = np.random.default_rng(5)
    weights, cage = rng.random((7, 8)), rng.normal(size=(8, 3))
    np.testing.assert_allclose(deform(weights, cage), weights @ cage)
    g_vertices = rng.normal(size=(7, 3))
    gradcheck(lambda x: float(np.sum(g_vertices * deform(weights, x["cage"]))),
              {"cage": cage}, {"cage": deform_vjp(weights, g_vertices)}).assert_ok()
