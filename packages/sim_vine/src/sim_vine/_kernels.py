"""Compiled (numba) assembly of the step QP, equal to the NumPy reference in step.py.

``assemble_rows`` fills the QP's vectors and constraint rows in one pass over the bodies,
joints and contact pairs (what :func:`sim_vine.step.assemble` computes with array
operations); ``osqp_data`` scales them and scatters them into the CSC data arrays of the
fixed OSQP pattern (what :meth:`sim_vine.qp.VineQP.solve` does with NumPy). The tests hold
the two paths equal to round-off.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from .model import VineModel
from .obstacles import Circle, Polygon, Wall

__all__ = ["ModelArrays", "model_arrays", "assemble_rows", "osqp_data", "rows_times_fast",
           "guess_active"]

_CIRCLE, _POLYGON, _WALL = 0, 1, 2


class ModelArrays(NamedTuple):
    """A model flattened into arrays for the kernels (obstacles encoded by type), which take
    it as a plain ``tuple(arrays)`` unpacked in field order: numba types a named tuple by its
    field names on every call (1 µs here), a plain tuple as fast as separate arguments."""

    half_length: float
    gyration_sq: float
    base: np.ndarray
    gravity: np.ndarray
    implicit: bool
    pin_parent: np.ndarray
    pin_child: np.ndarray
    prism_a: np.ndarray
    prism_b: np.ndarray
    growth_weights: np.ndarray
    contact_body: np.ndarray
    contact_offset: np.ndarray
    obstacle_type: np.ndarray
    obstacle_params: np.ndarray
    polygon_vertices: np.ndarray
    polygon_normals: np.ndarray
    polygon_count: np.ndarray


def model_arrays(model: VineModel) -> ModelArrays:
    """Encode ``model`` for the kernels."""
    n_obs = len(model.obstacles)
    most = max([len(o.vertices) for o in model.obstacles if isinstance(o, Polygon)] + [1])
    kinds = np.zeros(n_obs, dtype=np.int64)
    params = np.zeros((n_obs, 5))
    vertices = np.zeros((n_obs, most, 2))
    normals = np.zeros((n_obs, most, 2))
    counts = np.zeros(n_obs, dtype=np.int64)
    for j, obstacle in enumerate(model.obstacles):
        if isinstance(obstacle, Circle):
            kinds[j] = _CIRCLE
            params[j, :3] = (*obstacle.center, obstacle.radius)
        elif isinstance(obstacle, Wall):
            kinds[j] = _WALL
            params[j] = (*obstacle.start, *obstacle.end, obstacle.thickness)
        else:
            kinds[j] = _POLYGON
            v = obstacle.vertices
            edges = np.roll(v, -1, axis=0) - v
            face = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
            counts[j] = len(v)
            vertices[j, : len(v)] = v
            normals[j, : len(v)] = face / np.linalg.norm(face, axis=1)[:, None]
    parent, child = model.pins
    a, b = model.prismatics
    bodies, offsets = model.contact_points
    return ModelArrays(
        half_length=model.half_length, gyration_sq=model.gyration**2, base=model.base,
        gravity=model.gravity, implicit=bool(model.implicit_springs), pin_parent=parent,
        pin_child=child, prism_a=a, prism_b=b, growth_weights=model.growth_weights,
        contact_body=bodies, contact_offset=offsets, obstacle_type=kinds,
        obstacle_params=params, polygon_vertices=vertices, polygon_normals=normals,
        polygon_count=counts)


@numba.njit(cache=True)
def _segment(px, py, ax, ay, bx, by):
    ex, ey = bx - ax, by - ay
    t = ((px - ax) * ex + (py - ay) * ey) / (ex * ex + ey * ey)
    t = min(max(t, 0.0), 1.0)
    return ax + t * ex, ay + t * ey, 0.0 < t < 1.0


@numba.njit(cache=True)
def _distance(kind, params, vertices, normals, count, px, py):
    """Signed distance and outward unit normal of one obstacle at point (px, py)."""
    if kind == _CIRCLE:
        dx, dy = px - params[0], py - params[1]
        dist = np.sqrt(dx * dx + dy * dy)
        safe = max(dist, 1e-300)
        return dist - params[2], dx / safe, dy / safe
    if kind == _WALL:
        cx, cy, _ = _segment(px, py, params[0], params[1], params[2], params[3])
        dx, dy = px - cx, py - cy
        dist = np.sqrt(dx * dx + dy * dy)
        safe = max(dist, 1e-300)
        return dist - 0.5 * params[4], dx / safe, dy / safe
    best_height, best_face = -np.inf, 0
    for k in range(count):
        h = (px - vertices[k, 0]) * normals[k, 0] + (py - vertices[k, 1]) * normals[k, 1]
        if h > best_height:
            best_height, best_face = h, k
    if best_height <= 0.0:
        return best_height, normals[best_face, 0], normals[best_face, 1]
    best, nx, ny = np.inf, 0.0, 0.0
    for k in range(count):
        k1 = (k + 1) % count
        cx, cy, interior = _segment(px, py, vertices[k, 0], vertices[k, 1], vertices[k1, 0],
                                    vertices[k1, 1])
        dx, dy = px - cx, py - cy
        dist = np.sqrt(dx * dx + dy * dy)
        if dist < best:
            best = dist
            if interior:
                nx, ny = normals[k, 0], normals[k, 1]
            else:
                safe = max(dist, 1e-300)
                nx, ny = dx / safe, dy / safe
    return best, nx, ny


@numba.njit(cache=True)
def _assemble(model, q, v, rate, stiffness, damping, friction, mass, dt, out):
    (d, r2, base, gravity, implicit, pin_parent, pin_child, prism_a, prism_b, growth_w, cp_body,
     cp_offset, obs_type, obs_params, poly_vertices, poly_normals, poly_count) = model
    mass_diag, spring_w, rhs, rows, lower, upper, tangent = out
    n = q.shape[0]
    for i in range(n):
        mass_diag[i, 0] = mass[i]
        mass_diag[i, 1] = mass[i]
        mass_diag[i, 2] = mass[i] * r2
        rhs[i, 0] = mass[i] * (v[i, 0] + dt * gravity[0])
        rhs[i, 1] = mass[i] * (v[i, 1] + dt * gravity[1])
        rhs[i, 2] = mass[i] * r2 * v[i, 2]
    row = 0
    for j in range(pin_parent.shape[0]):
        a, b = pin_parent[j], pin_child[j]
        ta_x, ta_y = 0.0, 0.0
        parent_angle, parent_rate = base[2], 0.0
        ea_x, ea_y = base[0], base[1]
        if a >= 0:
            ta_x, ta_y = np.cos(q[a, 2]), np.sin(q[a, 2])
            parent_angle, parent_rate = q[a, 2], v[a, 2]
            ea_x, ea_y = q[a, 0] + d * ta_x, q[a, 1] + d * ta_y
        tb_x, tb_y = np.cos(q[b, 2]), np.sin(q[b, 2])
        torque = -stiffness[j] * (q[b, 2] - parent_angle)
        if implicit:
            spring_w[j] = dt * dt * stiffness[j] + dt * damping[j]
        else:
            spring_w[j] = 0.0
            torque -= damping[j] * (v[b, 2] - parent_rate)
        rhs[b, 2] += dt * torque
        if a >= 0:
            rhs[a, 2] -= dt * torque
        for k in range(2):
            for c in range(6):
                rows[row + k, c] = 0.0
        if a >= 0:
            rows[row, 0] = 1.0
            rows[row, 2] = -d * ta_y
            rows[row + 1, 1] = 1.0
            rows[row + 1, 2] = d * ta_x
        rows[row, 3] = -1.0
        rows[row, 5] = -d * tb_y
        rows[row + 1, 4] = -1.0
        rows[row + 1, 5] = d * tb_x
        cx = ea_x - (q[b, 0] - d * tb_x)
        cy = ea_y - (q[b, 1] - d * tb_y)
        lower[row], upper[row] = -cx / dt, -cx / dt
        lower[row + 1], upper[row + 1] = -cy / dt, -cy / dt
        row += 2
    n_pr = prism_a.shape[0]
    growth_row = row + 2 * n_pr
    for j in range(n_pr):
        a, b = prism_a[j], prism_b[j]
        ta_x, ta_y = np.cos(q[a, 2]), np.sin(q[a, 2])
        tb_x, tb_y = np.cos(q[b, 2]), np.sin(q[b, 2])
        na_x, na_y, nb_x, nb_y = -ta_y, ta_x, -tb_y, tb_x
        dx, dy = q[b, 0] - q[a, 0], q[b, 1] - q[a, 1]
        r1, r2_, g = row + 2 * j, row + 2 * j + 1, growth_row + j
        rows[r1, 0], rows[r1, 1], rows[r1, 2] = -na_x, -na_y, -(ta_x * dx + ta_y * dy)
        rows[r1, 3], rows[r1, 4], rows[r1, 5] = na_x, na_y, 0.0
        rows[r2_, 0], rows[r2_, 1], rows[r2_, 2] = -nb_x, -nb_y, 0.0
        rows[r2_, 3], rows[r2_, 4], rows[r2_, 5] = nb_x, nb_y, -(tb_x * dx + tb_y * dy)
        c1 = na_x * dx + na_y * dy
        c2 = nb_x * dx + nb_y * dy
        lower[r1], upper[r1] = -c1 / dt, -c1 / dt
        lower[r2_], upper[r2_] = -c2 / dt, -c2 / dt
        rows[g, 0], rows[g, 1], rows[g, 2] = -ta_x, -ta_y, na_x * dx + na_y * dy
        rows[g, 3], rows[g, 4], rows[g, 5] = ta_x, ta_y, 0.0
        lower[g], upper[g] = rate * growth_w[j], rate * growth_w[j]
    row = growth_row + n_pr
    n_obs = obs_type.shape[0]
    pair = 0
    for i in range(cp_body.shape[0]):
        b, s = cp_body[i], cp_offset[i]
        t_x, t_y = np.cos(q[b, 2]), np.sin(q[b, 2])
        n_x, n_y = -t_y, t_x
        px, py = q[b, 0] + s * t_x, q[b, 1] + s * t_y
        for o in range(n_obs):
            phi, nx, ny = _distance(obs_type[o], obs_params[o], poly_vertices[o],
                                    poly_normals[o], poly_count[o], px, py)
            tx, ty = -ny, nx
            for k in range(2):
                sign = 1.0 if k == 0 else -1.0
                ex, ey = nx + sign * friction * tx, ny + sign * friction * ty
                r = row + 2 * pair + k
                rows[r, 0], rows[r, 1], rows[r, 2] = 0.0, 0.0, 0.0
                rows[r, 3], rows[r, 4], rows[r, 5] = ex, ey, s * (ex * n_x + ey * n_y)
                lower[r], upper[r] = -phi / dt, np.inf
            tangent[pair, 0], tangent[pair, 1], tangent[pair, 2] = 0.0, 0.0, 0.0
            tangent[pair, 3], tangent[pair, 4] = tx, ty
            tangent[pair, 5] = s * (tx * n_x + ty * n_y)
            pair += 1


def assemble_rows(arrays: ModelArrays, q, v, rate, stiffness, damping, friction, mass, dt,
                  row_count: int):
    """``(mass_diag, spring_w, rhs, rows, lower, upper, tangent)`` as in ``step.assemble``."""
    n = q.shape[0]
    pairs = len(arrays.contact_body) * len(arrays.obstacle_type)
    out = (np.empty((n, 3)), np.empty(len(arrays.pin_parent)), np.empty((n, 3)),
           np.empty((row_count, 6)), np.empty(row_count), np.empty(row_count),
           np.empty((pairs, 6)))
    _assemble(tuple(arrays), q, v, float(rate), stiffness, damping, float(friction), mass,
              float(dt), out)
    return out


@numba.njit(cache=True)
def osqp_data(mass_diag, spring_w, rhs, rows, lower, upper, pin_parent, pin_child,
              p_order, p_rows, p_cols, a_slots, a_rows, a_cols, m):
    """Scaled OSQP data: (Px, Ax, q, l, u, column scale, row scale) in the CSC orders."""
    n = mass_diag.shape[0] * 3
    col_scale = np.empty(n)
    entries = np.empty(n + pin_parent.shape[0])
    for i in range(mass_diag.shape[0]):
        for k in range(3):
            entries[3 * i + k] = mass_diag[i, k]
            col_scale[3 * i + k] = 1.0 / np.sqrt(mass_diag[i, k])
    real = 0
    for j in range(pin_parent.shape[0]):
        entries[3 * pin_child[j] + 2] += spring_w[j]
        if pin_parent[j] >= 0:
            entries[3 * pin_parent[j] + 2] += spring_w[j]
            entries[n + real] = -spring_w[j]
            real += 1
    px = np.empty(p_order.shape[0])
    for k in range(p_order.shape[0]):
        px[k] = entries[p_order[k]] * col_scale[p_rows[k]] * col_scale[p_cols[k]]
    flat = rows.reshape(-1)
    ax = np.empty(a_slots.shape[0])
    norm_sq = np.zeros(m)
    for k in range(a_slots.shape[0]):
        value = flat[a_slots[k]] * col_scale[a_cols[k]]
        ax[k] = value
        norm_sq[a_rows[k]] += value * value
    row_scale = np.empty(m)
    for i in range(m):
        row_scale[i] = 1.0 / max(np.sqrt(norm_sq[i]), 1e-300)
    for k in range(a_slots.shape[0]):
        ax[k] *= row_scale[a_rows[k]]
    q = np.empty(n)
    flat_rhs = rhs.reshape(-1)
    for i in range(n):
        q[i] = -flat_rhs[i] * col_scale[i]
    lo = np.empty(m)
    up = np.empty(m)
    for i in range(m):
        lo[i] = lower[i] * row_scale[i]
        up[i] = min(upper[i] * row_scale[i], 1e30)
    return px, ax, q, lo, up, col_scale, row_scale


@numba.njit(cache=True)
def rows_times_fast(row_bodies, rows, v):
    """``A v`` for two-body rows (m, 6) and velocities (N, 3), as ``rows_times``."""
    out = np.zeros(row_bodies.shape[0])
    for r in range(row_bodies.shape[0]):
        for side in range(2):
            body = row_bodies[r, side]
            if body >= 0:
                for k in range(3):
                    out[r] += rows[r, 3 * side + k] * v[body, k]
    return out


@numba.njit(cache=True)
def guess_active(row_bodies, rows, v, lower, row_scale, scaled_y, equality_count,
                 contact_start, friction_zero, tangent_rows):
    """Active rows from OSQP's iterate: equalities, and contact rows whose scaled slack is
    below minus their scaled multiplier (the rule of OSQP's polishing). At μ = 0 a pair's
    two coinciding cone edges collapse onto the one opposing the sliding (``T·v_c``).
    Same as ``VineQP.guess_active_reference``."""
    m = row_bodies.shape[0]
    active = np.zeros(m, dtype=np.bool_)
    for r in range(equality_count):
        active[r] = True
    values = rows_times_fast(row_bodies, rows, v)
    for r in range(contact_start, m):
        active[r] = (values[r] - lower[r]) * row_scale[r] < -scaled_y[r]
    if friction_zero:
        for p in range(tangent_rows.shape[0]):
            r = contact_start + 2 * p
            either = active[r] or active[r + 1]
            body = row_bodies[r, 1]
            sliding = 0.0
            for k in range(3):
                sliding += tangent_rows[p, 3 + k] * v[body, k]
            active[r] = either and not sliding > 0.0
            active[r + 1] = either and sliding > 0.0
    return active
