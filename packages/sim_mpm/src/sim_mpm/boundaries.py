"""Grid boundary conditions: box walls, planes and terrain height fields.

A boundary acts on the velocities of the grid nodes inside it (behind a wall, on the far
side of a plane, below a terrain surface) after gravity is added, by one of four
projections with the outward normal ``n`` of the boundary at the node:

- ``"sticky"``: v ← 0.
- ``"slip"``: v ← v − (v·n) n (the normal component is removed, moving away included).
- ``"separate"``: like slip, but only when v·n < 0, so bodies may leave the boundary.
- ``"friction"``: Coulomb friction with coefficient μ: when v·n < 0, the normal component
  is removed and the tangential speed |v_t| is reduced by μ |v·n|, down to zero; v is
  unchanged when v·n ≥ 0. A body sliding on a floor thus decelerates at μ g.

Node positions are fixed (node i sits at i·dx), so each boundary is compiled once into
:class:`BoundaryLayer` records (nodes, normals, kind) and the projections and their
adjoints act on grid velocity arrays only. The projections are piecewise smooth; their
adjoints are exact away from the switching points (v·n = 0, |v_t| = μ |v·n|).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = [
    "BOUNDARY_KINDS",
    "BoundaryError",
    "BoxWalls",
    "Plane",
    "HeightField",
    "BoundaryLayer",
    "compile_boundaries",
    "grid_node_positions",
    "project",
    "project_vjp",
]

BOUNDARY_KINDS = {"sticky": 0, "slip": 1, "separate": 2, "friction": 3}


class BoundaryError(ValueError):
    """A boundary description is invalid; the message names the field and a fix."""


def _check_kind(kind: str, friction: float) -> None:
    if kind not in BOUNDARY_KINDS:
        raise BoundaryError(
            f"unknown boundary kind {kind!r}; choose one of {', '.join(BOUNDARY_KINDS)}")
    if not (np.isfinite(friction) and friction >= 0.0):
        raise BoundaryError(f"friction coefficient must be a finite number ≥ 0, got {friction}")


@dataclasses.dataclass(frozen=True)
class BoxWalls:
    """The walls of the simulation box: nodes within ``margin`` cells of a face.

    Attributes:
        kind: "sticky" | "slip" | "separate" | "friction".
        friction: Coulomb coefficient μ [-] (used by "friction").
        margin: wall thickness in grid cells (≥ 2 keeps the quadratic stencil inside).
    """

    kind: str = "sticky"
    friction: float = 0.0
    margin: int = 3

    def __post_init__(self):
        _check_kind(self.kind, self.friction)
        if int(self.margin) < 1:
            raise BoundaryError(f"BoxWalls margin must be ≥ 1 cell, got {self.margin}")


@dataclasses.dataclass(frozen=True)
class Plane:
    """A half-space boundary: nodes with (X − point)·normal < 0 are inside.

    Attributes:
        point: a point on the plane [m], shape (d,).
        normal: outward normal pointing into the free side, shape (d,) (normalized here).
        kind, friction: as for :class:`BoxWalls`.
    """

    point: Any
    normal: Any
    kind: str = "sticky"
    friction: float = 0.0

    def __post_init__(self):
        _check_kind(self.kind, self.friction)
        point = np.asarray(self.point, dtype=np.float64).reshape(-1)
        normal = np.asarray(self.normal, dtype=np.float64).reshape(-1)
        if point.shape != normal.shape or point.size not in (2, 3):
            raise BoundaryError("Plane point and normal must both have 2 or 3 entries")
        length = np.linalg.norm(normal)
        if not np.isfinite(length) or length == 0.0:
            raise BoundaryError(f"Plane normal must be a non-zero finite vector, got {normal}")
        object.__setattr__(self, "point", point)
        object.__setattr__(self, "normal", normal / length)


@dataclasses.dataclass(frozen=True)
class HeightField:
    """Terrain: nodes below the surface y = h(x) (2D) or y = h(x, z) (3D) are inside.

    Heights are sampled on a regular grid starting at ``origin`` with ``spacing`` [m] and
    interpolated linearly (2D) or bilinearly (3D), clamped beyond the ends. The normal is
    (−∂h/∂x, 1, −∂h/∂z) normalized, from the interpolant's gradient at the node.

    Attributes:
        heights: terrain heights [m], shape (m,) in 2D or (mx, mz) in 3D.
        spacing: sample spacing [m].
        origin: position of the first sample [m], x (2D) or (x, z) (3D).
        kind, friction: as for :class:`BoxWalls`.
    """

    heights: Any
    spacing: float
    origin: Any = 0.0
    kind: str = "sticky"
    friction: float = 0.0

    def __post_init__(self):
        _check_kind(self.kind, self.friction)
        heights = np.asarray(self.heights, dtype=np.float64)
        if heights.ndim not in (1, 2) or min(heights.shape) < 2:
            raise BoundaryError(
                "HeightField heights must be a 1-D (2D scenes) or 2-D (3D scenes) array with "
                f"at least 2 samples per axis, got shape {heights.shape}")
        if not np.all(np.isfinite(heights)):
            raise BoundaryError("HeightField heights contain NaN or inf")
        if not (np.isfinite(self.spacing) and self.spacing > 0):
            raise BoundaryError(f"HeightField spacing must be > 0, got {self.spacing}")
        origin = np.broadcast_to(np.asarray(self.origin, dtype=np.float64),
                                 (heights.ndim,)).copy()
        object.__setattr__(self, "heights", heights)
        object.__setattr__(self, "origin", origin)

    def surface(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Height [m], shape (k,), and unit normal, shape (k, d), below ``points`` (k, d)."""
        h = self.heights
        if h.ndim == 1:
            u = (points[:, 0] - self.origin[0]) / self.spacing
            i = np.clip(np.floor(u).astype(np.int64), 0, h.size - 2)
            t = np.clip(u - i, 0.0, 1.0)
            height = h[i] * (1 - t) + h[i + 1] * t
            slope = (h[i + 1] - h[i]) / self.spacing
            normal = np.stack([-slope, np.ones_like(slope)], axis=1)
        else:
            u = (points[:, 0] - self.origin[0]) / self.spacing
            w = (points[:, 2] - self.origin[1]) / self.spacing
            i = np.clip(np.floor(u).astype(np.int64), 0, h.shape[0] - 2)
            j = np.clip(np.floor(w).astype(np.int64), 0, h.shape[1] - 2)
            s, t = np.clip(u - i, 0.0, 1.0), np.clip(w - j, 0.0, 1.0)
            h00, h10, h01, h11 = h[i, j], h[i + 1, j], h[i, j + 1], h[i + 1, j + 1]
            height = (h00 * (1 - s) * (1 - t) + h10 * s * (1 - t) + h01 * (1 - s) * t
                      + h11 * s * t)
            dh_dx = ((h10 - h00) * (1 - t) + (h11 - h01) * t) / self.spacing
            dh_dz = ((h01 - h00) * (1 - s) + (h11 - h10) * s) / self.spacing
            normal = np.stack([-dh_dx, np.ones_like(dh_dx), -dh_dz], axis=1)
        return height, normal / np.linalg.norm(normal, axis=1, keepdims=True)


