"""Closed triangle cages and their mean value coordinates (Ju, Schaefer and Warren, "Mean
value coordinates for closed triangular meshes", SIGGRAPH 2005): the weights W (p, h) with
which a point is the weighted mean of the h cage vertices, W @ cage_vertices = points, so
moving the cage's vertices (its handles) deforms everything inside smoothly (the paper's
cage-based deformation, Xu et al. 2021, Section III-A).

Cages are closed, consistently oriented triangle meshes with outward normals
(counter-clockwise seen from outside); :func:`check_cage` refuses anything else by name.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CageError", "check_cage", "mean_value_coordinates"]

_EPS = 1e-12
"""Relative distance [of the cage's size] under which a point counts as on a cage vertex,
and the angle slack [rad] under which it counts as on a face or in a face's plane."""


class CageError(ValueError):
    """A cage that is not a closed, consistently and outward oriented triangle mesh."""


def check_cage(cage_vertices, cage_faces) -> tuple[np.ndarray, np.ndarray]:
    """The cage as float64 vertices (h, 3) [m] and int64 faces (f, 3), after checking it is
    closed (every edge shared by exactly two faces), consistently oriented (each shared
    edge run in opposite directions by its two faces), outward (positive enclosed volume),
    without degenerate faces and with every vertex used. Raises :class:`CageError` naming
    the edge or face at fault and the fix."""
    vertices = np.asarray(cage_vertices, dtype=np.float64)
    faces = np.asarray(cage_faces)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) < 4:
        raise CageError(f"cage vertices must be an (h, 3) array with h >= 4, got shape "
                        f"{vertices.shape}")
    if not np.all(np.isfinite(vertices)):
        raise CageError("cage vertices must be finite")
    if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) < 4 or \
            not np.issubdtype(faces.dtype, np.integer):
        raise CageError(f"cage faces must be an (f, 3) integer array with f >= 4 "
                        f"(triangles), got shape {faces.shape} of {faces.dtype}")
    faces = faces.astype(np.int64)
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise CageError(f"cage faces index vertices 0..{len(vertices) - 1}, got "
                        f"{faces.min()}..{faces.max()}")
    unused = np.setdiff1d(np.arange(len(vertices)), faces)
    if len(unused):
        raise CageError(f"cage vertices {unused.tolist()} belong to no face: remove them")
    normal = np.cross(vertices[faces[:, 1]] - vertices[faces[:, 0]],
                      vertices[faces[:, 2]] - vertices[faces[:, 0]])
    size = np.ptp(vertices, axis=0).max()
    degenerate = np.flatnonzero(np.linalg.norm(normal, axis=1) <= _EPS * size * size)
    if len(degenerate):
        raise CageError(f"cage face {int(degenerate[0])} {faces[degenerate[0]].tolist()} has "
                        f"zero area: remove it or move its vertices apart")
    directed = np.stack([faces, np.roll(faces, -1, axis=1)], axis=-1).reshape(-1, 2)
    edges, counts = np.unique(np.sort(directed, axis=1), axis=0, return_counts=True)
    if np.any(counts != 2):
        k = int(np.flatnonzero(counts != 2)[0])
        raise CageError(f"the cage is not closed: edge {edges[k].tolist()} belongs to "
                        f"{counts[k]} faces, every edge must belong to exactly 2 (close the "
                        f"holes, split non-manifold edges)")
    runs, run_counts = np.unique(directed, axis=0, return_counts=True)
    if np.any(run_counts != 1):
        edge = runs[int(np.flatnonzero(run_counts != 1)[0])]
        face = int(np.flatnonzero(np.all(np.stack([faces, np.roll(faces, -1, axis=1)],
                                                  axis=-1) == edge, axis=-1).any(axis=1))[-1])
        raise CageError(f"cage face {face} {faces[face].tolist()} is inverted: it runs edge "
                        f"{edge.tolist()} in the same direction as its neighbour; list its "
                        f"vertices in the opposite order")
    volume = np.einsum("ij,ij->", vertices[faces[:, 0]], np.cross(vertices[faces[:, 1]],
                                                                   vertices[faces[:, 2]])) / 6
    if volume <= 0.0:
        raise CageError(f"the cage's faces are inverted (enclosed volume {volume:.3g} m^3 "
                        f"<= 0): list every face's vertices counter-clockwise seen from "
                        f"outside")
    return vertices, faces


