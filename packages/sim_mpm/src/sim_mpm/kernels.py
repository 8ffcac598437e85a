"""numba CPU kernels for the MLS-MPM substep and its adjoint, equal to :mod:`.step`.

Everything per particle or per node is a compiled loop: stencil weights, stress
(materials and stress actuation), P2G, grid update, boundary projections, G2P, and the
adjoint of each. Only the cable forces (a few route particles) reuse the array-level
functions of :mod:`.step`. The 3D polar rotation uses scaled Newton iterations
X ← ½(ζX + X⁻ᵀ/ζ) (the reference uses an SVD; both give the same R to round-off for
det F > 0) and falls back to a per-particle SVD for inverted particles.

Parallelism: each loop nest is compiled twice, serial and with ``prange`` over particles or
nodes; ``parallel=True`` selects the threaded build. The two scatters (P2G and the grid
side of the G2P adjoint) always run serially in particle order: threads would need atomics
or colouring, and the serial scatter keeps results bitwise reproducible. Serial is the
default because on small machines a threaded launch costs more than these loops (measured
on a busy 2-core machine: 0.2 ms with numba's workqueue layer, 8 ms with OpenMP, for a
loop that takes 0.004 ms serially).
"""

from __future__ import annotations

import numba
import numpy as np

from .state import MPMState
from .actuators import cable_forces, cable_forces_vjp
from .step import StepConstants

__all__ = ["substep", "substep_vjp"]



class _Kernel:
    """One loop nest compiled twice: serial (prange runs as range) and multithreaded."""

    def __init__(self, fn):
        self.serial = numba.njit(cache=True, error_model="numpy")(fn)
        self.parallel = numba.njit(cache=True, parallel=True, error_model="numpy")(fn)


def _dual(fn):
    return _Kernel(fn)


@_dual
def _stencil(x, dx, res, offsets, strides):
    n, d = x.shape
    S = offsets.shape[0]
    weight = np.empty((n, S), dtype=x.dtype)
    grad_weight = np.empty((n, S, d), dtype=x.dtype)
    offset_x = np.empty((n, S, d), dtype=x.dtype)
    node = np.empty((n, S), dtype=np.int64)
    inv_dx = 1.0 / dx
    for p in numba.prange(n):
        base = np.empty(d, dtype=np.int64)
        fx = np.empty(d, dtype=x.dtype)
        w = np.empty((d, 3), dtype=x.dtype)
        dw = np.empty((d, 3), dtype=x.dtype)
        for k in range(d):
            xs = x[p, k] / dx
            b = int(np.floor(xs - 0.5))
            b = min(max(b, 0), res - 3)
            base[k] = b
            f = xs - b
            fx[k] = f
            w[k, 0] = 0.5 * (1.5 - f) ** 2
            w[k, 1] = 0.75 - (f - 1.0) ** 2
            w[k, 2] = 0.5 * (f - 0.5) ** 2
            dw[k, 0] = f - 1.5
            dw[k, 1] = -2.0 * (f - 1.0)
            dw[k, 2] = f - 0.5
        for s in range(S):
            wt = 1.0
            flat = 0
            for k in range(d):
                o = offsets[s, k]
                wt *= w[k, o]
                offset_x[p, s, k] = (o - fx[k]) * dx
                flat += (base[k] + o) * strides[k]
            weight[p, s] = wt
            node[p, s] = flat
            for k in range(d):
                g = dw[k, offsets[s, k]] * inv_dx
                for j in range(d):
                    if j != k:
                        g *= w[j, offsets[s, j]]
                grad_weight[p, s, k] = g
    return weight, grad_weight, offset_x, node


@_dual
def _p2g(weight, offset_x, node, momentum, affine, mass, node_count):
    n, S, d = offset_x.shape
    grid_mv = np.zeros((node_count, d), dtype=momentum.dtype)
    grid_m = np.zeros(node_count, dtype=momentum.dtype)
    for p in range(n):
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            for a in range(d):
                acc = momentum[p, a]
                for b in range(d):
                    acc += affine[p, a, b] * offset_x[p, s, b]
                grid_mv[i, a] += wt * acc
            grid_m[i] += wt * mass[p]
    return grid_mv, grid_m


