"""Points on the vine from body poses, with VJPs: tip, centreline vertices, keypoints.

The vine's centreline is the polyline from the base through every pin joint to the tip
(each telescoping prismatic pair is straight; a vine that everts passes through every
body's distal end). Keypoints are n points evenly spaced by arc
length along it, the model side of the paper's measurement map p(q).
"""

from __future__ import annotations

import numpy as np

from .model import VineModel

__all__ = [
    "tip_position",
    "tip_position_vjp",
    "centerline_vertices",
    "centerline_vertices_vjp",
    "keypoints",
    "keypoints_vjp",
    "vine_length",
]


def _ends(model: VineModel):
    """(body index, signed offset) of the centreline vertices: base end, pins, tip (every
    body's distal end when the vine everts: those not yet everted lie at the tip)."""
    n = model.body_count
    if model.evert:
        return np.arange(-1, n).clip(0), np.array([-model.half_length] + [model.half_length] * n)
    bodies = [0] + list(range(1, n - 1, 2)) + [n - 1]
    offsets = [-model.half_length] + [model.half_length] * (len(bodies) - 1)
    return np.asarray(bodies), np.asarray(offsets)


def centerline_vertices(model: VineModel, body_q) -> np.ndarray:
    """Base, pin and tip positions along the vine [m], shape (n_pins + 1, 2)."""
    q = np.asarray(body_q)
    bodies, offsets = _ends(model)
    angle = q[bodies, 2]
    return q[bodies, :2] + offsets[:, None] * np.stack([np.cos(angle), np.sin(angle)], axis=1)


def centerline_vertices_vjp(model: VineModel, body_q, g_vertices) -> np.ndarray:
    """∂L/∂body_q (N, 3) given ∂L/∂vertices (n_pins + 1, 2)."""
    q = np.asarray(body_q)
    bodies, offsets = _ends(model)
    angle = q[bodies, 2]
    normal = np.stack([-np.sin(angle), np.cos(angle)], axis=1)
    g = np.zeros_like(q, dtype=np.float64)
    np.add.at(g[:, :2], bodies, g_vertices)
    np.add.at(g[:, 2], bodies, offsets * np.sum(normal * g_vertices, axis=1))
    return g


def tip_position(model: VineModel, body_q) -> np.ndarray:
    """Position of the vine's tip (the last body's distal end) [m], shape (2,)."""
    return centerline_vertices(model, body_q)[-1]


def tip_position_vjp(model: VineModel, body_q, g_tip) -> np.ndarray:
    """∂L/∂body_q (N, 3) given ∂L/∂tip (2,)."""
    g_vertices = np.zeros((len(_ends(model)[0]), 2))
    g_vertices[-1] = g_tip
    return centerline_vertices_vjp(model, body_q, g_vertices)


def vine_length(model: VineModel, body_q) -> float:
    """Arc length of the centreline from base to tip [m]."""
    vertices = centerline_vertices(model, body_q)
    return float(np.sum(np.linalg.norm(np.diff(vertices, axis=0), axis=1)))


def _resample(vertices, count: int):
    segments = np.diff(vertices, axis=0)
    lengths = np.linalg.norm(segments, axis=1)
    cumulative = np.concatenate([[0.0], np.cumsum(lengths)])
    fraction = np.linspace(0.0, 1.0, count)
    s = fraction * cumulative[-1]
    index = np.clip(np.searchsorted(cumulative, s, side="right") - 1, 0, len(lengths) - 1)
    alpha = (s - cumulative[index]) / np.maximum(lengths[index], 1e-300)
    return segments, lengths, cumulative, fraction, index, alpha


def keypoints(model: VineModel, body_q, count: int) -> np.ndarray:
    """``count`` points evenly spaced by arc length from base to tip [m], shape (count, 2)."""
    if count < 2:
        raise ValueError(f"keypoints need count >= 2 (base and tip), got {count}")
    vertices = centerline_vertices(model, body_q)
    if len(vertices) < 2:
        raise ValueError("the vine's centreline needs at least two vertices")
    segments, _, _, _, index, alpha = _resample(vertices, count)
    return vertices[index] + alpha[:, None] * segments[index]


def keypoints_vjp(model: VineModel, body_q, count: int, g_points) -> np.ndarray:
    """∂L/∂body_q (N, 3) given ∂L/∂keypoints (count, 2).

    Keypoint j is ``V_i + α (V_{i+1} − V_i)`` with ``α = (f_j S − S_i) / ℓ_i``, where S is
    the total length, S_i the length up to vertex i and ℓ_i the segment's length; all of
    them depend on the vertices.
    """
    vertices = centerline_vertices(model, body_q)
    g_points = np.asarray(g_points, dtype=np.float64).reshape(count, 2)
    segments, lengths, _, fraction, index, alpha = _resample(vertices, count)
    units = segments / np.maximum(lengths, 1e-300)[:, None]
    g_vertices = np.zeros_like(vertices)
    np.add.at(g_vertices, index, (1.0 - alpha)[:, None] * g_points)
    np.add.at(g_vertices, index + 1, alpha[:, None] * g_points)
    g_alpha = np.sum(g_points * segments[index], axis=1)
    inv = 1.0 / np.maximum(lengths[index], 1e-300)
    # α = (f S − Σ_{k<i} ℓ_k) / ℓ_i
    g_lengths = np.zeros(len(lengths))
    total_weight = float(np.sum(g_alpha * fraction * inv))
    g_lengths += total_weight  # S = Σ ℓ_k
    for j in range(count):
        g_lengths[: index[j]] -= g_alpha[j] * inv[j]
    np.add.at(g_lengths, index, -g_alpha * alpha * inv)
    g_segments = g_lengths[:, None] * units  # ∂ℓ/∂segment
    g_vertices[1:] += g_segments
    g_vertices[:-1] -= g_segments
    return centerline_vertices_vjp(model, body_q, g_vertices)
