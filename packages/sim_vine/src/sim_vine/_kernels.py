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
           "guess_active", "everted_length", "evert_mass_factors", "evert_material_lengths",
           "evert_gyration_squares", "evert_slot_backward"]

_CIRCLE, _POLYGON, _WALL = 0, 1, 2


class ModelArrays(NamedTuple):
    """A model flattened into arrays for the kernels (obstacles encoded by type; ``evert``:
    the vine grows by eversion, :mod:`sim_vine.evert`, and its pins are every joint), which take
    it as a plain ``tuple(arrays)`` unpacked in field order: numba types a named tuple by its
    field names on every call (1 µs here), a plain tuple as fast as separate arguments.
    ``gyration_sq``: the model's radius of gyration squared for every body [m²], shape (N,),
    the kernels' per-body ``gyration_sq`` argument when the inertias do not grow."""

    half_length: float
    gyration_sq: np.ndarray
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
    evert: bool


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
        half_length=model.half_length,
        gyration_sq=np.full(model.body_count, model.gyration**2), base=model.base,
        gravity=model.gravity, implicit=bool(model.implicit_springs), pin_parent=parent,
        pin_child=child, prism_a=a, prism_b=b, growth_weights=model.growth_weights,
        contact_body=bodies, contact_offset=offsets, obstacle_type=kinds,
        obstacle_params=params, polygon_vertices=vertices, polygon_normals=normals,
        polygon_count=counts, evert=bool(model.evert))


@numba.njit(cache=True)
def _segment(px, py, ax, ay, bx, by):
    ex, ey = bx - ax, by - ay
    t = ((px - ax) * ex + (py - ay) * ey) / (ex * ex + ey * ey)
    t = min(max(t, 0.0), 1.0)
    return ax + t * ex, ay + t * ey, 0.0 < t < 1.0


@numba.njit(cache=True)
def _distance(kind, params, vertices, normals, count, px, py):
    """Signed distance, outward unit normal and the normal's derivative ``∂N/∂point``
    (symmetric: entries 00, 01, 11) [1/m] of one obstacle at point (px, py), as
    :func:`sim_vine.obstacles.signed_distance`: radial ``(I − N Nᵀ)/|δ|`` from a centre, a
    segment's end or a corner, zero beside a segment or face."""
    if kind == _CIRCLE:
        dx, dy = px - params[0], py - params[1]
        dist = np.sqrt(dx * dx + dy * dy)
        safe = max(dist, 1e-300)
        nx, ny = dx / safe, dy / safe
        return dist - params[2], nx, ny, (1 - nx * nx) / safe, -nx * ny / safe, \
            (1 - ny * ny) / safe
    if kind == _WALL:
        cx, cy, interior = _segment(px, py, params[0], params[1], params[2], params[3])
        dx, dy = px - cx, py - cy
        dist = np.sqrt(dx * dx + dy * dy)
        safe = max(dist, 1e-300)
        nx, ny = dx / safe, dy / safe
        if interior:
            return dist - 0.5 * params[4], nx, ny, 0.0, 0.0, 0.0
        return dist - 0.5 * params[4], nx, ny, (1 - nx * nx) / safe, -nx * ny / safe, \
            (1 - ny * ny) / safe
    best_height, best_face = -np.inf, 0
    for k in range(count):
        h = (px - vertices[k, 0]) * normals[k, 0] + (py - vertices[k, 1]) * normals[k, 1]
        if h > best_height:
            best_height, best_face = h, k
    if best_height <= 0.0:
        return best_height, normals[best_face, 0], normals[best_face, 1], 0.0, 0.0, 0.0
    best, nx, ny, radial = np.inf, 0.0, 0.0, False
    for k in range(count):
        k1 = (k + 1) % count
        cx, cy, interior = _segment(px, py, vertices[k, 0], vertices[k, 1], vertices[k1, 0],
                                    vertices[k1, 1])
        dx, dy = px - cx, py - cy
        dist = np.sqrt(dx * dx + dy * dy)
        if dist < best:
            best = dist
            radial = not interior
            if interior:
                nx, ny = normals[k, 0], normals[k, 1]
            else:
                safe = max(dist, 1e-300)
                nx, ny = dx / safe, dy / safe
    if not radial:
        return best, nx, ny, 0.0, 0.0, 0.0
    safe = max(best, 1e-300)
    return best, nx, ny, (1 - nx * nx) / safe, -nx * ny / safe, (1 - ny * ny) / safe