@dataclasses.dataclass(frozen=True)
class BoundaryLayer:
    """One compiled boundary acting on distinct grid nodes.

    Attributes:
        node_index: flat grid node indices, shape (k,), int64, no repeats.
        normal: outward unit normals at those nodes, shape (k, d).
        kind: code from :data:`BOUNDARY_KINDS`.
        friction: Coulomb coefficient μ.
    """

    node_index: Any
    normal: Any
    kind: int
    friction: float


def grid_node_positions(dim: int, grid_resolution: int, dx: float) -> np.ndarray:
    """Positions [m] of all grid nodes in flat (C) order, shape (res**dim, dim)."""
    axes = np.indices((grid_resolution,) * dim).reshape(dim, -1).T
    return axes.astype(np.float64) * dx


def compile_boundaries(boundaries, *, dim: int, grid_resolution: int,
                       dx: float) -> tuple[BoundaryLayer, ...]:
    """Compile boundary objects into layers applied in order (box walls give 2·dim layers)."""
    nodes = grid_node_positions(dim, grid_resolution, dx)
    cells = np.rint(nodes / dx).astype(np.int64)
    layers = []

    def add(mask, normal, boundary):
        index = np.flatnonzero(mask)
        if index.size:
            normals = np.broadcast_to(normal, (index.size, dim)) if np.ndim(normal) == 1 \
                else normal[mask]
            layers.append(BoundaryLayer(index, np.ascontiguousarray(normals, dtype=np.float64),
                                        BOUNDARY_KINDS[boundary.kind], float(boundary.friction)))

    for boundary in boundaries:
        if isinstance(boundary, BoxWalls):
            margin = int(boundary.margin)
            for axis in range(dim):
                normal = np.zeros(dim)
                normal[axis] = 1.0
                add(cells[:, axis] < margin, normal, boundary)
                add(cells[:, axis] >= grid_resolution - margin, -normal, boundary)
        elif isinstance(boundary, Plane):
            if boundary.normal.size != dim:
                raise BoundaryError(f"Plane has {boundary.normal.size} components in a {dim}D "
                                    "scene; give point and normal with one entry per axis")
            add((nodes - boundary.point) @ boundary.normal < 0.0, boundary.normal, boundary)
        elif isinstance(boundary, HeightField):
            if boundary.heights.ndim != dim - 1:
                raise BoundaryError(
                    f"a {dim}D scene needs {dim - 1}-D terrain heights, got shape "
                    f"{boundary.heights.shape}")
            height, normal = boundary.surface(nodes)
            add(nodes[:, 1] < height, normal, boundary)
        else:
            raise BoundaryError(
                f"unknown boundary object {boundary!r}; use BoxWalls, Plane or HeightField")
    return tuple(layers)


