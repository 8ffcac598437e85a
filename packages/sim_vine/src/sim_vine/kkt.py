"""Exact solves of the step QP's KKT system at an active set, as one banded LU.

With the unknowns ordered body by body (a body's three velocities, the multipliers of its
own rows, contacts and the base pin, then those of the rows joining it to the next body),
the KKT matrix

    [P  Aᵀ]      P: mass and pin springs,  A: joint, growth and contact rows
    [A  E ]      E: 1 on inactive rows (their multiplier is 0), 0 on active ones

is banded with a bandwidth set by the rows per body, whatever the vine's length, so LAPACK's
banded LU (``dgbsv``) solves it in time linear in N. It works on the QP scaled as in
:meth:`sim_vine.qp.VineQP.scaled_data` (unit-size diagonals), with one step of iterative
refinement. Inactive rows keep their place in the band, so the structure never changes.

Redundant active rows (a tip stuck in a corner where two walls meet holds its two
coordinates with up to four cone edges) make ``[P Aᵀ; A 0]`` singular, and a pivot of
round-off size then gave multipliers and adjoints of 1e13 and more. The factorized matrix
has ``−ε`` (:data:`DUAL_REGULARIZATION`, in the scaled units) on the active rows' diagonal:
for independent rows the refinement step against the exact matrix removes its effect (the
error shrinks as (ε/σ)², σ the rows' smallest singular value), for dependent ones the
solution is the bounded one of least multiplier norm (the limit of the penalty method).

:func:`exact_at` solves at an active set and checks that the solution is optimal there, in
one compiled call. It lives in this file with the solve it calls: numba's on-disk cache
checks only the cached function's own source file, so a call into another file's compiled
code would keep running that code's old version after an edit.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
import scipy.linalg.lapack as lapack

__all__ = ["BandLayout", "BandedKKT", "exact_at", "optimal_at", "smoothed_at",
           "DUAL_REGULARIZATION"]

DUAL_REGULARIZATION = 1e-10
"""−ε on the active rows' diagonal of the factorized KKT matrix (scaled units)."""


class BandLayout(NamedTuple):
    """Where a model's KKT entries go in the band: the work array ``band`` of
    :func:`_band_lu`, the band positions of the natural order (velocities, then rows) and of
    the CSC entries of P and A. Kernels take it as a plain ``tuple(layout)`` (see
    :class:`sim_vine._kernels.ModelArrays`)."""

    band: np.ndarray
    kl: int
    ku: int
    pi: np.ndarray
    pj: np.ndarray
    ai: np.ndarray
    aj: np.ndarray
    diag: np.ndarray
    position: np.ndarray
    p_rows: np.ndarray
    p_cols: np.ndarray
    a_rows: np.ndarray
    a_cols: np.ndarray
    n: int


@numba.njit(cache=True)
def _fill(band, Px, Ax, active, p_ij, p_ji, a_rc, a_cr, a_rows, dual_diag):
    flat = band.reshape(-1)
    flat[:] = 0.0
    for k in range(Px.shape[0]):
        flat[p_ij[k]] += Px[k]
        if p_ji[k] != p_ij[k]:
            flat[p_ji[k]] += Px[k]
    for k in range(Ax.shape[0]):
        if active[a_rows[k]]:
            flat[a_rc[k]] += Ax[k]
            flat[a_cr[k]] += Ax[k]
    for r in range(active.shape[0]):
        flat[dual_diag[r]] = -DUAL_REGULARIZATION if active[r] else 1.0


@numba.njit(cache=True)
def _multiply(x, Px, Ax, active, p_i, p_j, a_rows, a_cols, n, dual):
    """K x in the natural order (velocities, then rows) for the masked KKT matrix, whose
    active rows have ``dual`` (m,) on the diagonal (zero for the hard QP)."""
    out = np.zeros(x.shape[0])
    for k in range(Px.shape[0]):
        i, j = p_i[k], p_j[k]
        out[i] += Px[k] * x[j]
        if i != j:
            out[j] += Px[k] * x[i]
    for k in range(Ax.shape[0]):
        r = a_rows[k]
        if active[r]:
            out[n + r] += Ax[k] * x[a_cols[k]]
            out[a_cols[k]] += Ax[k] * x[n + r]
    for r in range(active.shape[0]):
        out[n + r] += (dual[r] if active[r] else 1.0) * x[n + r]
    return out


