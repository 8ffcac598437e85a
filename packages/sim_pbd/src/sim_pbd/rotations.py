"""Quaternion helpers for the step and the kinematics, each with its vector-Jacobian product.

Quaternions are (w, x, y, z) arrays of shape (4,), vectors shape (3,), matrices (3, 3).
A ``*_vjp`` function takes the forward inputs and the cotangent ``g`` of the output and
returns the cotangents of the inputs (a tuple when there are several), so chains of these
calls form the hand-written adjoints of :mod:`sim_pbd.kinematics` and :mod:`sim_pbd.step`.

:func:`quat_to_matrix` uses the homogeneous form ``(w² - u·u) I + 2 u uᵀ + 2 w [u]×``,
which is the rotation matrix for a unit quaternion (callers normalize first) and a
polynomial, so its VJP is exact for any input.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "quat_rotate_rows",
    "quat_multiply",
    "quat_multiply_vjp",
    "quat_conjugate",
    "quat_conjugate_vjp",
    "quat_normalize",
    "quat_normalize_vjp",
    "quat_integrate",
    "quat_integrate_vjp",
    "quat_to_matrix",
    "quat_to_matrix_vjp",
    "quat_rotate",
    "quat_rotate_vjp",
    "quat_from_axis_angle",
    "quat_from_axis_angle_vjp",
    "skew",
    "skew_vjp",
]


def quat_multiply(a, b) -> np.ndarray:
    """Hamilton product a ⊗ b, shape (4,)."""
    aw, au = a[0], a[1:]
    bw, bu = b[0], b[1:]
    out = np.empty(4)
    out[0] = aw * bw - au @ bu
    out[1:] = aw * bu + bw * au + np.cross(au, bu)
    return out


def quat_multiply_vjp(a, b, g) -> tuple[np.ndarray, np.ndarray]:
    """(∂L/∂a, ∂L/∂b) of a ⊗ b given ∂L/∂(a ⊗ b)."""
    aw, au = a[0], a[1:]
    bw, bu = b[0], b[1:]
    gw, gu = g[0], g[1:]
    ga = np.empty(4)
    gb = np.empty(4)
    ga[0] = gw * bw + gu @ bu
    ga[1:] = -gw * bu + bw * gu + np.cross(bu, gu)
    gb[0] = gw * aw + gu @ au
    gb[1:] = -gw * au + aw * gu + np.cross(gu, au)
    return ga, gb


def quat_conjugate(q) -> np.ndarray:
    """(w, -x, -y, -z): the inverse of a unit quaternion, shape (4,)."""
    return np.array([q[0], -q[1], -q[2], -q[3]])


def quat_conjugate_vjp(g) -> np.ndarray:
    """∂L/∂q of the conjugate given ∂L/∂conj(q) (the map is its own transpose)."""
    return quat_conjugate(g)


def quat_normalize(q) -> np.ndarray:
    """q / |q|, shape (4,). Raises ValueError for a zero quaternion."""
    norm = float(np.sqrt(q @ q))
    if not norm > 0.0:
        raise ValueError(f"cannot normalize the quaternion {q}: its norm is {norm}; "
                         "orientations must be nonzero quaternions (w, x, y, z)")
    return q / norm


def quat_normalize_vjp(q, g) -> np.ndarray:
    """∂L/∂q of q / |q| given ∂L/∂(q / |q|): the tangential part of g over |q|."""
    norm = float(np.sqrt(q @ q))
    unit = q / norm
    return (g - unit * (unit @ g)) / norm


def quat_integrate(q, dphi) -> np.ndarray:
    """The small-rotation update q + ½ (0, Δφ) ⊗ q (not normalized), shape (4,).

    Δφ [rad], shape (3,), is a rotation vector in the world frame (a left perturbation).
    """
    out = q.copy()
    out[0] -= 0.5 * (dphi @ q[1:])
    out[1:] += 0.5 * (q[0] * dphi + np.cross(dphi, q[1:]))
    return out


def quat_integrate_vjp(q, dphi, g) -> tuple[np.ndarray, np.ndarray]:
    """(∂L/∂q, ∂L/∂Δφ) of :func:`quat_integrate` given ∂L/∂out."""
    gw, gu = g[0], g[1:]
    gq = g.copy()
    gq[0] += 0.5 * (dphi @ gu)
    gq[1:] += 0.5 * (-gw * dphi + np.cross(gu, dphi))
    gdphi = 0.5 * (-gw * q[1:] + q[0] * gu + np.cross(q[1:], gu))
    return gq, gdphi


def skew(v) -> np.ndarray:
    """The cross-product matrix [v]× with [v]× u = v × u, shape (3, 3)."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def skew_vjp(g) -> np.ndarray:
    """∂L/∂v of [v]× given ∂L/∂[v]× (3, 3)."""
    return np.array([g[2, 1] - g[1, 2], g[0, 2] - g[2, 0], g[1, 0] - g[0, 1]])


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix of a unit quaternion (body to world), shape (3, 3)."""
    w, u = q[0], q[1:]
    return (w * w - u @ u) * np.eye(3) + 2.0 * np.outer(u, u) + 2.0 * w * skew(u)


def quat_to_matrix_vjp(q, g) -> np.ndarray:
    """∂L/∂q of :func:`quat_to_matrix` given ∂L/∂R (3, 3)."""
    w, u = q[0], q[1:]
    trace = g[0, 0] + g[1, 1] + g[2, 2]
    vee = skew_vjp(g)
    out = np.empty(4)
    out[0] = 2.0 * w * trace + 2.0 * (u @ vee)
    out[1:] = -2.0 * trace * u + 2.0 * ((g + g.T) @ u) + 2.0 * w * vee
    return out


def quat_rotate(q, v) -> np.ndarray:
    """R(q) v: the body vector v expressed in the world, shape (3,)."""
    return quat_to_matrix(q) @ v


def quat_rotate_rows(q, v) -> np.ndarray:
    """R(q_k) v_k for each row k of unit quaternions q (k, 4) and vectors v (k, 3), shape
    (k, 3): v + 2 w (u × v) + 2 u × (u × v)."""
    q, v = np.asarray(q, dtype=np.float64), np.asarray(v, dtype=np.float64)
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_rotate_vjp(q, v, g) -> tuple[np.ndarray, np.ndarray]:
    """(∂L/∂q, ∂L/∂v) of R(q) v given ∂L/∂(R(q) v)."""
    return quat_to_matrix_vjp(q, np.outer(g, v)), quat_to_matrix(q).T @ g


def quat_from_axis_angle(axis, angle: float) -> np.ndarray:
    """The rotation by ``angle`` [rad] about the unit ``axis`` (3,), shape (4,)."""
    half = 0.5 * angle
    out = np.empty(4)
    out[0] = np.cos(half)
    out[1:] = np.sin(half) * np.asarray(axis, dtype=np.float64)
    return out


def quat_from_axis_angle_vjp(axis, angle: float, g) -> float:
    """∂L/∂angle of :func:`quat_from_axis_angle` given ∂L/∂q (the axis is a constant)."""
    half = 0.5 * angle
    return 0.5 * (-np.sin(half) * g[0] + np.cos(half) * (np.asarray(axis) @ g[1:]))
