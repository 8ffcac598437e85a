"""Body masses that grow with the everted length (``linear_density``).

A vine everts at its tip: the material that comes out joins the moving end, so the vine's
mass and inertia grow with its length. With fixed body masses (``total_mass`` split over the
bodies, the default) a vine that grows four times longer keeps the mass of its first
length. With a density per length ρ [kg/m] the model's prismatic pairs carry the material
between them: the distal body of pair p carries its own length 2d and the pair's extension
e_p = t_a·(p_b − p_a) − 2d (t_a the proximal body's axis),

    m_i(q) = mass_i · ℓ_i(q) / (2d),   ℓ_i = 2d + e_p for a distal body b_p, 2d otherwise,

where ``mass_i`` is the design's ``body.mass`` (default ρ · 2d, the mass of the body's own
length). Inertia stays m_i r² with the body's radius of gyration, so it grows with the mass
(linearly in the everted length). A step uses the masses at its input poses, and its VJP
adds their dependence on the poses (:func:`everted_masses_vjp`).

A vine that everts (``growth: evert``, :mod:`sim_vine.evert`) always carries its masses
this way: body j carries ``ℓ_j = 2d + σ_j`` (σ_j its slot offset, −2d before it everts)
and weighs ``mass_j (f + (1 − f) ℓ_j / (2d))`` with ``f`` = :data:`UNEVERTED_MASS_FRACTION`:
a body not yet everted keeps that small share of its mass (it rides on the tip, held
there by its joint rows; a zero mass would make the step's Hessian singular).
"""

from __future__ import annotations

import numpy as np

from . import evert
from ._kernels import evert_mass_factors, evert_slot_backward
from .model import VineModel

__all__ = ["UNEVERTED_MASS_FRACTION", "material_lengths", "everted_masses",
           "everted_masses_vjp", "masses_grow"]

UNEVERTED_MASS_FRACTION = 0.01
"""Share of its mass a body of a vine that everts has before it everts."""


def masses_grow(model: VineModel) -> bool:
    """True when the model's body masses follow the everted material (``linear_density``
    set, or a vine that everts)."""
    return model.linear_density is not None or model.evert


def _pair_geometry(model: VineModel, body_q):
    q = np.asarray(body_q, dtype=np.float64).reshape(model.body_count, 3)
    a, b = model.prismatics
    axis = np.stack([np.cos(q[a, 2]), np.sin(q[a, 2])], axis=1)
    gap = q[b, :2] - q[a, :2]
    return a, b, axis, gap


def material_lengths(model: VineModel, body_q) -> np.ndarray:
    """Length of vine material each body carries [m], shape (N,): 2d, plus the pair's
    extension for the distal body of each prismatic pair; ``2d + σ_j`` for body j ≥ 1 of a
    vine that everts."""
    lengths = np.full(model.body_count, model.body_length)
    if model.evert:
        lengths[1:] += evert.slot_offsets(model, body_q)[1:]
        return lengths
    _, b, axis, gap = _pair_geometry(model, body_q)
    lengths[b] = np.sum(axis * gap, axis=1)  # 2d + e_p
    return lengths


def everted_masses(model: VineModel, mass, body_q) -> np.ndarray:
    """Body masses [kg] at poses ``body_q`` (N, 3) from the design's ``mass`` (N,) [kg]."""
    return np.asarray(mass, dtype=np.float64) * _mass_factors(model, body_q)


def _mass_factors(model: VineModel, body_q) -> np.ndarray:
    if model.evert:  # compiled: this runs twice a step (forward and VJP)
        return evert_mass_factors(model.half_length, model.base,
                                  np.asarray(body_q, dtype=np.float64), UNEVERTED_MASS_FRACTION)
    return material_lengths(model, body_q) / model.body_length


def everted_masses_vjp(model: VineModel, mass, body_q, g_masses) -> tuple[np.ndarray, np.ndarray]:
    """``(∂L/∂mass (N,), ∂L/∂body_q (N, 3))`` of :func:`everted_masses` given ∂L/∂m (N,)."""
    mass = np.asarray(mass, dtype=np.float64)
    g_masses = np.asarray(g_masses, dtype=np.float64)
    g_mass = g_masses * _mass_factors(model, body_q)
    if model.evert:  # ∂m_j/∂σ_j = mass_j (1 − f) / (2d), and σ_j's gradient is its slot row
        g_sigma = g_masses * mass * (1.0 - UNEVERTED_MASS_FRACTION) / model.body_length
        g_q = np.zeros((model.body_count, 3))
        evert_slot_backward(model.half_length, model.base, np.asarray(body_q, dtype=np.float64),
                            g_sigma, g_q)
        return g_mass, g_q
    a, b, axis, gap = _pair_geometry(model, body_q)
    g_length = g_masses[b] * mass[b] / model.body_length  # ∂L/∂ℓ_b
    g_q = np.zeros((model.body_count, 3))
    normal = np.stack([-axis[:, 1], axis[:, 0]], axis=1)
    g_q[b, :2] += g_length[:, None] * axis
    g_q[a, :2] -= g_length[:, None] * axis
    g_q[a, 2] += g_length * np.sum(normal * gap, axis=1)
    return g_mass, g_q