@_dual
def _grid_update(grid_mv, grid_m, gravity, dt):
    G, d = grid_mv.shape
    grid_v = np.empty_like(grid_mv)
    grid_v_free = np.empty_like(grid_mv)
    inv_m = np.empty_like(grid_m)
    for i in numba.prange(G):
        if grid_m[i] > 0:
            inv = 1.0 / grid_m[i]
            inv_m[i] = inv
            for a in range(d):
                vf = grid_mv[i, a] * inv
                grid_v_free[i, a] = vf
                grid_v[i, a] = vf + dt * gravity[a]
        else:
            inv_m[i] = 0.0
            for a in range(d):
                grid_v_free[i, a] = 0.0
                grid_v[i, a] = 0.0
    return grid_v, grid_v_free, inv_m


@_dual
def _project(grid_v, node_index, normal, start, kinds, frictions, inputs):
    d = grid_v.shape[1]
    for layer in range(kinds.shape[0]):
        kind = kinds[layer]
        mu = frictions[layer]
        for e in numba.prange(start[layer], start[layer + 1]):
            i = node_index[e]
            vn = 0.0
            for a in range(d):
                inputs[e, a] = grid_v[i, a]
                vn += grid_v[i, a] * normal[e, a]
            if kind == 0:
                for a in range(d):
                    grid_v[i, a] = 0.0
            elif kind == 1 or (kind == 2 and vn < 0):
                for a in range(d):
                    grid_v[i, a] -= vn * normal[e, a]
            elif kind == 3 and vn < 0:
                speed2 = 0.0
                for a in range(d):
                    vt = grid_v[i, a] - vn * normal[e, a]
                    speed2 += vt * vt
                speed = np.sqrt(speed2)
                safe = speed if speed > 0 else 1.0
                scale = max(0.0, 1.0 + mu * vn / safe)
                for a in range(d):
                    grid_v[i, a] = (grid_v[i, a] - vn * normal[e, a]) * scale


@_dual
def _project_vjp(g, node_index, normal, start, kinds, frictions, inputs):
    d = g.shape[1]
    for layer in range(kinds.shape[0] - 1, -1, -1):
        kind = kinds[layer]
        mu = frictions[layer]
        for e in numba.prange(start[layer], start[layer + 1]):
            i = node_index[e]
            vn = 0.0
            gn = 0.0
            for a in range(d):
                vn += inputs[e, a] * normal[e, a]
                gn += g[i, a] * normal[e, a]
            if kind == 0:
                for a in range(d):
                    g[i, a] = 0.0
            elif kind == 1 or (kind == 2 and vn < 0):
                for a in range(d):
                    g[i, a] -= gn * normal[e, a]
            elif kind == 3 and vn < 0:
                speed2 = 0.0
                g_vt = 0.0
                for a in range(d):
                    vt = inputs[e, a] - vn * normal[e, a]
                    speed2 += vt * vt
                    g_vt += g[i, a] * vt
                speed = np.sqrt(speed2)
                safe = speed if speed > 0 else 1.0
                scale = 1.0 + mu * vn / safe
                for a in range(d):
                    if scale > 0:
                        tangent = (inputs[e, a] - vn * normal[e, a]) / safe
                        g[i, a] = (scale * (g[i, a] - gn * normal[e, a])
                                   + mu * g_vt * (normal[e, a] / safe
                                                  - vn * tangent / (safe * safe)))
                    else:
                        g[i, a] = 0.0


@_dual
def _g2p(weight, offset_x, node, grid_v, x, F, dt, K):
    n, S, d = offset_x.shape
    new_x = np.empty_like(x)
    new_v = np.empty_like(x)
    new_C = np.empty_like(F)
    new_F = np.empty_like(F)
    for p in numba.prange(n):
        for a in range(d):
            new_v[p, a] = 0.0
            for b in range(d):
                new_C[p, a, b] = 0.0
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            for a in range(d):
                gv = grid_v[i, a]
                new_v[p, a] += wt * gv
                for b in range(d):
                    new_C[p, a, b] += K * wt * gv * offset_x[p, s, b]
        for a in range(d):
            new_x[p, a] = x[p, a] + dt * new_v[p, a]
            for b in range(d):
                acc = 0.0
                for c in range(d):
                    acc += new_C[p, a, c] * F[p, c, b]
                new_F[p, a, b] = F[p, a, b] + dt * acc
    return new_x, new_v, new_C, new_F