@numba.njit(cache=True)
def _band_lu(band, kl, ku, pivots):
    """Gaussian elimination with partial pivoting of a banded matrix, in place.

    ``band[i, j - i + kl]`` holds entry (i, j) for ``-kl <= j - i <= ku``, with ``kl``
    more columns on the right for the fill that row swaps bring. The multipliers stay where
    the entries they eliminated were. Returns False for a zero pivot. Indexes the flat
    buffer directly: two-dimensional indexing with its negative-index checks in the inner
    loops cost a third more.
    """
    n, stride = band.shape
    flat = band.reshape(-1)
    width = kl + ku
    for k in range(n):
        last = min(k + kl, n - 1)
        pivot, best = k, abs(flat[k * stride + kl])
        for r in range(k + 1, last + 1):
            value = abs(flat[r * stride + k - r + kl])
            if value > best:
                pivot, best = r, value
        pivots[k] = pivot
        if best == 0.0:
            return False
        count = min(k + width, n - 1) + 1 - k  # columns k … k + width of the pivot row
        row_k = k * stride + kl
        if pivot != k:
            row_p = pivot * stride + k - pivot + kl
            for j in range(count):
                flat[row_k + j], flat[row_p + j] = flat[row_p + j], flat[row_k + j]
        inverse = 1.0 / flat[row_k]
        for r in range(k + 1, last + 1):
            row_r = r * stride + k - r + kl
            factor = flat[row_r] * inverse
            flat[row_r] = factor
            if factor != 0.0:
                for j in range(1, count):
                    flat[row_r + j] -= factor * flat[row_k + j]
    return True


@numba.njit(cache=True)
def _band_lu_apply(band, kl, ku, pivots, b):
    """Solve with the factors of :func:`_band_lu`; ``b`` (n,) is overwritten."""
    n, stride = band.shape
    flat = band.reshape(-1)
    width = kl + ku
    for k in range(n):
        p = pivots[k]
        if p != k:
            b[k], b[p] = b[p], b[k]
        value = b[k]
        for r in range(k + 1, min(k + kl, n - 1) + 1):
            b[r] -= flat[r * stride + k - r + kl] * value
    for k in range(n - 1, -1, -1):
        total = b[k]
        row_k = k * stride + kl
        for j in range(k + 1, min(k + width, n - 1) + 1):
            total -= flat[row_k + j - k] * b[j]
        b[k] = total / flat[row_k]


@numba.njit(cache=True)
def _solve(layout, Px, Ax, active, rhs, dual):
    """Fill (regularized), factor, solve and refine once against the exact matrix, whose
    active rows have ``dual`` (m,) on the diagonal (zero for the hard QP, ``−s/u`` for the
    smoothed contact rows of :func:`smoothed_at`); an empty result for a singular matrix."""
    band, kl, ku, pi, pj, ai, aj, diag, position, p_rows, p_cols, a_rows, a_cols, n = layout
    size = rhs.shape[0]
    band[:, :] = 0.0
    for k in range(Px.shape[0]):
        band[pi[k], pj[k] - pi[k] + kl] += Px[k]
        if pi[k] != pj[k]:
            band[pj[k], pi[k] - pj[k] + kl] += Px[k]
    for k in range(Ax.shape[0]):
        if active[a_rows[k]]:
            band[ai[k], aj[k] - ai[k] + kl] += Ax[k]
            band[aj[k], ai[k] - aj[k] + kl] += Ax[k]
    for r in range(active.shape[0]):
        band[diag[r], kl] = dual[r] - DUAL_REGULARIZATION if active[r] else 1.0
    pivots = np.empty(size, dtype=np.int64)
    if not _band_lu(band, kl, ku, pivots):
        return np.empty(0)
    b = np.empty(size)
    for i in range(size):
        b[position[i]] = rhs[i]
    _band_lu_apply(band, kl, ku, pivots, b)
    out = np.empty(size)
    for i in range(size):
        out[i] = b[position[i]]
    residual = rhs - _multiply(out, Px, Ax, active, p_rows, p_cols, a_rows, a_cols, n, dual)
    for i in range(size):
        b[position[i]] = residual[i]
    _band_lu_apply(band, kl, ku, pivots, b)
    for i in range(size):
        out[i] += b[position[i]]
    return out