def mean_value_coordinates(cage_vertices, cage_faces, points) -> np.ndarray:
    """Mean value coordinates (p, h) of ``points`` (p, 3) [m] with respect to the closed
    cage (vertices (h, 3) [m], faces (f, 3), checked by :func:`check_cage`).

    Each row sums to 1 and reproduces its point, W @ cage_vertices = points (linear
    precision); a point on a cage vertex gets that vertex's unit weight, a point on a cage
    face the face's barycentric coordinates (so points on a face shared with a neighbouring
    component move with that face's handles alone). Vectorised over points and faces after
    Ju et al.'s algorithm (their Figure 5)."""
    vertices, faces = check_cage(cage_vertices, cage_faces)
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3 or not np.all(np.isfinite(x)):
        raise CageError(f"points must be a finite (p, 3) array, got shape {x.shape}")
    size = np.ptp(vertices, axis=0).max()
    offset = vertices[None, :, :] - x[:, None, :]                       # (p, h, 3)
    distance = np.linalg.norm(offset, axis=2)                           # (p, h)
    on_vertex = distance <= _EPS * size
    unit = offset / np.where(on_vertex, 1.0, distance)[:, :, None]

    d = distance[:, faces]                                              # (p, f, 3)
    u = unit[:, faces]                                                  # (p, f, 3, 3)
    nxt, prv = [1, 2, 0], [2, 0, 1]
    # θ_i, the angle u_{i+1} u_{i-1} subtends, by atan2: Ju et al.'s 2 arcsin(l_i / 2) loses
    # half the digits near π, where a point on an edge must still be found on its faces
    theta = np.arctan2(np.linalg.norm(np.cross(u[:, :, nxt], u[:, :, prv]), axis=3),
                       np.einsum("pfij,pfij->pfi", u[:, :, nxt], u[:, :, prv]))
    h = theta.sum(axis=2) / 2.0
    on_face = np.pi - h <= _EPS                                         # (p, f)
    sin_theta = np.sin(theta)
    safe_sin = np.where(np.abs(sin_theta) > _EPS, sin_theta, 1.0)
    c = 2.0 * np.sin(h)[..., None] * np.sin(h[..., None] - theta) / (
        safe_sin[..., nxt] * safe_sin[..., prv]) - 1.0
    sign = np.sign(np.linalg.det(u))
    s = sign[..., None] * np.sqrt(np.clip(1.0 - c * c, 0.0, None))
    # x in a face's plane but outside it: that face adds nothing
    in_plane = np.any(np.abs(s) <= _EPS, axis=2) | np.any(np.abs(sin_theta) <= _EPS, axis=2)
    safe_s = np.where(np.abs(s) > _EPS, s, 1.0)
    safe_d = np.where(d > 0.0, d, 1.0)
    face_weight = (theta - c[..., nxt] * theta[..., prv] - c[..., prv] * theta[..., nxt]) / (
        safe_d * safe_sin[..., nxt] * safe_s[..., prv])
    face_weight = np.where((in_plane | on_face)[..., None], 0.0, face_weight)
    weights = np.zeros((len(x), len(vertices)))
    rows = np.broadcast_to(np.arange(len(x))[:, None, None], face_weight.shape)
    np.add.at(weights, (rows, np.broadcast_to(faces, face_weight.shape)), face_weight)

    # on a face: its barycentric coordinates, sin θ_i d_{i-1} d_{i+1} (Ju et al.)
    point_on_face = on_face.any(axis=1)
    if point_on_face.any():
        k = np.flatnonzero(point_on_face)
        f = np.argmax(on_face[k], axis=1)
        bary = sin_theta[k, f] * d[k, f][:, prv] * d[k, f][:, nxt]
        weights[k] = 0.0
        np.add.at(weights, (np.repeat(k, 3), faces[f].reshape(-1)), bary.reshape(-1))
    point_on_vertex = on_vertex.any(axis=1)
    if point_on_vertex.any():
        k = np.flatnonzero(point_on_vertex)
        weights[k] = 0.0
        weights[k, np.argmax(on_vertex[k], axis=1)] = 1.0
    return weights / weights.sum(axis=1, keepdims=True)