@_dual
def _g2p_vjp_particles(weight, grad_weight, offset_x, node, grid_v, F, new_C, g_x_next,
                       g_v_next, g_F_next, g_C_next, dt, K):
    """Particle side of the G2P adjoint: g_x, g_F and the per-particle cotangents."""
    n, S, d = offset_x.shape
    g_x = np.empty_like(g_x_next)
    g_F = np.empty_like(F)
    g_new_v = np.empty_like(g_x_next)
    g_new_C = np.empty_like(F)
    for p in numba.prange(n):
        for a in range(d):
            g_new_v[p, a] = g_v_next[p, a] + dt * g_x_next[p, a]
            for b in range(d):
                acc_f = 0.0
                acc_c = 0.0
                for c in range(d):
                    # (I + dt C')ᵀ g_F' and g_F' Fᵀ
                    acc_f += new_C[p, c, a] * g_F_next[p, c, b]
                    acc_c += g_F_next[p, a, c] * F[p, b, c]
                g_F[p, a, b] = g_F_next[p, a, b] + dt * acc_f
                g_new_C[p, a, b] = g_C_next[p, a, b] + dt * acc_c
        for a in range(d):
            g_x[p, a] = g_x_next[p, a]
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            dot = 0.0
            for a in range(d):
                gv = grid_v[i, a]
                dot += gv * g_new_v[p, a]
                for b in range(d):
                    dot += K * gv * g_new_C[p, a, b] * offset_x[p, s, b]
            for b in range(d):
                acc = 0.0
                for a in range(d):
                    acc += grid_v[i, a] * g_new_C[p, a, b]
                g_x[p, b] += grad_weight[p, s, b] * dot - K * wt * acc
    return g_x, g_F, g_new_v, g_new_C


@_dual
def _g2p_vjp_grid(weight, offset_x, node, g_new_v, g_new_C, K, node_count):
    """Grid side of the G2P adjoint: scatter ∂L/∂(grid v), serial in particle order."""
    n, S, d = offset_x.shape
    g_grid_v = np.zeros((node_count, d), dtype=g_new_v.dtype)
    for p in range(n):
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            for a in range(d):
                acc = g_new_v[p, a]
                for b in range(d):
                    acc += K * g_new_C[p, a, b] * offset_x[p, s, b]
                g_grid_v[i, a] += wt * acc
    return g_grid_v


@_dual
def _grid_update_vjp(g_grid_v0, grid_v_free, inv_m):
    G, d = g_grid_v0.shape
    g_mv = np.empty_like(g_grid_v0)
    g_m = np.empty_like(inv_m)
    for i in numba.prange(G):
        acc = 0.0
        for a in range(d):
            g_mv[i, a] = g_grid_v0[i, a] * inv_m[i]
            acc += g_grid_v0[i, a] * grid_v_free[i, a]
        g_m[i] = -acc * inv_m[i]
    return g_mv, g_m


@_dual
def _p2g_vjp(weight, grad_weight, offset_x, node, g_mv, g_m, momentum, affine, mass):
    n, S, d = offset_x.shape
    g_momentum = np.zeros_like(momentum)
    g_affine = np.zeros_like(affine)
    g_mass = np.zeros_like(mass)
    g_x = np.zeros_like(momentum)
    for p in numba.prange(n):
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            dot = g_m[i] * mass[p]
            for a in range(d):
                G = g_mv[i, a]
                g_momentum[p, a] += wt * G
                moved = momentum[p, a]
                for b in range(d):
                    g_affine[p, a, b] += wt * G * offset_x[p, s, b]
                    moved += affine[p, a, b] * offset_x[p, s, b]
                dot += G * moved
            g_mass[p] += wt * g_m[i]
            for b in range(d):
                acc = 0.0
                for a in range(d):
                    acc += g_mv[i, a] * affine[p, a, b]
                g_x[p, b] += grad_weight[p, s, b] * dot - wt * acc
    return g_momentum, g_affine, g_mass, g_x


# -- constitutive models, per particle on (d, d) views -----------------------------------


@numba.njit(cache=True, error_model="numpy")
def _det(A):
    if A.shape[0] == 2:
        return A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]
    return (A[0, 0] * (A[1, 1] * A[2, 2] - A[1, 2] * A[2, 1])
            - A[0, 1] * (A[1, 0] * A[2, 2] - A[1, 2] * A[2, 0])
            + A[0, 2] * (A[1, 0] * A[2, 1] - A[1, 1] * A[2, 0]))


