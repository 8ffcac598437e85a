"""Planar obstacles: circles, convex polygons, rotated rectangles and wall segments.

Every obstacle answers one pure query, :func:`signed_distance`, for a batch of points: the
signed distance (positive outside), the outward unit normal (the distance's gradient) and the
normal's derivative with respect to the point (the distance's Hessian), which the gradient of
the contact constraints needs. Outside a polygon's corner the normal turns continuously
around the corner; inside, it is the normal of the nearest face.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "Circle",
    "Polygon",
    "Wall",
    "Obstacle",
    "ObstacleError",
    "rectangle",
    "signed_distance",
    "obstacle_from_dict",
]


class ObstacleError(ValueError):
    """An obstacle description has a bad shape or value."""


def _vector(value, name: str, size: int = 2) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.shape != (size,) or not np.all(np.isfinite(array)):
        raise ObstacleError(f"{name} must be {size} finite numbers, got {value!r}")
    return array


@dataclasses.dataclass(frozen=True)
class Circle:
    """A disc of ``radius`` [m] around ``center`` [m], shape (2,)."""

    center: np.ndarray
    radius: float

    def __post_init__(self):
        object.__setattr__(self, "center", _vector(self.center, "circle center"))
        if not (np.isfinite(self.radius) and self.radius > 0):
            raise ObstacleError(f"circle radius must be a positive number, got {self.radius!r}")


@dataclasses.dataclass(frozen=True)
class Polygon:
    """A convex polygon with ``vertices`` [m], shape (m, 2), m ≥ 3, in either winding."""

    vertices: np.ndarray

    def __post_init__(self):
        v = np.asarray(self.vertices, dtype=np.float64)
        if v.ndim != 2 or v.shape[1] != 2 or v.shape[0] < 3 or not np.all(np.isfinite(v)):
            raise ObstacleError(
                f"polygon vertices must be an (m, 2) array of finite numbers with m >= 3, "
                f"got shape {v.shape}")
        edges = np.roll(v, -1, axis=0) - v
        cross = edges[:, 0] * np.roll(edges, -1, axis=0)[:, 1] - edges[:, 1] * np.roll(
            edges, -1, axis=0)[:, 0]
        if np.all(cross <= 0):
            v, cross = v[::-1].copy(), -cross[::-1]
        if not np.all(cross > 0):
            raise ObstacleError("polygon must be convex with distinct vertices in order; "
                                "split a concave shape into convex pieces")
        object.__setattr__(self, "vertices", v)


@dataclasses.dataclass(frozen=True)
class Wall:
    """A wall segment from ``start`` to ``end`` [m], ``thickness`` [m] across (a capsule)."""

    start: np.ndarray
    end: np.ndarray
    thickness: float = 0.01

    def __post_init__(self):
        object.__setattr__(self, "start", _vector(self.start, "wall start"))
        object.__setattr__(self, "end", _vector(self.end, "wall end"))
        if np.allclose(self.start, self.end):
            raise ObstacleError("wall start and end must differ")
        if not (np.isfinite(self.thickness) and self.thickness > 0):
            raise ObstacleError(f"wall thickness must be positive, got {self.thickness!r}")


Obstacle = Circle | Polygon | Wall


def rectangle(center, size, angle: float = 0.0) -> Polygon:
    """A rectangle of ``size`` (width, height) [m] around ``center`` [m] turned by ``angle``."""
    center = _vector(center, "rectangle center")
    size = _vector(size, "rectangle size")
    if np.any(size <= 0):
        raise ObstacleError(f"rectangle size must be positive, got {size.tolist()}")
    half = 0.5 * size
    corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=np.float64) * half
    c, s = np.cos(angle), np.sin(angle)
    rotation = np.array([[c, -s], [s, c]])
    return Polygon(corners @ rotation.T + center)


def _radial(delta: np.ndarray, dist: np.ndarray):
    """Normal and its derivative for distance measured from a point: (I - n nᵀ) / |δ|."""
    safe = np.maximum(dist, 1e-300)
    normal = delta / safe[:, None]
    hessian = (np.eye(2)[None] - normal[:, :, None] * normal[:, None, :]) / safe[:, None, None]
    return normal, hessian


def _circle(obstacle: Circle, points: np.ndarray):
    delta = points - obstacle.center
    dist = np.linalg.norm(delta, axis=1)
    normal, hessian = _radial(delta, dist)
    return dist - obstacle.radius, normal, hessian


def _segment_closest(points, a, b):
    """Closest points on segment ab and whether they lie strictly inside the segment."""
    ab = b - a
    t = np.clip(((points - a) @ ab) / (ab @ ab), 0.0, 1.0)
    return a + t[:, None] * ab, (t > 0.0) & (t < 1.0)


def _wall(obstacle: Wall, points: np.ndarray):
    closest, interior = _segment_closest(points, obstacle.start, obstacle.end)
    delta = points - closest
    dist = np.linalg.norm(delta, axis=1)
    normal, hessian = _radial(delta, dist)
    hessian[interior] = 0.0  # beside the segment the normal is constant
    return dist - 0.5 * obstacle.thickness, normal, hessian


def _polygon(obstacle: Polygon, points: np.ndarray):
    v = obstacle.vertices
    edges = np.roll(v, -1, axis=0) - v
    face_normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
    face_normals /= np.linalg.norm(face_normals, axis=1)[:, None]
    heights = np.einsum("pmk,mk->pm", points[:, None, :] - v[None], face_normals)
    n = len(points)
    phi = np.empty(n)
    normal = np.empty((n, 2))
    hessian = np.zeros((n, 2, 2))
    inside = np.all(heights <= 0.0, axis=1)
    if np.any(inside):
        face = np.argmax(heights[inside], axis=1)
        phi[inside] = heights[inside, face]
        normal[inside] = face_normals[face]
    outside = ~inside
    if np.any(outside):
        p = points[outside]
        best = np.full(len(p), np.inf)
        best_closest = np.zeros_like(p)
        best_interior = np.zeros(len(p), dtype=bool)
        best_face = np.zeros(len(p), dtype=int)
        for k in range(len(v)):
            closest, interior = _segment_closest(p, v[k], v[(k + 1) % len(v)])
            dist = np.linalg.norm(p - closest, axis=1)
            better = dist < best
            best = np.where(better, dist, best)
            best_closest[better] = closest[better]
            best_interior[better] = interior[better]
            best_face[better] = k
        n_out, h_out = _radial(p - best_closest, best)
        n_out[best_interior] = face_normals[best_face[best_interior]]
        h_out[best_interior] = 0.0
        phi[outside], normal[outside], hessian[outside] = best, n_out, h_out
    return phi, normal, hessian


_DISTANCES = {Circle: _circle, Polygon: _polygon, Wall: _wall}


def signed_distance(obstacle: Obstacle, points) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Signed distance, outward normal and normal derivative at ``points``.

    Args:
        obstacle: a :class:`Circle`, :class:`Polygon` or :class:`Wall`.
        points: query points [m], shape (n, 2).

    Returns:
        ``phi`` [m] shape (n,), positive outside; ``normal`` shape (n, 2), the unit gradient
        of ``phi``; ``dnormal`` [1/m] shape (n, 2, 2), ``∂normal/∂point`` (Hessian of ``phi``).
    """
    distance = _DISTANCES.get(type(obstacle))
    if distance is None:
        raise ObstacleError(f"unknown obstacle type {type(obstacle).__name__}")
    return distance(obstacle, np.asarray(points, dtype=np.float64).reshape(-1, 2))


def obstacle_from_dict(spec: Mapping[str, Any]) -> Obstacle:
    """Build an obstacle from a YAML mapping with a ``type`` key.

    Types: ``circle`` (``center``, ``radius``), ``polygon`` (``vertices``), ``rectangle``
    (``center``, ``size``, ``angle`` [rad]), ``wall`` (``start``, ``end``, ``thickness``).
    """
    if not isinstance(spec, Mapping) or "type" not in spec:
        raise ObstacleError(f"an obstacle must be a mapping with a 'type' key, got {spec!r}")
    kind = spec["type"]
    fields = {k: v for k, v in spec.items() if k != "type"}
    builders = {
        "circle": lambda center, radius: Circle(center, float(radius)),
        "polygon": lambda vertices: Polygon(vertices),
        "rectangle": lambda center, size, angle=0.0: rectangle(center, size, float(angle)),
        "wall": lambda start, end, thickness=0.01: Wall(start, end, float(thickness)),
    }
    if kind not in builders:
        raise ObstacleError(f"unknown obstacle type {kind!r}; use one of {sorted(builders)}")
    try:
        return builders[kind](**fields)
    except TypeError as exc:
        raise ObstacleError(f"bad fields for a {kind} obstacle {sorted(fields)}: {exc}") from None