@numba.njit(cache=True)
def _contact_point(q, body, offset):
    """(n_x, n_y, p_x, p_y): the body's normal (its axis turned +90°) and the world point
    [m] ``offset`` [m] along its axis from its centre, q (bodies, 3) = (x, y, θ)."""
    t_x, t_y = np.cos(q[body, 2]), np.sin(q[body, 2])
    return -t_y, t_x, q[body, 0] + offset * t_x, q[body, 1] + offset * t_y

@numba.njit(cache=True)
def everted_length(q, d):
    """E [m]: the length everted beyond body 0, ``Σ_{j≥1} (2d + σ_j)``
    (``evert.everted_length``)."""
    total = 0.0
    for j in range(1, q.shape[0]):
        tax, tay = np.cos(q[j - 1, 2]), np.sin(q[j - 1, 2])
        tbx, tby = np.cos(q[j, 2]), np.sin(q[j, 2])
        dx = q[j, 0] - d * tbx - q[j - 1, 0] - d * tax
        dy = q[j, 1] - d * tby - q[j - 1, 1] - d * tay
        total += 2.0 * d + tax * dx + tay * dy
    return total


@numba.njit(cache=True)
def _evert_frame(d, base, q, j):
    """(t_a, n_a, t_b, n_b, δ) of everting joint j: the parent's axis and normal (the
    base's for j = 0), the child's, and the child's proximal end minus the parent's distal
    end (the base point for j = 0)."""
    if j == 0:
        tax, tay = np.cos(base[2]), np.sin(base[2])
        ox, oy = base[0], base[1]
    else:
        tax, tay = np.cos(q[j - 1, 2]), np.sin(q[j - 1, 2])
        ox, oy = q[j - 1, 0] + d * tax, q[j - 1, 1] + d * tay
    tbx, tby = np.cos(q[j, 2]), np.sin(q[j, 2])
    return (tax, tay, -tay, tax, tbx, tby, -tby, tbx, q[j, 0] - d * tbx - ox,
            q[j, 1] - d * tby - oy)


@numba.njit(cache=True)
def evert_mass_factors(d, base, q, fraction):
    """Each body's mass over its design mass for a vine that everts, shape (N,): ``f + (1 −
    f)(2d + σ_j)/(2d)`` for j ≥ 1 and 1 for body 0 (``everted_mass.everted_masses``; q (N, 3)
    poses, d the half body length [m], f the share a body has before it everts)."""
    n = q.shape[0]
    out = np.ones(n)
    for j in range(1, n):
        tax, tay, _, _, _, _, _, _, dx, dy = _evert_frame(d, base, q, j)
        share = 1.0 + (tax * dx + tay * dy) / (2.0 * d)
        out[j] = fraction + (1.0 - fraction) * share
    return out


@numba.njit(cache=True)
def evert_material_lengths(d, base, q):
    """Length of vine material each body of a vine that everts carries [m], shape (N,):
    ``2d + σ_j`` for j ≥ 1 (σ_j its slot offset) and 2d for body 0
    (``everted_mass.material_lengths``)."""
    n = q.shape[0]
    out = np.full(n, 2.0 * d)
    for j in range(1, n):
        tax, tay, _, _, _, _, _, _, dx, dy = _evert_frame(d, base, q, j)
        out[j] += tax * dx + tay * dy
    return out