@numba.njit(cache=True, error_model="numpy")
def _inverse_transpose(A, out):
    """out = A⁻ᵀ = cof(A) / det(A); returns det(A)."""
    J = _det(A)
    if A.shape[0] == 2:
        out[0, 0] = A[1, 1] / J
        out[0, 1] = -A[1, 0] / J
        out[1, 0] = -A[0, 1] / J
        out[1, 1] = A[0, 0] / J
    else:
        for i in range(3):
            i1, i2 = (i + 1) % 3, (i + 2) % 3
            for j in range(3):
                j1, j2 = (j + 1) % 3, (j + 2) % 3
                out[i, j] = (A[i1, j1] * A[i2, j2] - A[i1, j2] * A[i2, j1]) / J
    return J


@numba.njit(cache=True, error_model="numpy")
def _polar(F, R, X, Y, eps):
    """R = rotation of the polar decomposition of F (det R = +1)."""
    d = F.shape[0]
    if d == 2:
        a = F[0, 0] + F[1, 1]
        b = F[1, 0] - F[0, 1]
        r = np.sqrt(a * a + b * b)
        R[0, 0] = a / r
        R[0, 1] = -b / r
        R[1, 0] = b / r
        R[1, 1] = a / r
        return
    if _det(F) <= 0:
        U, _, Vt = np.linalg.svd(F.astype(np.float64))
        Q = U @ Vt
        if np.linalg.det(Q) < 0:
            for i in range(3):
                U[i, 2] = -U[i, 2]
            Q = U @ Vt
        for i in range(3):
            for j in range(3):
                R[i, j] = Q[i, j]
        return
    for i in range(3):
        for j in range(3):
            X[i, j] = F[i, j]
    for _ in range(60):
        _inverse_transpose(X, Y)
        nx = 0.0
        ny = 0.0
        for i in range(3):
            for j in range(3):
                nx += X[i, j] * X[i, j]
                ny += Y[i, j] * Y[i, j]
        zeta = (ny / nx) ** 0.25
        change = 0.0
        for i in range(3):
            for j in range(3):
                new = 0.5 * (zeta * X[i, j] + Y[i, j] / zeta)
                change += (new - X[i, j]) ** 2
                X[i, j] = new
        if change <= (4.0 * eps) ** 2:
            break
    for i in range(3):
        for j in range(3):
            R[i, j] = X[i, j]


@numba.njit(cache=True, error_model="numpy")
def _polar_vjp(F, R, G, out, S):
    """out += ∂L/∂F given ∂L/∂R = G for R = polar rotation of F (see materials.py)."""
    d = F.shape[0]
    trace = 0.0
    for i in range(d):
        for j in range(d):
            acc = 0.0
            for k in range(d):
                acc += R[k, i] * F[k, j]
            S[i, j] = acc
        trace += S[i, i]
    # M = Rᵀ G; m = axial components of M − Mᵀ
    if d == 2:
        m21 = 0.0
        m12 = 0.0
        for k in range(2):
            m21 += R[k, 1] * G[k, 0]
            m12 += R[k, 0] * G[k, 1]
        w = (m21 - m12) / trace
        # out += R [[0, −w], [w, 0]]
        for i in range(2):
            out[i, 0] += R[i, 1] * w
            out[i, 1] -= R[i, 0] * w
        return
    m = np.empty(3, dtype=F.dtype)
    for c in range(3):
        i, j = (c + 2) % 3, (c + 1) % 3  # (2,1), (0,2), (1,0)
        mij = 0.0
        mji = 0.0
        for k in range(3):
            mij += R[k, i] * G[k, j]
            mji += R[k, j] * G[k, i]
        m[c] = mij - mji
    # A = tr(S) I − sym(S); ω = A⁻¹ m by cofactors (A is symmetric)
    a00 = trace - S[0, 0]
    a11 = trace - S[1, 1]
    a22 = trace - S[2, 2]
    a01 = -0.5 * (S[0, 1] + S[1, 0])
    a02 = -0.5 * (S[0, 2] + S[2, 0])
    a12 = -0.5 * (S[1, 2] + S[2, 1])
    c00 = a11 * a22 - a12 * a12
    c01 = a02 * a12 - a01 * a22
    c02 = a01 * a12 - a02 * a11
    c11 = a00 * a22 - a02 * a02
    c12 = a01 * a02 - a00 * a12
    c22 = a00 * a11 - a01 * a01
    det = a00 * c00 + a01 * c01 + a02 * c02
    w0 = (c00 * m[0] + c01 * m[1] + c02 * m[2]) / det
    w1 = (c01 * m[0] + c11 * m[1] + c12 * m[2]) / det
    w2 = (c02 * m[0] + c12 * m[1] + c22 * m[2]) / det
    # out += R [ω]×
    for i in range(3):
        out[i, 0] += R[i, 1] * w2 - R[i, 2] * w1
        out[i, 1] += -R[i, 0] * w2 + R[i, 2] * w0
        out[i, 2] += R[i, 0] * w1 - R[i, 1] * w0


