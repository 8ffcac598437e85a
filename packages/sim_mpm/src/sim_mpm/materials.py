"""Hyperelastic first Piola-Kirchhoff stresses and their VJPs, array-level (NumPy or CuPy).

- fixed corotated: P = 2μ(F − R) + λ(J − 1) J F⁻ᵀ, R the rotation of the polar decomposition
  F = R S (closed form in 2D; SVD with a sign fix in 3D, so det R = +1).
- neo-Hookean: P = μ(F − F⁻ᵀ) + λ log(J) F⁻ᵀ.
- incompressibility term (Spielberg et al.): P_inc = κ p (J − 1)^(p−1) J F⁻ᵀ with
  κ = E / (3(2 − 2ν)) and integer p ≥ 2 (0 switches it off).

μ = E / (2(1 + ν)), λ = E ν / ((1 + ν)(1 − 2ν)) per particle. The rotation's VJP uses the
polar form ΩS + SΩ = RᵀdF − dFᵀR (Ω = RᵀdR), whose solve has eigenvalues σᵢ + σⱼ only: it
stays finite when singular values repeat, unlike the VJPs of the SVD factors themselves.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MATERIALS",
    "lame_parameters",
    "lame_parameters_vjp",
    "polar_rotation",
    "polar_rotation_vjp",
    "first_piola",
    "first_piola_vjp",
]

MATERIALS = ("corotated", "neo_hookean")


def lame_parameters(E, nu):
    """(μ, λ) [Pa] from Young's modulus E [Pa] and Poisson's ratio ν, elementwise."""
    mu = E / (2.0 * (1.0 + nu))
    lam = E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    return mu, lam


def lame_parameters_vjp(E, nu, g_mu, g_lam):
    """(∂L/∂E, ∂L/∂ν) given ∂L/∂μ and ∂L/∂λ."""
    g_E = g_mu / (2.0 * (1.0 + nu)) + g_lam * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    g_nu = (-g_mu * E / (2.0 * (1.0 + nu) ** 2)
            + g_lam * E * (1.0 + 2.0 * nu * nu) / ((1.0 + nu) * (1.0 - 2.0 * nu)) ** 2)
    return g_E, g_nu


def _inverse_transpose(xp, F, J):
    """F⁻ᵀ from the cofactor matrix (cof F = J F⁻ᵀ)."""
    if F.shape[-1] == 2:
        cof = xp.stack([xp.stack([F[:, 1, 1], -F[:, 1, 0]], axis=-1),
                        xp.stack([-F[:, 0, 1], F[:, 0, 0]], axis=-1)], axis=1)
    else:
        rows = []
        for i in range(3):
            i1, i2 = (i + 1) % 3, (i + 2) % 3
            row = []
            for j in range(3):
                j1, j2 = (j + 1) % 3, (j + 2) % 3
                row.append(F[:, i1, j1] * F[:, i2, j2] - F[:, i1, j2] * F[:, i2, j1])
            rows.append(xp.stack(row, axis=-1))
        cof = xp.stack(rows, axis=1)
    return cof / J[:, None, None]


def polar_rotation(xp, F):
    """Rotation R (det +1) of the polar decomposition F = R S, shape (n, d, d)."""
    if F.shape[-1] == 2:
        a = F[:, 0, 0] + F[:, 1, 1]
        b = F[:, 1, 0] - F[:, 0, 1]
        r = xp.sqrt(a * a + b * b)
        c, s = a / r, b / r
        return xp.stack([xp.stack([c, -s], axis=-1), xp.stack([s, c], axis=-1)], axis=1)
    U, _, Vt = xp.linalg.svd(F)
    R = U @ Vt
    flip = xp.linalg.det(R) < 0
    U = U.copy()
    U[:, :, 2] = xp.where(flip[:, None], -U[:, :, 2], U[:, :, 2])
    return U @ Vt


def _skew_axial(M):
    """Components of M − Mᵀ: (M₂₁ − M₁₂) in 2D, shape (n, 1); the axial vector in 3D."""
    if M.shape[-1] == 2:
        return (M[:, 1, 0] - M[:, 0, 1])[:, None]
    return M[:, (2, 0, 1), (1, 2, 0)] - M[:, (1, 2, 0), (2, 0, 1)]


def _cross_matrix(xp, w):
    """[w]× for w of shape (n, 3); in 2D (w shape (n, 1)) the matrix [[0, −w], [w, 0]]."""
    z = xp.zeros_like(w[:, 0])
    if w.shape[-1] == 1:
        return xp.stack([xp.stack([z, -w[:, 0]], axis=-1), xp.stack([w[:, 0], z], axis=-1)],
                        axis=1)
    return xp.stack([xp.stack([z, -w[:, 2], w[:, 1]], axis=-1),
                     xp.stack([w[:, 2], z, -w[:, 0]], axis=-1),
                     xp.stack([-w[:, 1], w[:, 0], z], axis=-1)], axis=1)


def polar_rotation_vjp(xp, F, R, g_R):
    """∂L/∂F given ∂L/∂R for R = polar_rotation(F).

    With S = RᵀF, Ω = [ω]× and (tr S·I − S) ω = axial(RᵀdF − dFᵀR) (in 2D tr S·ω = ...),
    so ∂L/∂F = R [(tr S·I − S)⁻¹ m]× with m the axial components of Rᵀ ∂L/∂R.
    """
    RT = xp.swapaxes(R, 1, 2)
    S = RT @ F
    m = _skew_axial(RT @ g_R)
    trace = xp.trace(S, axis1=1, axis2=2)
    if F.shape[-1] == 2:
        omega = m / trace[:, None]
    else:
        A = trace[:, None, None] * xp.eye(3, dtype=F.dtype) - S
        A = 0.5 * (A + xp.swapaxes(A, 1, 2))
        omega = xp.linalg.solve(A, m[:, :, None])[:, :, 0]
    return R @ _cross_matrix(xp, omega)


def _incompressible_coefficient(E, nu):
    return E / (3.0 * (2.0 - 2.0 * nu))


def first_piola(xp, F, E, nu, *, material: str, exponent: int) -> Any:
    """First Piola-Kirchhoff stress P [Pa], shape (n, d, d), for F (n, d, d), E and ν (n,)."""
    mu, lam = lame_parameters(E, nu)
    J = xp.linalg.det(F)
    H = _inverse_transpose(xp, F, J)
    if material == "corotated":
        R = polar_rotation(xp, F)
        P = 2.0 * mu[:, None, None] * (F - R) + (lam * (J - 1.0) * J)[:, None, None] * H
    elif material == "neo_hookean":
        P = mu[:, None, None] * (F - H) + (lam * xp.log(J))[:, None, None] * H
    else:
        raise ValueError(f"unknown material {material!r}; choose one of {', '.join(MATERIALS)}")
    if exponent:
        kappa = _incompressible_coefficient(E, nu)
        P = P + (kappa * exponent * (J - 1.0) ** (exponent - 1) * J)[:, None, None] * H
    return P


def first_piola_vjp(xp, F, E, nu, g_P, *, material: str, exponent: int):
    """(∂L/∂F, ∂L/∂E, ∂L/∂ν) given ∂L/∂P for P = first_piola(F, E, ν)."""
    mu, lam = lame_parameters(E, nu)
    J = xp.linalg.det(F)
    H = _inverse_transpose(xp, F, J)
    gH = xp.sum(g_P * H, axis=(1, 2))
    # ∂<G, H>/∂F = −H Gᵀ H, ∂J/∂F = J H
    H_GT_H = H @ xp.swapaxes(g_P, 1, 2) @ H
    if material == "corotated":
        R = polar_rotation(xp, F)
        c = lam * (J - 1.0) * J
        g_F = (2.0 * mu[:, None, None] * g_P
               - polar_rotation_vjp(xp, F, R, 2.0 * mu[:, None, None] * g_P)
               + (lam * (2.0 * J - 1.0) * J * gH)[:, None, None] * H
               - c[:, None, None] * H_GT_H)
        g_mu = 2.0 * xp.sum(g_P * (F - R), axis=(1, 2))
        g_lam = (J - 1.0) * J * gH
    else:
        logJ = xp.log(J)
        g_F = (mu[:, None, None] * g_P + (mu - lam * logJ)[:, None, None] * H_GT_H
               + (lam * gH)[:, None, None] * H)
        g_mu = xp.sum(g_P * (F - H), axis=(1, 2))
        g_lam = logJ * gH
    g_E, g_nu = lame_parameters_vjp(E, nu, g_mu, g_lam)
    if exponent:
        p = exponent
        kappa = _incompressible_coefficient(E, nu)
        phi = kappa * p * (J - 1.0) ** (p - 1) * J
        dphi = kappa * p * ((p - 1) * (J - 1.0) ** (p - 2) * J + (J - 1.0) ** (p - 1))
        g_F = g_F + (dphi * J * gH)[:, None, None] * H - phi[:, None, None] * H_GT_H
        g_kappa = p * (J - 1.0) ** (p - 1) * J * gH
        g_E = g_E + g_kappa / (6.0 * (1.0 - nu))
        g_nu = g_nu + g_kappa * E / (6.0 * (1.0 - nu) ** 2)
    return g_F, g_E, g_nu