@numba.njit(cache=True)
def evert_gyration_squares(d, base, q):
    """``(r², ∂r²/∂ℓ)`` [m², m] per body of a vine that everts, shape (N,) each: ``ℓ²/3 −
    d ℓ + d²`` and ``2ℓ/3 − d`` of its material length ℓ (``evert_material_lengths``;
    ``everted_mass.gyration_squares``), in one pass: it runs every step."""
    lengths = evert_material_lengths(d, base, q)
    r2 = np.empty_like(lengths)
    slope = np.empty_like(lengths)
    for j in range(lengths.shape[0]):
        ell = lengths[j]
        r2[j] = ell * (ell / 3.0 - d) + d * d
        slope[j] = ell * (2.0 / 3.0) - d
    return r2, slope


@numba.njit(cache=True)
def evert_slot_backward(d, base, q, g_sigma, g_q):
    """``g_q += Σ_{j≥1} g_σ_j ∂σ_j/∂q`` (N, 3): the slot offsets' VJP through their rows
    (``everted_mass.everted_masses_vjp``'s ``rows_transpose_times`` of ``evert.joint_rows``)."""
    for j in range(1, q.shape[0]):
        tax, tay, nax, nay, tbx, tby, nbx, nby, dx, dy = _evert_frame(d, base, q, j)
        g = g_sigma[j]
        g_q[j - 1, 0] -= g * tax
        g_q[j - 1, 1] -= g * tay
        g_q[j - 1, 2] += g * (nax * dx + nay * dy)
        g_q[j, 0] += g * tax
        g_q[j, 1] += g * tay
        g_q[j, 2] -= g * d * (tax * nbx + tay * nby)


@numba.njit(cache=True)
def _evert_rows(d, base, q, grown, dt, rows, lower, upper):
    """The joint rows ``(ν_j, lock_j)`` (rows 0 … 2N − 1) and slot rows σ_j (2N … 3N − 1)
    of a vine that everts, with their bounds, after which ``grown`` [m] is everted beyond
    body 0 (``evert.joint_rows``, ``evert.joint_bounds``)."""
    n = q.shape[0]
    full = 2.0 * d
    for j in range(n):
        tax, tay, nax, nay, tbx, tby, nbx, nby, dx, dy = _evert_frame(d, base, q, j)
        r0, r1, r2 = 2 * j, 2 * n + j, 2 * j + 1
        along = tax * dx + tay * dy
        across = nax * dx + nay * dy
        mover = 1.0 if j > 0 else 0.0  # the base does not move
        rows[r0, 0], rows[r0, 1] = -nax * mover, -nay * mover
        rows[r0, 2] = (-along - d) * mover
        rows[r0, 3], rows[r0, 4], rows[r0, 5] = nax, nay, -d * (nax * nbx + nay * nby)
        rows[r1, 0], rows[r1, 1], rows[r1, 2] = -tax * mover, -tay * mover, across * mover
        rows[r1, 3], rows[r1, 4], rows[r1, 5] = tax, tay, -d * (tax * nbx + tay * nby)
        rows[r2, 0], rows[r2, 1], rows[r2, 2] = 0.0, 0.0, -mover
        rows[r2, 3], rows[r2, 4], rows[r2, 5] = 0.0, 0.0, 1.0
        lower[r0], upper[r0] = -across / dt, -across / dt
        target = 0.0
        if j > 0:
            target = min(max(grown - full * (j - 1), 0.0), full) - full
        lower[r1], upper[r1] = (target - along) / dt, (target - along) / dt
        if target < 0.0:  # not out after this step: held straight
            angle = q[j, 2] - (q[j - 1, 2] if j > 0 else base[2])
            lower[r2], upper[r2] = -angle / dt, -angle / dt
        else:
            lower[r2], upper[r2] = -np.inf, np.inf


