"""Signed distance fields of the contact shapes in their own frames, with the gradient and
Hessian the contact law's tangents need (:mod:`sim_rigid.contact`), and the grid of a mesh
SDF built from a closed triangle mesh.

Every shape is described by its type (:data:`~sim_rigid.model.OBSTACLE_TYPES`) and the half
sizes h of its bounding box in its frame (``obstacle_half_extents``):

- plane: the solid side is z < 0 (h unused);
- box: |z_i| <= h_i;
- sphere: radius r = h_0 (h = (r, r, r));
- capsule: the points within r = h_0 of the segment from (0, 0, -l) to (0, 0, l) along
  the frame's z axis, l = h_2 - r (h = (r, r, l + r));
- mesh: a grid of signed distances sampled at (n_x, n_y, n_z) nodes spanning [-h, h],
  interpolated trilinearly (φ continuous, its gradient the exact derivative of the
  interpolant, piecewise per cell); outside the grid φ is the interpolant at the nearest
  grid point plus the distance to the grid (positive: the grid's border lies outside the
  mesh by construction, :func:`mesh_grid`), with zero gradient and Hessian there (no force
  acts outside, so only φ's sign is used).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CAPSULE", "MESH", "PLANE", "BOX", "SPHERE", "closed_mesh_problem", "mesh_grid",
           "shape_distance"]

PLANE, BOX, SPHERE, CAPSULE, MESH = range(5)
"""Indices of the shapes in :data:`sim_rigid.model.OBSTACLE_TYPES`."""


def shape_distance(kind: int, half_extents, grid, z) -> tuple[float, np.ndarray, np.ndarray]:
    """(φ [m], ∇φ (3,), ∇²φ [1/m] (3, 3)) of a shape at the point ``z`` [m] (3,) of its own
    frame; ``grid`` is a mesh's (n_x, n_y, n_z) samples (unused for other shapes). Where φ
    has a kink (a box's inner medial planes, a capsule's or sphere's axis) one side's
    derivatives are returned."""
    z = np.asarray(z, dtype=np.float64)
    half = np.asarray(half_extents, dtype=np.float64)
    if kind == PLANE:
        return float(z[2]), np.array([0.0, 0.0, 1.0]), np.zeros((3, 3))
    if kind == BOX:
        return _box(half, z)
    if kind == SPHERE:
        return _round(z, half[0], np.ones(3))
    if kind == CAPSULE:
        radius, length = half[0], half[2] - half[0]
        along = float(np.clip(z[2], -length, length))
        on_side = abs(z[2]) < length
        distance, gradient, hessian = _round(z - np.array([0.0, 0.0, along]), radius,
                                             np.array([1.0, 1.0, 0.0 if on_side else 1.0]))
        return distance, gradient, hessian
    if kind == MESH:
        return _trilinear(np.asarray(grid, dtype=np.float64), half, z)
    raise ValueError(f"unknown shape type {kind}: an index into sim_rigid.model.OBSTACLE_TYPES")


def _box(half, z):
    excess = np.abs(z) - half
    sign = np.where(z < 0.0, -1.0, 1.0)
    if np.all(excess <= 0.0):  # on the surface too: a face's normal, not 0/0
        axis = int(np.argmax(excess))
        gradient = np.zeros(3)
        gradient[axis] = sign[axis]
        return float(excess[axis]), gradient, np.zeros((3, 3))
    outside = excess > 0.0
    offset = np.where(outside, sign * excess, 0.0)
    distance = float(np.linalg.norm(offset))
    normal = offset / distance
    # the nearest point slides along the faces whose slab contains z: curvature in the others
    return distance, normal, (np.diag(outside.astype(float)) - np.outer(normal, normal)) / distance


def _round(offset, radius, free):
    """φ = |offset| - radius, with the Hessian of |offset| where offset moves with z along
    the axes ``free`` (1) and not along the others (0: a capsule's side)."""
    length = float(np.linalg.norm(offset))
    if length == 0.0:  # the centre (or axis): any direction is a normal
        return -float(radius), np.array([0.0, 0.0, 1.0]), np.zeros((3, 3))
    normal = offset / length
    return length - float(radius), normal, (np.diag(free) - np.outer(normal, normal)) / length


def _trilinear(grid, half, z):
    counts = np.array(grid.shape)
    spacing = 2.0 * half / (counts - 1)
    clamped = np.clip(z, -half, half)
    outside = float(np.linalg.norm(z - clamped))
    position = (clamped + half) / spacing
    cell = np.minimum(np.floor(position).astype(np.int64), counts - 2)
    t = position - cell
    corners = grid[cell[0]:cell[0] + 2, cell[1]:cell[1] + 2, cell[2]:cell[2] + 2]
    weights = np.stack([1.0 - t, t], axis=1)           # (3 axes, 2 corners)
    slopes = np.array([-1.0, 1.0]) / spacing[:, None]  # d weight / d z per axis
    value = float(np.einsum("ijk,i,j,k->", corners, weights[0], weights[1], weights[2]))
    if outside > 0.0:
        return value + outside, np.zeros(3), np.zeros((3, 3))
    factors = [weights, slopes]
    gradient = np.array([np.einsum("ijk,i,j,k->", corners,
                                   *(factors[a == axis][a] for a in range(3)))
                         for axis in range(3)])
    hessian = np.zeros((3, 3))
    for p in range(3):
        for q in range(p + 1, 3):
            hessian[p, q] = hessian[q, p] = np.einsum(
                "ijk,i,j,k->", corners, *(factors[a in (p, q)][a] for a in range(3)))
    return value, gradient, hessian


def closed_mesh_problem(vertices, faces) -> str | None:
    """Why a triangle mesh (vertices (V, 3) [m], faces (F, 3) int) is not closed and
    consistently oriented outward, or None: every edge must be shared by exactly two faces
    that run it in opposite directions, and the enclosed volume must be positive."""
    vertices, faces = np.asarray(vertices, dtype=np.float64), np.asarray(faces)
    if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) < 4:
        return f"faces must be a list of at least four [i, j, k] triangles, got {faces.shape}"
    if faces.min() < 0 or faces.max() >= len(vertices):
        return f"face indices must lie in [0, {len(vertices)})"
    directed = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    pairs, counts = np.unique(directed, axis=0, return_counts=True)
    if np.any(counts > 1):
        return (f"edge {pairs[counts > 1][0].tolist()} is run the same way by two faces: "
                f"orient every face counter-clockwise seen from outside")
    present = {tuple(p) for p in pairs.tolist()}
    lonely = [p for p in present if (p[1], p[0]) not in present]
    if lonely:
        return f"edge {list(lonely[0])} belongs to one face only: the mesh has a hole"
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    volume = float(np.einsum("ij,ij->", a, np.cross(b, c))) / 6.0
    if not volume > 0.0:
        return (f"the enclosed volume is {volume:.3g} m^3: faces point inward (reverse their "
                f"vertex order)")
    return None


def mesh_grid(vertices, faces, *, resolution: int = 16,
              margin: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(half sizes h (3,) [m], signed distances (n_x, n_y, n_z) [m]) of a closed triangle
    mesh in its own frame, sampled on a grid spanning [-h, h], h the largest |vertex
    coordinate| per axis plus ``margin`` times the largest extent (so the grid's border is
    outside the mesh), ``resolution`` nodes along the longest side. The distance is to the
    nearest triangle, negative inside (the generalized winding number, 1 inside a closed
    mesh, 0 outside). Raises ValueError naming the problem for an open or inward mesh."""
    problem = closed_mesh_problem(vertices, faces)
    if problem is not None:
        raise ValueError(f"the mesh is not a closed outward triangle mesh: {problem}")
    if resolution < 2:
        raise ValueError(f"resolution must be >= 2 grid nodes per side, got {resolution}")
    vertices, faces = np.asarray(vertices, dtype=np.float64), np.asarray(faces)
    half = np.abs(vertices).max(axis=0)
    half = half + margin * 2.0 * half.max()
    counts = np.maximum(2, np.ceil(resolution * half / half.max()).astype(np.int64))
    axes = [np.linspace(-h, h, n) for h, n in zip(half, counts, strict=True)]
    nodes = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    triangles = vertices[faces]
    distance = np.sqrt(_squared_distance_to_triangles(nodes, triangles).min(axis=1))
    inside = _winding_number(nodes, triangles) > 0.5
    return half, np.where(inside, -distance, distance).reshape(tuple(counts))


def _squared_distance_to_triangles(points, triangles):
    """Squared distances (P, F) from points (P, 3) to triangles (F, 3, 3) (Ericson's
    closest-point regions, vectorized)."""
    a, b, c = (triangles[None, :, k] for k in range(3))
    p = points[:, None]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = np.sum(ab * ap, -1), np.sum(ac * ap, -1)
    bp, cp = p - b, p - c
    d3, d4 = np.sum(ab * bp, -1), np.sum(ac * bp, -1)
    d5, d6 = np.sum(ab * cp, -1), np.sum(ac * cp, -1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1.0 / (va + vb + vc)
        v, w = vb * denom, vc * denom
        closest = a + ab * v[..., None] + ac * w[..., None]        # face interior
        # applied in turn, the later wins: Ericson's order of tests reversed
        regions = [
            (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0),
            b + (c - b) * ((d4 - d3) / ((d4 - d3) + (d5 - d6)))[..., None],
            (vb <= 0) & (d2 >= 0) & (d6 <= 0), a + ac * (d2 / (d2 - d6))[..., None],
            (d6 >= 0) & (d5 <= d6), np.broadcast_to(c, closest.shape),
            (vc <= 0) & (d1 >= 0) & (d3 <= 0), a + ab * (d1 / (d1 - d3))[..., None],
            (d3 >= 0) & (d4 <= d3), np.broadcast_to(b, closest.shape),
            (d1 <= 0) & (d2 <= 0), np.broadcast_to(a, closest.shape)]
    for mask, point in zip(regions[0::2], regions[1::2], strict=True):
        closest = np.where(mask[..., None], point, closest)
    return np.sum((p - closest) ** 2, -1)


def _winding_number(points, triangles):
    """Generalized winding numbers (P,) of points (P, 3) by triangles (F, 3, 3): the summed
    signed solid angles over 4π (Van Oosterom and Strackee's formula)."""
    r = triangles[None] - points[:, None, None]
    a, b, c = r[:, :, 0], r[:, :, 1], r[:, :, 2]
    la, lb, lc = (np.linalg.norm(x, axis=-1) for x in (a, b, c))
    numerator = np.sum(a * np.cross(b, c), -1)
    denominator = (la * lb * lc + np.sum(a * b, -1) * lc + np.sum(a * c, -1) * lb
                   + np.sum(b * c, -1) * la)
    return np.sum(2.0 * np.arctan2(numerator, denominator), axis=1) / (4.0 * np.pi)