@numba.njit(cache=True, error_model="numpy")
def _lame(E, nu):
    return E / (2.0 * (1.0 + nu)), E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))


@numba.njit(cache=True, error_model="numpy")
def _piola(F, E, nu, corotated, exponent, P, H, R, X, Y, eps):
    """P = first Piola-Kirchhoff stress of F; fills H = F⁻ᵀ and (corotated) R."""
    d = F.shape[0]
    mu, lam = _lame(E, nu)
    J = _inverse_transpose(F, H)
    if corotated:
        _polar(F, R, X, Y, eps)
        c = lam * (J - 1.0) * J
        for i in range(d):
            for j in range(d):
                P[i, j] = 2.0 * mu * (F[i, j] - R[i, j]) + c * H[i, j]
    else:
        c = lam * np.log(J)
        for i in range(d):
            for j in range(d):
                P[i, j] = mu * (F[i, j] - H[i, j]) + c * H[i, j]
    if exponent:
        kappa = E / (3.0 * (2.0 - 2.0 * nu))
        c = kappa * exponent * (J - 1.0) ** (exponent - 1) * J
        for i in range(d):
            for j in range(d):
                P[i, j] += c * H[i, j]
    return J


@numba.njit(cache=True, error_model="numpy")
def _piola_vjp(F, E, nu, corotated, exponent, G, g_F, H, R, T, S, J):
    """g_F += ∂L/∂F given ∂L/∂P = G; returns (∂L/∂E, ∂L/∂ν). H, R from _piola."""
    d = F.shape[0]
    mu, lam = _lame(E, nu)
    gH = 0.0
    for i in range(d):
        for j in range(d):
            gH += G[i, j] * H[i, j]
    # T = H Gᵀ H (the VJP of H = F⁻ᵀ is −H Gᵀ H)
    for i in range(d):
        for j in range(d):
            acc = 0.0
            for a in range(d):
                for b in range(d):
                    acc += H[i, a] * G[b, a] * H[b, j]
            T[i, j] = acc
    g_E = 0.0
    g_nu = 0.0
    if exponent:
        p = exponent
        kappa = E / (3.0 * (2.0 - 2.0 * nu))
        phi = kappa * p * (J - 1.0) ** (p - 1) * J
        dphi = kappa * p * ((p - 1) * (J - 1.0) ** (p - 2) * J + (J - 1.0) ** (p - 1))
        for i in range(d):
            for j in range(d):
                g_F[i, j] += dphi * J * gH * H[i, j] - phi * T[i, j]
        g_kappa = p * (J - 1.0) ** (p - 1) * J * gH
        g_E += g_kappa / (6.0 * (1.0 - nu))
        g_nu += g_kappa * E / (6.0 * (1.0 - nu) ** 2)
    if corotated:
        c = lam * (J - 1.0) * J
        dc = lam * (2.0 * J - 1.0) * J * gH
        g_mu = 0.0
        for i in range(d):
            for j in range(d):
                g_F[i, j] += 2.0 * mu * G[i, j] + dc * H[i, j] - c * T[i, j]
                g_mu += 2.0 * G[i, j] * (F[i, j] - R[i, j])
                S[i, j] = -2.0 * mu * G[i, j]
        _polar_vjp(F, R, S, g_F, T)
        g_lam = (J - 1.0) * J * gH
    else:
        logJ = np.log(J)
        g_mu = 0.0
        for i in range(d):
            for j in range(d):
                g_F[i, j] += mu * G[i, j] + (mu - lam * logJ) * T[i, j] + lam * gH * H[i, j]
                g_mu += G[i, j] * (F[i, j] - H[i, j])
        g_lam = logJ * gH
    g_E += g_mu / (2.0 * (1.0 + nu)) + g_lam * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    g_nu += (-g_mu * E / (2.0 * (1.0 + nu) ** 2)
             + g_lam * E * (1.0 + 2.0 * nu * nu) / ((1.0 + nu) * (1.0 - 2.0 * nu)) ** 2)
    return g_E, g_nu


