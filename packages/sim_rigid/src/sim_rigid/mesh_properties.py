"""What a closed triangle mesh gives the simulator, each with its VJP: the cage-deformed
vertices (:func:`deform`), the mass properties of the solid it bounds at a density
(:func:`mass_properties`, by the divergence theorem: a sum over the tetrahedra each face
makes with the origin) and the lumped surface area at each vertex (:func:`vertex_areas`), the
area a contact point at that vertex stands for.

Meshes: vertices (v, 3) [m], faces (f, 3) int, closed and outward oriented (counter-clockwise
seen from outside); an inside-out mesh gives a negative volume, which
:func:`mass_properties` refuses.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MassProperties", "deform", "deform_vjp", "mass_properties",
           "mass_properties_vjp", "vertex_areas", "vertex_areas_vjp"]


def deform(weights, cage_vertices) -> np.ndarray:
    """Mesh vertices (v, 3) [m] = weights (v, h) @ cage vertices (h, 3) [m] (the deformation
    weights of :func:`sim_rigid.cage.mean_value_coordinates`, fixed at the rest shape)."""
    return np.asarray(weights, dtype=np.float64) @ np.asarray(cage_vertices, dtype=np.float64)


def deform_vjp(weights, g_vertices) -> np.ndarray:
    """∂L/∂cage vertices (h, 3) from ∂L/∂mesh vertices (v, 3) of :func:`deform`."""
    return np.asarray(weights, dtype=np.float64).T @ np.asarray(g_vertices, dtype=np.float64)


class MassProperties(dict):
    """``mass`` [kg] (), ``com`` [m] (3,), ``inertia`` [kg m²] (3, 3) about the centre of
    mass, in the mesh's frame (a dict, so its VJP's cotangent has the same keys)."""


def _moments(vertices, faces):
    """Per-face corners a, b, c (f, 3) and the face tetrahedra's signed volumes (f,) [m³]."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    return a, b, c, np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0


def _second_moment(a, b, c, volume):
    """∫ x xᵀ dV [m⁵] over each face's tetrahedron with the origin, summed:
    V/20 (a aᵀ + b bᵀ + c cᵀ + s sᵀ) with s = a + b + c."""
    s = a + b + c
    outer = sum(np.einsum("fi,fj->fij", p, p) for p in (a, b, c, s))
    return np.einsum("f,fij->ij", volume / 20.0, outer)


def mass_properties(vertices, faces, density: float) -> MassProperties:
    """Mass [kg], centre of mass [m] and inertia tensor about it [kg m²] of the uniform solid
    of ``density`` [kg/m³] that the closed mesh bounds. Raises ValueError for a mesh whose
    volume is not positive (inside out, or open)."""
    a, b, c, volume_f = _moments(vertices, faces)
    volume = volume_f.sum()
    if not volume > 0.0:
        raise ValueError(f"the mesh encloses a volume of {volume:.3g} m^3: it must be closed "
                         f"with faces counter-clockwise seen from outside")
    first = np.einsum("f,fi->i", volume_f, a + b + c) / 4.0
    com = first / volume
    second = density * _second_moment(a, b, c, volume_f)
    mass = density * volume
    about_origin = np.trace(second) * np.eye(3) - second
    inertia = about_origin - mass * (com @ com * np.eye(3) - np.outer(com, com))
    return MassProperties(mass=np.asarray(mass), com=com, inertia=inertia)


def mass_properties_vjp(vertices, faces, density: float, g: dict) -> tuple[np.ndarray, float]:
    """(∂L/∂vertices (v, 3), ∂L/∂density) from ∂L/∂(``mass``, ``com``, ``inertia``) of
    :func:`mass_properties` (missing keys count as zero)."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    a, b, c, volume_f = _moments(v, f)
    volume = volume_f.sum()
    first = np.einsum("f,fi->i", volume_f, a + b + c) / 4.0
    g_mass = float(g.get("mass", 0.0))
    g_com = np.asarray(g.get("com", np.zeros(3)), dtype=np.float64)
    g_inertia = np.asarray(g.get("inertia", np.zeros((3, 3))), dtype=np.float64)
    trace_g = np.trace(g_inertia)
    sym_g = g_inertia + g_inertia.T
    # inertia = ρ (tr C I - C) - ρ (|S|² I - S Sᵀ) / V with C = Σ second moments, S = first
    g_second = density * (trace_g * np.eye(3) - g_inertia)
    g_first = g_com / volume - density / volume * (2.0 * first * trace_g - sym_g @ first)
    g_volume = (density * g_mass - g_com @ first / volume ** 2
                + density * (first @ first * trace_g - first @ g_inertia @ first) / volume ** 2)
    s = a + b + c
    g_sym = g_second + g_second.T
    quad = sum(np.einsum("fi,ij,fj->f", p, g_second, p) for p in (a, b, c, s))
    g_volume_f = g_volume + s @ g_first / 4.0 + quad / 20.0
    g_s = (volume_f / 4.0)[:, None] * g_first + (volume_f / 20.0)[:, None] * (s @ g_sym)
    g_corner = [(volume_f / 20.0)[:, None] * (p @ g_sym) + g_s for p in (a, b, c)]
    g_corner[0] = g_corner[0] + g_volume_f[:, None] * np.cross(b, c) / 6.0
    g_corner[1] = g_corner[1] + g_volume_f[:, None] * np.cross(c, a) / 6.0
    g_corner[2] = g_corner[2] + g_volume_f[:, None] * np.cross(a, b) / 6.0
    g_vertices = np.zeros_like(v)
    for k in range(3):
        np.add.at(g_vertices, f[:, k], g_corner[k])
    props = mass_properties(v, f, density)
    g_density = (g_mass * props["mass"] + np.sum(g_inertia * props["inertia"])) / density
    return g_vertices, float(g_density)


def vertex_areas(vertices, faces) -> np.ndarray:
    """Lumped surface area of each vertex (v,) [m²]: a third of each face's area goes to
    each of its corners, so the areas sum to the mesh's."""
    a, b, c, _ = _moments(vertices, faces)
    area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    lumped = np.zeros(len(np.asarray(vertices)))
    for k in range(3):
        np.add.at(lumped, np.asarray(faces)[:, k], area / 3.0)
    return lumped


def vertex_areas_vjp(vertices, faces, g_areas) -> np.ndarray:
    """∂L/∂vertices (v, 3) from ∂L/∂areas (v,) of :func:`vertex_areas`."""
    f = np.asarray(faces, dtype=np.int64)
    a, b, c, _ = _moments(vertices, f)
    normal = np.cross(b - a, c - a)
    g_area = np.asarray(g_areas, dtype=np.float64)[f].sum(axis=1) / 3.0
    g_normal = (0.5 * g_area / np.linalg.norm(normal, axis=1))[:, None] * normal
    g_b = np.cross(c - a, g_normal)
    g_c = np.cross(g_normal, b - a)
    g_vertices = np.zeros((len(np.asarray(vertices)), 3))
    for k, g_k in enumerate((-g_b - g_c, g_b, g_c)):
        np.add.at(g_vertices, f[:, k], g_k)
    return g_vertices