@numba.njit(cache=True)
def optimal_at(row_bodies, rows, v, lower, active, scaled_y, contact_start, tolerance):
    """True when a KKT solution at ``active`` solves the QP: every contact row holds (``A v ≥
    l`` within ``tolerance · max(1, |l|)``), active ones with equality (what the
    regularized solve cannot meet when redundant rows disagree) and without pulling (scaled
    multiplier ≤ 1e-12; OSQP's sign, ≤ 0 on a lower bound)."""
    for r in range(contact_start, row_bodies.shape[0]):
        if active[r] and scaled_y[r] > 1e-12:
            return False
        value = 0.0
        for side in range(2):
            body = row_bodies[r, side]
            if body >= 0:
                for k in range(3):
                    value += rows[r, 3 * side + k] * v[body, k]
        slack = value - lower[r]
        allowed = tolerance * max(1.0, abs(lower[r]))
        if slack < -allowed or (active[r] and slack > allowed):
            return False
    return True


@numba.njit(cache=True)
def exact_at(layout, Px, Ax, q, lower, col_scale, active, row_bodies, rows, row_lower,
             contact_start, tolerance, edge_rule, tangent_rows):
    """The exact KKT solution of the scaled QP at ``active``, if it is optimal there.

    One banded solve (:func:`_solve` in a :class:`BandedKKT`'s ``tuple(layout)``), then
    :func:`optimal_at`; with
    ``edge_rule`` (μ = 0) every active contact pair must also hold its impulse on the cone
    edge that opposes the sliding. Returns ``(ok, v (N, 3) [m/s], scaled multipliers (m,))``;
    what ``VineQP._active_set_solution`` computes step by step in Python.
    """
    n = q.shape[0]
    m = active.shape[0]
    rhs = np.zeros(n + m)
    for i in range(n):
        rhs[i] = -q[i]
    for r in range(m):
        if active[r]:
            rhs[n + r] = lower[r]
    out = _solve(layout, Px, Ax, active, rhs, np.zeros(m))
    v = np.empty((n // 3, 3))
    scaled_y = np.zeros(m)
    if out.shape[0] == 0:
        return False, v, scaled_y
    for i in range(n + m):
        if not np.isfinite(out[i]):
            return False, v, scaled_y
    for i in range(n):
        v[i // 3, i % 3] = out[i] * col_scale[i]
    for r in range(m):
        if active[r]:
            scaled_y[r] = out[n + r]
    if not optimal_at(row_bodies, rows, v, row_lower, active, scaled_y, contact_start,
                      tolerance):
        return False, v, scaled_y
    if edge_rule:
        for p in range(tangent_rows.shape[0]):
            r = contact_start + 2 * p
            body = row_bodies[r, 1]
            sliding = 0.0
            for k in range(3):
                sliding += tangent_rows[p, 3 + k] * v[body, k]
            if (active[r] and sliding > 0.0) or (active[r + 1] and not sliding > 0.0):
                return False, v, scaled_y
    return True, v, scaled_y


@numba.njit(cache=True)
def smoothed_at(layout, Px, Ax, q, lower, col_scale, equality_count, kappa, v0, max_iter,
                rows_on):
    """The step QP with relaxed contact complementarity, by a primal-dual interior point at
    the fixed barrier ``kappa`` [J]: every contact row has slack ``s > 0`` and impulse
    ``u = −y > 0`` with ``s u = κ`` (impulse [N s] × separation rate [m/s], the same in the
    scaled units), the joint and growth rows hold exactly. Rows off in ``rows_on`` (m,) bool
    (unbounded ones: a vine that everts has free lock rows and the contact rows of bodies
    not yet out) keep a zero multiplier and stay out of the system.

    Each Newton step solves the banded KKT system with every row in it and ``−s/u`` on the
    contact rows' diagonal (the augmented system), the matrix :func:`step_vjp`'s adjoint
    solves with at the solution. Starts from the input velocity ``v0`` (N, 3) (a pure
    function of the inputs). Returns ``(ok, v (N, 3) [m/s], scaled multipliers (m,), the
    rows' diagonal (m,), iterations)``.
    """
    band, kl, ku, pi, pj, ai, aj, diag, position, p_rows, p_cols, a_rows, a_cols, n = layout
    m = lower.shape[0]
    x = np.zeros(n + m)
    for i in range(n):
        x[i] = v0[i // 3, i % 3] / col_scale[i]
    zero = np.zeros(m)
    row_values = _multiply(x, Px, Ax, rows_on, p_rows, p_cols, a_rows, a_cols, n, zero)
    slack = np.zeros(m)
    impulse = np.zeros(m)
    root = np.sqrt(kappa)
    for r in range(equality_count, m):
        if not rows_on[r]:
            continue
        slack[r] = max(row_values[n + r] - lower[r], root)
        impulse[r] = kappa / slack[r]
        x[n + r] = -impulse[r]
    largest_bound = 0.0
    for r in range(m):
        if rows_on[r]:
            largest_bound = max(largest_bound, abs(lower[r]))
    size = 1.0 + np.max(np.abs(q)) + largest_bound
    dual = np.zeros(m)
    rhs = np.zeros(n + m)
    for iteration in range(max_iter):
        product = _multiply(x, Px, Ax, rows_on, p_rows, p_cols, a_rows, a_cols, n, zero)
        worst = 0.0
        for i in range(n):
            rhs[i] = -(product[i] + q[i])
            worst = max(worst, abs(rhs[i]))
        for r in range(m):
            if not rows_on[r]:  # its multiplier stays 0 (the matrix has 1 there)
                rhs[n + r] = 0.0
                dual[r] = 0.0
            elif r < equality_count:
                rhs[n + r] = lower[r] - product[n + r]
                worst = max(worst, abs(rhs[n + r]))
                dual[r] = 0.0
            else:
                primal = product[n + r] - slack[r] - lower[r]
                worst = max(worst, abs(primal))
                rhs[n + r] = kappa / impulse[r] - slack[r] - primal
                dual[r] = -slack[r] / impulse[r]
        centred = True
        for r in range(equality_count, m):
            centred = centred and (not rows_on[r]
                                   or abs(slack[r] * impulse[r] - kappa) <= 1e-9 * kappa)
        if worst <= 1e-13 * size and centred:
            v = np.empty((n // 3, 3))
            for i in range(n):
                v[i // 3, i % 3] = x[i] * col_scale[i]
            return True, v, x[n:].copy(), dual, iteration
        step = _solve(layout, Px, Ax, rows_on, rhs, dual)
        if step.shape[0] == 0:
            break
        # ds = A dv + (A v − s − l) keeps the rows' primal equation; du = −dy
        products = _multiply(step, Px, Ax, rows_on, p_rows, p_cols, a_rows, a_cols, n, zero)
        step_slack = np.zeros(m)
        alpha = 1.0
        for r in range(equality_count, m):
            if not rows_on[r]:
                continue
            step_slack[r] = products[n + r] + product[n + r] - slack[r] - lower[r]
            if step_slack[r] < 0.0:
                alpha = min(alpha, -0.99 * slack[r] / step_slack[r])
            if step[n + r] > 0.0:  # the impulse u = −y falls
                alpha = min(alpha, 0.99 * impulse[r] / step[n + r])
        for i in range(n + m):
            x[i] += alpha * step[i]
        for r in range(equality_count, m):
            if rows_on[r]:
                slack[r] += alpha * step_slack[r]
                impulse[r] = -x[n + r]
    return False, np.empty((n // 3, 3)), x[n:].copy(), dual, max_iter


class BandedKKT:
    """The banded layout of a model's KKT matrix (``layout``, a :class:`BandLayout` for
    compiled callers such as :func:`exact_at`) and its solves.

    Args:
        row_bodies: the two bodies each constraint row touches, shape (m, 2), -1 for none.
        p_rows, p_cols: row and column of each CSC entry of P's upper triangle.
        a_rows, a_cols: row and column of each CSC entry of A.
    """

    def __init__(self, row_bodies, p_rows, p_cols, a_rows, a_cols):
        body_count = 0 if len(p_rows) == 0 else (int(max(p_rows.max(), p_cols.max())) + 1) // 3
        n, m = 3 * body_count, len(row_bodies)
        single = row_bodies[:, 0] < 0
        order = []
        for body in range(body_count):  # a body's rows, then the rows to the next body
            order += [3 * body, 3 * body + 1, 3 * body + 2]
            order += list(n + np.flatnonzero(single & (row_bodies[:, 1] == body)))
            order += list(n + np.flatnonzero(~single & (row_bodies[:, 0] == body)))
        position = np.empty(n + m, dtype=np.int64)
        position[np.asarray(order, dtype=np.int64)] = np.arange(n + m)
        pi, pj = position[p_rows], position[p_cols]
        ai, aj = position[n + a_rows], position[a_cols]
        diag = position[n + np.arange(m)]
        width = int(max(np.max(np.abs(pi - pj), initial=0), np.max(np.abs(ai - aj), initial=0)))
        self.kl = self.ku = width
        self.size, self.n, self.m = n + m, n, m
        rows_in_band = 2 * width + width + 1

        def flat(i, j):  # LAPACK band storage: ab[kl + ku + i - j, j]
            return (self.kl + self.ku + i - j) * (n + m) + j

        self._p = (flat(pi, pj), flat(pj, pi))
        self._a = (flat(ai, aj), flat(aj, ai))
        self._dual = flat(diag, diag)
        self._band = np.zeros((rows_in_band, n + m))
        self.layout = BandLayout(
            band=np.zeros((n + m, 3 * width + 1)), kl=width, ku=width, pi=pi, pj=pj, ai=ai,
            aj=aj, diag=diag, position=position, p_rows=p_rows, p_cols=p_cols, a_rows=a_rows,
            a_cols=a_cols, n=n)

    def solve(self, Px, Ax, active, rhs, dual=None):
        """Solve ``K x = rhs`` (natural order); None when the matrix is singular.

        ``Px``, ``Ax``: scaled CSC data of P's upper triangle and of A; ``active``: (m,)
        bool; ``rhs``: (n + m,), with zeros on inactive rows; ``dual``: the active rows'
        diagonal (m,), zero when None. A compiled banded LU with partial pivoting and one
        refinement step; :meth:`solve_lapack` is the same through LAPACK's ``dgbsv``.
        """
        dual = np.zeros(self.m) if dual is None else np.asarray(dual, dtype=np.float64)
        out = _solve(tuple(self.layout), Px, Ax, active, rhs, dual)
        return out if out.size else None

    def solve_lapack(self, Px, Ax, active, rhs):
        """:meth:`solve` through LAPACK's banded LU ``dgbsv`` and ``dgbtrs`` (reference)."""
        layout = self.layout
        _fill(self._band, Px, Ax, active, self._p[0], self._p[1], self._a[0], self._a[1],
              layout.a_rows, self._dual)
        b = np.empty(self.size)
        b[layout.position] = rhs
        lu, piv, x, info = lapack.dgbsv(self.kl, self.ku, self._band, b[:, None])
        if info != 0:
            return None
        out = np.empty(self.size)
        out[:] = x[layout.position, 0]
        residual = rhs - _multiply(out, Px, Ax, active, layout.p_rows, layout.p_cols,
                                   layout.a_rows, layout.a_cols, self.n, np.zeros(self.m))
        b[layout.position] = residual
        correction, info = lapack.dgbtrs(lu, self.kl, self.ku, b[:, None], piv)
        if info != 0:
            return None
        return out + correction[layout.position, 0]