@_dual
def _impulses(F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, corotated, exponent, eps):
    """mass (n,), affine (n, d, d), momentum (n, d), τ (n, d, d): see step.particle_impulses."""
    n, d = v.shape
    mass = np.empty_like(E)
    affine = np.empty_like(F)
    momentum = np.empty_like(v)
    tau = np.empty_like(F)
    scratch = np.empty((n, 4, d, d), dtype=F.dtype)
    for p in numba.prange(n):
        P, H, X, Y = scratch[p, 0], scratch[p, 1], scratch[p, 2], scratch[p, 3]
        R = affine[p]  # the rotation is only needed until τ is formed
        _piola(F[p], E[p], nu[p], corotated, exponent, P, H, R, X, Y, eps)
        m = rho[p] * V[p]
        mass[p] = m
        for i in range(d):
            momentum[p, i] = m * v[p, i] + dt * cable_f[p, i]
            for j in range(d):
                acc = 0.0
                for k in range(d):
                    acc += P[i, k] * F[p, j, k] + F[p, i, k] * sigma[p, k] * F[p, j, k]
                tau[p, i, j] = acc
        for i in range(d):
            for j in range(d):
                affine[p, i, j] = -dt * K * V[p] * tau[p, i, j] + m * C[p, i, j]
    return mass, affine, momentum, tau


@_dual
def _impulses_vjp(F, C, v, E, nu, rho, V, sigma, tau, dt, K, corotated, exponent, eps,
                  g_mass_in, g_affine, g_momentum):
    """VJP of _impulses except the cable term: g_v, g_F, g_C, g_σ, g_E, g_ν, g_ρ, g_V."""
    n, d = v.shape
    g_v = np.empty_like(v)
    g_F = np.zeros_like(F)
    g_C = np.empty_like(F)
    g_sigma = np.empty_like(v)
    g_E = np.empty_like(E)
    g_nu = np.empty_like(E)
    g_rho = np.empty_like(E)
    g_V = np.empty_like(E)
    scratch = np.empty((n, 7, d, d), dtype=F.dtype)
    for p in numba.prange(n):
        P, H, R, X, Y = (scratch[p, 0], scratch[p, 1], scratch[p, 2], scratch[p, 3],
                         scratch[p, 4])
        g_tau, g_P = scratch[p, 5], scratch[p, 6]
        J = _piola(F[p], E[p], nu[p], corotated, exponent, P, H, R, X, Y, eps)
        m = rho[p] * V[p]
        g_m = g_mass_in[p]
        g_vol = 0.0
        for i in range(d):
            g_v[p, i] = m * g_momentum[p, i]
            g_m += v[p, i] * g_momentum[p, i]
            for j in range(d):
                g_m += C[p, i, j] * g_affine[p, i, j]
                g_C[p, i, j] = m * g_affine[p, i, j]
                g_tau[i, j] = -dt * K * V[p] * g_affine[p, i, j]
                g_vol += -dt * K * tau[p, i, j] * g_affine[p, i, j]
        g_rho[p] = g_m * V[p]
        g_V[p] = g_vol + g_m * rho[p]
        for i in range(d):
            for j in range(d):
                a_P = 0.0
                a_F = 0.0
                a_S = 0.0
                for k in range(d):
                    a_P += g_tau[i, k] * F[p, k, j]
                    a_F += g_tau[k, i] * P[k, j]
                    a_S += (g_tau[i, k] + g_tau[k, i]) * F[p, k, j]
                g_P[i, j] = a_P
                g_F[p, i, j] += a_F + a_S * sigma[p, j]
            acc = 0.0
            for a in range(d):
                for b in range(d):
                    acc += F[p, a, i] * g_tau[a, b] * F[p, b, i]
            g_sigma[p, i] = acc
        g_E[p], g_nu[p] = _piola_vjp(F[p], E[p], nu[p], corotated, exponent, g_P, g_F[p], H,
                                     R, X, Y, J)
    return g_v, g_F, g_C, g_sigma, g_E, g_nu, g_rho, g_V