@numba.njit(cache=True)
def _assemble(model, q, v, rate, stiffness, damping, rest_angle, friction, mass, r2, ground,
              dt, out):
    (d, _, base, gravity, implicit, pin_parent, pin_child, prism_a, prism_b, growth_w, cp_body,
     cp_offset, obs_type, obs_params, poly_vertices, poly_normals, poly_count, evert) = model
    mass_diag, spring_w, rhs, rows, lower, upper, tangent = out
    n = q.shape[0]
    for i in range(n):
        drag = mass[i] * (1.0 + dt * ground[i])  # implicit ground friction: P = M (1 + Δt c_g)
        mass_diag[i, 0] = drag
        mass_diag[i, 1] = drag
        mass_diag[i, 2] = drag * r2[i]
        rhs[i, 0] = mass[i] * (v[i, 0] + dt * gravity[0])
        rhs[i, 1] = mass[i] * (v[i, 1] + dt * gravity[1])
        rhs[i, 2] = mass[i] * r2[i] * v[i, 2]
    for j in range(pin_parent.shape[0]):
        a, b = pin_parent[j], pin_child[j]
        parent_angle, parent_rate = base[2], 0.0
        if a >= 0:
            parent_angle, parent_rate = q[a, 2], v[a, 2]
        torque = -stiffness[j] * (q[b, 2] - parent_angle - rest_angle[j])
        if implicit:
            spring_w[j] = dt * dt * stiffness[j] + dt * damping[j]
        else:
            spring_w[j] = 0.0
            torque -= damping[j] * (v[b, 2] - parent_rate)
        rhs[b, 2] += dt * torque
        if a >= 0:
            rhs[a, 2] -= dt * torque
    grown = np.inf  # everted length after the step (a vine that everts): bodies beyond it
    if evert:       # have no contact rows
        grown = everted_length(q, d) + dt * rate
        _evert_rows(d, base, q, grown, dt, rows, lower, upper)
        row = 3 * n
    else:
        row = _pin_and_prismatic_rows(d, base, q, rate, growth_w, pin_parent, pin_child,
                                      prism_a, prism_b, dt, rows, lower, upper)
    n_obs = obs_type.shape[0]
    pair = 0
    for i in range(cp_body.shape[0]):
        b, s = cp_body[i], cp_offset[i]
        n_x, n_y, px, py = _contact_point(q, b, s)
        out_now = b == 0 or grown - 2.0 * d * (b - 1) > 0.0
        for o in range(n_obs):
            phi, nx, ny, _, _, _ = _distance(obs_type[o], obs_params[o], poly_vertices[o],
                                             poly_normals[o], poly_count[o], px, py)
            tx, ty = -ny, nx
            for k in range(2):
                sign = 1.0 if k == 0 else -1.0
                ex, ey = nx + sign * friction * tx, ny + sign * friction * ty
                r = row + 2 * pair + k
                rows[r, 0], rows[r, 1], rows[r, 2] = 0.0, 0.0, 0.0
                rows[r, 3], rows[r, 4], rows[r, 5] = ex, ey, s * (ex * n_x + ey * n_y)
                lower[r], upper[r] = (-phi / dt if out_now else -np.inf), np.inf
            tangent[pair, 0], tangent[pair, 1], tangent[pair, 2] = 0.0, 0.0, 0.0
            tangent[pair, 3], tangent[pair, 4] = tx, ty
            tangent[pair, 5] = s * (tx * n_x + ty * n_y)
            pair += 1


@numba.njit(cache=True)
def _pin_and_prismatic_rows(d, base, q, rate, growth_w, pin_parent, pin_child, prism_a,
                            prism_b, dt, rows, lower, upper):
    """The pin, prismatic and growth rows with their bounds (every_prismatic and tip
    growth); returns the first contact row."""
    row = 0
    for j in range(pin_parent.shape[0]):
        a, b = pin_parent[j], pin_child[j]
        ta_x, ta_y = 0.0, 0.0
        ea_x, ea_y = base[0], base[1]
        if a >= 0:
            ta_x, ta_y = np.cos(q[a, 2]), np.sin(q[a, 2])
            ea_x, ea_y = q[a, 0] + d * ta_x, q[a, 1] + d * ta_y
        tb_x, tb_y = np.cos(q[b, 2]), np.sin(q[b, 2])
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
    return growth_row + n_pr