def _project_layer(xp, v, normal, kind: int, friction: float):
    """Projected velocities of one layer's nodes, v of shape (k, d)."""
    if kind == 0:
        return xp.zeros_like(v)
    vn = xp.sum(v * normal, axis=1, keepdims=True)
    if kind == 1:
        return v - vn * normal
    if kind == 2:
        return xp.where(vn < 0, v - vn * normal, v)
    vt = v - vn * normal
    speed = xp.sqrt(xp.sum(vt * vt, axis=1, keepdims=True))
    safe = xp.where(speed > 0, speed, 1.0)
    scale = xp.maximum(0.0, 1.0 + friction * vn / safe)
    return xp.where(vn < 0, vt * scale, v)


def _project_layer_vjp(xp, v, normal, kind: int, friction: float, g):
    """∂L/∂v of one layer given ∂L/∂(projected v) = g, all shape (k, d)."""
    if kind == 0:
        return xp.zeros_like(g)
    vn = xp.sum(v * normal, axis=1, keepdims=True)
    gn = xp.sum(g * normal, axis=1, keepdims=True)
    g_slip = g - gn * normal
    if kind == 1:
        return g_slip
    if kind == 2:
        return xp.where(vn < 0, g_slip, g)
    vt = v - vn * normal
    speed = xp.sqrt(xp.sum(vt * vt, axis=1, keepdims=True))
    safe = xp.where(speed > 0, speed, 1.0)
    scale = 1.0 + friction * vn / safe
    tangent = vt / safe
    g_vt = xp.sum(g * vt, axis=1, keepdims=True)
    sliding = scale * g_slip + friction * g_vt * (normal / safe - vn * tangent / safe**2)
    sliding = xp.where(scale > 0, sliding, 0.0)
    return xp.where(vn < 0, sliding, g)


def project(xp, grid_v, layers) -> tuple[Any, list]:
    """Apply every layer in order to grid velocities (G, d); returns (new grid_v, inputs).

    ``inputs`` holds each layer's incoming node velocities, which :func:`project_vjp` needs.
    """
    grid_v = grid_v.copy()
    inputs = []
    for layer in layers:
        v = grid_v[layer.node_index]
        inputs.append(v)
        grid_v[layer.node_index] = _project_layer(xp, v, layer.normal, layer.kind,
                                                  layer.friction)
    return grid_v, inputs


def project_vjp(xp, layers, inputs, g_grid_v):
    """∂L/∂(grid v before the boundaries) given ∂L/∂(grid v after), shape (G, d)."""
    g = g_grid_v.copy()
    for layer, v in zip(reversed(layers), reversed(inputs), strict=True):
        g[layer.node_index] = _project_layer_vjp(xp, v, layer.normal, layer.kind,
                                                 layer.friction, g[layer.node_index])
    return g