@_dual
def _actuation(signals, actuator_index, axes, max_stress, n):
    d = axes.shape[1]
    sigma = np.zeros((n, d), dtype=signals.dtype)
    for p in numba.prange(n):
        k = actuator_index[p]
        if k >= 0:
            for i in range(d):
                sigma[p, i] = signals[k] * max_stress[k] * axes[k, i]
    return sigma


@numba.njit(cache=True, error_model="numpy")
def _actuation_vjp(g_sigma, actuator_index, axes, max_stress):
    n, d = g_sigma.shape
    g = np.zeros(axes.shape[0], dtype=g_sigma.dtype)
    for p in range(n):
        k = actuator_index[p]
        if k >= 0:
            for i in range(d):
                g[k] += g_sigma[p, i] * axes[k, i]
    for k in range(axes.shape[0]):
        g[k] *= max_stress[k]
    return g


def _flat_layers(c: StepConstants):
    layers = c.layers
    sizes = [int(layer.node_index.shape[0]) for layer in layers]
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if layers:
        node_index = np.concatenate([layer.node_index for layer in layers]).astype(np.int64)
        normal = np.concatenate([layer.normal for layer in layers]).astype(c.dtype)
    else:
        node_index = np.zeros(0, dtype=np.int64)
        normal = np.zeros((0, c.dim), dtype=c.dtype)
    kinds = np.array([layer.kind for layer in layers], dtype=np.int64)
    frictions = np.array([layer.friction for layer in layers], dtype=c.dtype)
    return node_index, normal, start, kinds, frictions


_LAYER_CACHE: dict[int, tuple] = {}


def _layers(c: StepConstants):
    key = id(c)
    cached = _LAYER_CACHE.get(key)
    if cached is None or cached[0] is not c:
        cached = (c, _flat_layers(c))
        _LAYER_CACHE[key] = cached
    return cached[1]


def _pick(kernel: _Kernel, parallel: bool):
    return kernel.parallel if parallel else kernel.serial


def _particle_terms(c: StepConstants, state: MPMState, action, params: dict, dt: float,
                    parallel: bool):
    """Actuation stress, cable forces and the compiled per-particle impulses."""
    dtype = c.dtype
    action = np.asarray(action, dtype=dtype)
    stress_signals, cable_signals = action[: c.n_stress], action[c.n_stress:]
    n = state.particle_x.shape[0]
    sigma = _pick(_actuation, parallel)(stress_signals, c.actuator_index, c.actuator_axes,
                                        c.actuator_max_stress, n)
    if c.cables:
        cable_f = cable_forces(np, state.particle_x, cable_signals, c.cables)
    else:
        cable_f = np.zeros_like(state.particle_x)
    mass, affine, momentum, tau = _pick(_impulses, parallel)(
        state.particle_F, state.particle_C, state.particle_v, params["youngs_modulus"],
        params["poissons_ratio"], params["density"], params["volume"], sigma, cable_f,
        dtype.type(dt), dtype.type(4.0 / c.dx**2), c.material == "corotated", c.exponent,
        dtype.type(np.finfo(dtype).eps))
    saved = dict(sigma=sigma, tau=tau, cable_signals=cable_signals)
    return mass, affine, momentum, saved


def _particle_terms_vjp(c: StepConstants, state: MPMState, params: dict, dt: float, saved,
                        g_mass, g_affine, g_momentum, parallel: bool):
    dtype = c.dtype
    g_v, g_F, g_C, g_sigma, g_E, g_nu, g_rho, g_V = _pick(_impulses_vjp, parallel)(
        state.particle_F, state.particle_C, state.particle_v, params["youngs_modulus"],
        params["poissons_ratio"], params["density"], params["volume"], saved["sigma"],
        saved["tau"], dtype.type(dt), dtype.type(4.0 / c.dx**2), c.material == "corotated",
        c.exponent, dtype.type(np.finfo(dtype).eps), g_mass, g_affine, g_momentum)
    g_stress = _actuation_vjp(g_sigma, c.actuator_index, c.actuator_axes,
                              c.actuator_max_stress)
    g_x, g_cable = cable_forces_vjp(np, state.particle_x, saved["cable_signals"], c.cables,
                                    dtype.type(dt) * g_momentum)
    g_params = {"youngs_modulus": g_E, "poissons_ratio": g_nu, "density": g_rho,
                "volume": g_V}
    return g_x, g_v, g_F, g_C, np.concatenate([g_stress, g_cable]), g_params