def assemble_rows(arrays: ModelArrays, q, v, rate, stiffness, damping, rest_angle, friction,
                  mass, gyration_sq, ground_friction, dt, row_count: int):
    """``(mass_diag, spring_w, rhs, rows, lower, upper, tangent)`` as in ``step.assemble``
    (``gyration_sq``: each body's radius of gyration squared [m²], shape (N,))."""
    n = q.shape[0]
    pairs = len(arrays.contact_body) * len(arrays.obstacle_type)
    out = (np.empty((n, 3)), np.empty(len(arrays.pin_parent)), np.empty((n, 3)),
           np.empty((row_count, 6)), np.empty(row_count), np.empty(row_count),
           np.empty((pairs, 6)))
    _assemble(tuple(arrays), q, v, float(rate), stiffness, damping, rest_angle,
              float(friction), mass, gyration_sq, ground_friction, float(dt), out)
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
        lo[i] = max(lower[i] * row_scale[i], -1e30)
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
    """Active rows from OSQP's iterate: bounded equalities, and contact rows whose scaled slack is
    below minus their scaled multiplier (the rule of OSQP's polishing). At μ = 0 a pair's
    two coinciding cone edges collapse onto the one opposing the sliding (``T·v_c``).
    Same as ``VineQP.guess_active_reference``."""
    m = row_bodies.shape[0]
    active = np.zeros(m, dtype=np.bool_)
    for r in range(equality_count):
        active[r] = lower[r] > -np.inf  # a free row (an everted joint's lock) is inactive
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


@numba.njit(cache=True)
def _joint_curvature(model, q, weights, direction, sign, out):
    """``out += sign · ∂/∂q [λᵀ J(q) w]`` for the joint rows (``constraints.joint_curvature``)."""
    d, pin_parent, pin_child, prism_a, prism_b = model[0], model[5], model[6], model[7], \
        model[8]
    n_pins = pin_parent.shape[0]
    for j in range(n_pins):
        a, b = pin_parent[j], pin_child[j]
        l0, l1 = weights[2 * j], weights[2 * j + 1]
        out[b, 2] -= sign * d * direction[b, 2] * (l0 * np.cos(q[b, 2]) + l1 * np.sin(q[b, 2]))
        if a >= 0:
            out[a, 2] -= sign * d * direction[a, 2] * (l0 * np.cos(q[a, 2])
                                                       + l1 * np.sin(q[a, 2]))
    for j in range(prism_a.shape[0]):
        a, b = prism_a[j], prism_b[j]
        l0, l1 = weights[2 * n_pins + 2 * j], weights[2 * n_pins + 2 * j + 1]
        tax, tay = np.cos(q[a, 2]), np.sin(q[a, 2])
        tbx, tby = np.cos(q[b, 2]), np.sin(q[b, 2])
        dx, dy = q[b, 0] - q[a, 0], q[b, 1] - q[a, 1]
        dvx, dvy = direction[b, 0] - direction[a, 0], direction[b, 1] - direction[a, 1]
        wa, wb = direction[a, 2], direction[b, 2]
        out[a, 2] += sign * l0 * (-(tax * dvx + tay * dvy) - wa * (-tay * dx + tax * dy))
        out[b, 2] += sign * l1 * (-(tbx * dvx + tby * dvy) - wb * (-tby * dx + tbx * dy))
        px = l0 * wa * tax + l1 * wb * tbx
        py = l0 * wa * tay + l1 * wb * tby
        out[b, 0] -= sign * px
        out[b, 1] -= sign * py
        out[a, 0] += sign * px
        out[a, 1] += sign * py