def _contiguous(state: MPMState) -> MPMState:
    return MPMState(*(np.ascontiguousarray(a) for a in (
        state.particle_x, state.particle_v, state.particle_F, state.particle_C)))


def _forward(c: StepConstants, state: MPMState, action, params: dict, dt: float,
             parallel: bool):
    dtype = c.dtype
    K = dtype.type(4.0 / c.dx**2)
    dt_t = dtype.type(dt)
    state = _contiguous(state)
    x, F = state.particle_x, state.particle_F
    mass, affine, momentum, saved = _particle_terms(c, state, action, params, dt, parallel)
    weight, grad_weight, offset_x, node = _pick(_stencil, parallel)(
        x, dtype.type(c.dx), c.grid_resolution, c.offsets, c.strides)
    grid_mv, grid_m = _p2g.serial(weight, offset_x, node, momentum, affine, mass, c.node_count)
    grid_v, grid_v_free, inv_m = _pick(_grid_update, parallel)(grid_mv, grid_m, c.gravity,
                                                               dt_t)
    node_index, normal, start, kinds, frictions = _layers(c)
    inputs = np.empty((node_index.shape[0], c.dim), dtype=dtype)
    _pick(_project, parallel)(grid_v, node_index, normal, start, kinds, frictions, inputs)
    new_x, new_v, new_C, new_F = _pick(_g2p, parallel)(weight, offset_x, node, grid_v, x, F,
                                                       dt_t, K)
    saved.update(mass=mass, affine=affine, momentum=momentum, weight=weight,
                 grad_weight=grad_weight, offset_x=offset_x, node=node, grid_v=grid_v,
                 grid_v_free=grid_v_free, inv_m=inv_m, inputs=inputs, new_C=new_C)
    return MPMState(new_x, new_v, new_F, new_C), saved


def substep(c: StepConstants, state: MPMState, action, params: dict, dt: float, *,
            parallel: bool = False) -> MPMState:
    """Same contract as :func:`sim_mpm.step.substep` (NumPy arrays); ``parallel`` selects
    the multithreaded builds."""
    return _forward(c, state, action, params, dt, parallel)[0]


def substep_vjp(c: StepConstants, state: MPMState, action, params: dict, dt: float,
                g_next: MPMState, *, parallel: bool = False):
    """Same contract as :func:`sim_mpm.step.substep_vjp` (NumPy arrays)."""
    dtype = c.dtype
    K = dtype.type(4.0 / c.dx**2)
    dt_t = dtype.type(dt)
    state = _contiguous(state)
    g_next = _contiguous(g_next)
    _, s = _forward(c, state, action, params, dt, parallel)
    args = (s["weight"], s["grad_weight"], s["offset_x"], s["node"])
    g_x, g_F, g_new_v, g_new_C = _pick(_g2p_vjp_particles, parallel)(
        *args, s["grid_v"], state.particle_F, s["new_C"], g_next.particle_x,
        g_next.particle_v, g_next.particle_F, g_next.particle_C, dt_t, K)
    g_grid_v = _g2p_vjp_grid.serial(s["weight"], s["offset_x"], s["node"], g_new_v, g_new_C,
                                    K, c.node_count)
    node_index, normal, start, kinds, frictions = _layers(c)
    _pick(_project_vjp, parallel)(g_grid_v, node_index, normal, start, kinds, frictions,
                                  s["inputs"])
    g_mv, g_m = _pick(_grid_update_vjp, parallel)(g_grid_v, s["grid_v_free"], s["inv_m"])
    g_momentum, g_affine, g_mass, g_xp = _pick(_p2g_vjp, parallel)(
        *args, g_mv, g_m, s["momentum"], s["affine"], s["mass"])
    g_xi, g_v, g_Fi, g_C, g_action, g_params = _particle_terms_vjp(
        c, state, params, dt, s, g_mass, g_affine, g_momentum, parallel)
    return MPMState(g_x + g_xp + g_xi, g_v, g_F + g_Fi, g_C), g_action, g_params