@numba.njit(cache=True)
def _growth_curvature(model, q, weights, direction, sign, out):
    """``out += sign · ∂/∂q [λᵀ G(q) w]`` for the growth rows (``growth_curvature``)."""
    prism_a, prism_b = model[7], model[8]
    for j in range(prism_a.shape[0]):
        a, b = prism_a[j], prism_b[j]
        tax, tay = np.cos(q[a, 2]), np.sin(q[a, 2])
        nax, nay = -tay, tax
        dx, dy = q[b, 0] - q[a, 0], q[b, 1] - q[a, 1]
        dvx, dvy = direction[b, 0] - direction[a, 0], direction[b, 1] - direction[a, 1]
        wa = direction[a, 2]
        out[a, 2] += sign * weights[j] * (nax * dvx + nay * dvy - wa * (tax * dx + tay * dy))
        px, py = weights[j] * wa * nax, weights[j] * wa * nay
        out[b, 0] += sign * px
        out[b, 1] += sign * py
        out[a, 0] -= sign * px
        out[a, 1] -= sign * py


@numba.njit(cache=True)
def _evert_curvature(d, base, q, weights, direction, sign, out):
    """``out += sign · ∂/∂q [λᵀ J(q) w]`` for the joint and slot rows of a vine that everts
    (``evert.joint_curvature``; λ over the rows 0 … 3N − 1 of the layout)."""
    n = q.shape[0]
    for j in range(n):
        tax, tay, nax, nay, tbx, tby, nbx, nby, dx, dy = _evert_frame(d, base, q, j)
        l0, l1 = weights[2 * j], weights[2 * n + j]
        if l0 == 0.0 and l1 == 0.0:
            continue
        om_a = direction[j - 1, 2] if j > 0 else 0.0
        om_b = direction[j, 2]
        dwx = direction[j, 0] - (direction[j - 1, 0] if j > 0 else 0.0)
        dwy = direction[j, 1] - (direction[j - 1, 1] if j > 0 else 0.0)
        t_dw, n_dw = tax * dwx + tay * dwy, nax * dwx + nay * dwy
        t_delta, n_delta = tax * dx + tay * dy, nax * dx + nay * dy
        ta_nb, na_nb = tax * nbx + tay * nby, nax * nbx + nay * nby
        na_tb, ta_tb = nax * tbx + nay * tby, tax * tbx + tay * tby
        out[j, 2] += sign * (l0 * (d * ta_nb * om_a + d * na_tb * om_b)
                             + l1 * (-d * na_nb * om_a + d * ta_tb * om_b))
        px = -l0 * om_a * tax + l1 * om_a * nax  # ∂/∂p_child = −∂/∂p_parent
        py = -l0 * om_a * tay + l1 * om_a * nay
        out[j, 0] += sign * px
        out[j, 1] += sign * py
        if j > 0:
            out[j - 1, 2] += sign * (l0 * (-t_dw - n_delta * om_a + d * ta_nb * om_b)
                                     + l1 * (n_dw - (t_delta + d) * om_a - d * na_nb * om_b))
            out[j - 1, 0] -= sign * px
            out[j - 1, 1] -= sign * py


@numba.njit(cache=True)
def _rows_transpose_add(row_bodies, rows, weights, scale, start, stop, out):
    """``out += scale · Aᵀ λ`` over the rows start … stop − 1 (two-body layout)."""
    for r in range(start, stop):
        for side in range(2):
            body = row_bodies[r, side]
            if body >= 0:
                for k in range(3):
                    out[body, k] += scale * rows[r, 3 * side + k] * weights[r]


@numba.njit(cache=True)
def _evert_targets_backward(d, q, z, rows, row_bodies, dt, rate, g_q):
    """``g_q += ∂/∂q`` of ``zᵀ r`` for the joint and slot targets of a vine that everts
    (``evert.target_vjp``): ``−Aᵀz/Δt`` over those rows, plus ``(Σ_j z_j S_j') ∂E/∂q / Δt``
    for the body that emerges; returns ``∂L/∂rate = Σ_j z_j S_j'``."""
    n = q.shape[0]
    _rows_transpose_add(row_bodies, rows, z, -1.0 / dt, 0, 3 * n, g_q)
    grown = everted_length(q, d) + dt * rate
    full = 2.0 * d
    emerging = 0.0
    for j in range(1, n):
        reach = grown - full * (j - 1)
        if 0.0 < reach < full:
            emerging += z[2 * n + j]
    if emerging != 0.0:  # ∂E/∂q = Σ_{j≥1} ∂σ_j/∂q, the slot rows but the base's
        for j in range(1, n):
            for side in range(2):
                body = row_bodies[2 * n + j, side]
                for k in range(3):
                    g_q[body, k] += emerging / dt * rows[2 * n + j, 3 * side + k]
    return emerging


@numba.njit(cache=True)
def step_backward(model, q, v, v_star, y, w, z, stiffness, damping, rest_angle, friction, mass,
                  r2, ground, dt, row_bodies, rows, contact_start, g_q_next, rate):
    """The cotangents of a step's inputs from the KKT adjoint ``(w (N, 3), z (m,))``, in one
    pass: what ``sim_vine.step.step_vjp_reference`` computes with NumPy (its formulas and
    the constraints' curvature terms of :mod:`sim_vine.constraints`).

    Args:
        model: ``tuple(ModelArrays)``; q, v: the step's input poses and velocities (N, 3);
        v_star: its solution (N, 3); y: the solution's multipliers (m,); rows: the
        constraint rows (m, 6) of ``row_bodies``; g_q_next: ∂L/∂q_next (N, 3); rate: the
        step's growth rate [m/s]; r2: each body's radius of gyration squared [m²] (N,).

    Returns:
        ``(g_q, g_v, g_rate, g_stiffness, g_damping, g_rest_angle, g_friction, g_mass,
        g_ground_friction, g_gyration_sq)``.
    """
    (d, _, base, gravity, implicit, pin_parent, pin_child, prism_a, prism_b, growth_w,
     cp_body, cp_offset, obs_type, obs_params, poly_vertices, poly_normals, poly_count,
     evert) = model
    n = q.shape[0]
    g_q = g_q_next.copy()
    g_v = np.empty((n, 3))
    g_mass = np.empty(n)
    g_ground = np.empty(n)
    g_r2 = np.empty(n)
    for i in range(n):
        g_v[i, 0] = mass[i] * w[i, 0]
        g_v[i, 1] = mass[i] * w[i, 1]
        g_v[i, 2] = mass[i] * r2[i] * w[i, 2]
        # ∂L/∂b = w with b = M v_k + Δt m g, and ∂L/∂P = −w v*ᵀ on P's diagonal
        # M (1 + Δt c_g)
        w_v_star = (w[i, 0] * v_star[i, 0] + w[i, 1] * v_star[i, 1]
                    + r2[i] * w[i, 2] * v_star[i, 2])
        g_mass[i] = (w[i, 0] * v[i, 0] + w[i, 1] * v[i, 1] + r2[i] * w[i, 2] * v[i, 2]
                     - (1.0 + dt * ground[i]) * w_v_star
                     + dt * (w[i, 0] * gravity[0] + w[i, 1] * gravity[1]))
        g_ground[i] = -dt * mass[i] * w_v_star
        # the inertia m r² in b's M v_k and P's M (1 + Δt c_g)
        g_r2[i] = mass[i] * w[i, 2] * (v[i, 2] - (1.0 + dt * ground[i]) * v_star[i, 2])
    n_pins = pin_parent.shape[0]
    g_stiffness = np.empty(n_pins)
    g_damping = np.zeros(n_pins)
    g_rest = np.empty(n_pins)
    for j in range(n_pins):
        a, b = pin_parent[j], pin_child[j]
        angle = q[b, 2] - (q[a, 2] if a >= 0 else base[2])
        w_rate = w[b, 2] - (w[a, 2] if a >= 0 else 0.0)
        g_stiffness[j] = -dt * (angle - rest_angle[j]) * w_rate
        torque = -dt * stiffness[j] * w_rate  # ∂L/∂b through τ = −K (φ − φ0)
        g_rest[j] = -torque
        g_q[b, 2] += torque
        if a >= 0:
            g_q[a, 2] -= torque
        if implicit:
            spring = w_rate * (v_star[b, 2] - (v_star[a, 2] if a >= 0 else 0.0))
            g_stiffness[j] -= dt * dt * spring
            g_damping[j] -= dt * spring
        else:
            g_damping[j] -= dt * (v[b, 2] - (v[a, 2] if a >= 0 else 0.0)) * w_rate
            push = -dt * damping[j] * w_rate
            g_v[b, 2] += push
            if a >= 0:
                g_v[a, 2] -= push
    if evert:
        g_rate = _evert_targets_backward(d, q, z, rows, row_bodies, dt, rate, g_q)
        _evert_curvature(d, base, q, y, w, -1.0, g_q)
        _evert_curvature(d, base, q, z, v_star, -1.0, g_q)
    else:
        # ∂L/∂r = z: joint targets −c(q)/Δt, growth targets rate·weights
        n_joint = 2 * (n_pins + prism_a.shape[0])
        _rows_transpose_add(row_bodies, rows, z, -1.0 / dt, 0, n_joint, g_q)
        g_rate = 0.0
        for j in range(prism_a.shape[0]):
            g_rate += z[n_joint + j] * growth_w[j]
        # ∂L/∂A = −(y wᵀ + z v*ᵀ) through the rows' dependence on q (and μ)
        _joint_curvature(model, q, y, w, -1.0, g_q)
        _joint_curvature(model, q, z, v_star, -1.0, g_q)
        _growth_curvature(model, q, y[n_joint:], w, -1.0, g_q)
        _growth_curvature(model, q, z[n_joint:], v_star, -1.0, g_q)
    g_friction = 0.0
    n_obs = obs_type.shape[0]
    pair = 0
    for i in range(cp_body.shape[0]):
        b, s = cp_body[i], cp_offset[i]
        nx_b, ny_b, px, py = _contact_point(q, b, s)
        tx_b, ty_b = ny_b, -nx_b
        for o in range(n_obs):
            r0 = contact_start + 2 * pair
            pair += 1
            if y[r0] == 0.0 and y[r0 + 1] == 0.0 and z[r0] == 0.0 and z[r0 + 1] == 0.0:
                continue  # an inactive pair: every term below vanishes
            _, nx, ny, h00, h01, h11 = _distance(obs_type[o], obs_params[o], poly_vertices[o],
                                                 poly_normals[o], poly_count[o], px, py)
            tx, ty = -ny, nx
            # ∂L/∂Φ through the lower bounds −Φ/Δt of both cone edges
            z_pair = (z[r0] + z[r0 + 1]) / dt
            g_q[b, 0] -= z_pair * nx
            g_q[b, 1] -= z_pair * ny
            g_q[b, 2] -= z_pair * s * (nx * nx_b + ny * ny_b)
            for weights, direction in ((y, w), (z, v_star)):
                cx = direction[b, 0] + s * direction[b, 2] * nx_b  # the point's velocity
                cy = direction[b, 1] + s * direction[b, 2] * ny_b
                for k in range(2):
                    sign = 1.0 if k == 0 else -1.0
                    lam = weights[r0 + k]
                    if lam == 0.0:
                        continue
                    mu = sign * friction
                    # (I + μ·rot) ∂N/∂p, transposed onto the point's velocity
                    e00, e01 = h00 - mu * h01, h01 - mu * h11
                    e10, e11 = mu * h00 + h01, mu * h01 + h11
                    gx = lam * (e00 * cx + e10 * cy)
                    gy = lam * (e01 * cx + e11 * cy)
                    ex, ey = nx + mu * tx, ny + mu * ty
                    g_q[b, 0] -= gx
                    g_q[b, 1] -= gy
                    g_q[b, 2] -= (s * (nx_b * gx + ny_b * gy)
                                  - lam * s * direction[b, 2] * (ex * tx_b + ey * ty_b))
                    g_friction -= sign * lam * (tx * cx + ty * cy)
    return (g_q, g_v, g_rate, g_stiffness, g_damping, g_rest, g_friction, g_mass, g_ground,
            g_r2)
