"""Body masses that grow with the everted length (``linear_density``).

A vine everts at its tip: the material that comes out joins the moving end, so the vine's
mass and inertia grow with its length. With fixed body masses (``total_mass`` split over the
bodies, the default) a vine that grows four times longer keeps the mass of its first
length. With a density per length ρ [kg/m] the model's prismatic pairs carry the material
between them: the distal body of pair p carries its own length 2d and the pair's extension
e_p = t_a·(p_b − p_a) − 2d (t_a the proximal body's axis),

    m_i(q) = mass_i · ℓ_i(q) / (2d),   ℓ_i = 2d + e_p for a distal body b_p, 2d otherwise,

where ``mass_i`` is the design's ``body.mass`` (default ρ · 2d, the mass of the body's own
length). A step uses the masses at its input poses, and its VJP adds their dependence on
the poses (:func:`everted_masses_vjp`).

The inertia follows the material too (unless ``gyration_radius`` is set): a body carries a
uniform rod of length ℓ_i that ends at the body's distal end (for a prismatic pair the rod
runs from the proximal body's distal end to the distal body's; for a vine that everts the
part of body j out of its parent), so its second moment about the body's centre, where the
model keeps the body's mass, is

    I_i = m_i r_i²,   r_i² = ℓ_i²/12 + (ℓ_i/2 − d)² = ℓ_i²/3 − d ℓ_i + d²

(the rod's own ℓ²/12 plus the parallel-axis term of its centre, ℓ/2 − d behind the body's
centre): d²/3 = (2d)²/12 for a body carrying its own length, growing like ℓ³ with the mass,
and d² (the material at the distal end) for a body not yet everted, so the Hessian stays
regular. :func:`gyration_squares` gives r_i², :func:`gyration_squares_vjp` their pose
dependence.

A vine that everts (``growth: evert``, :mod:`sim_vine.evert`) always carries its masses
this way: body j carries ``ℓ_j = 2d + σ_j`` (σ_j its slot offset, −2d before it everts)
and weighs ``mass_j (f + (1 − f) ℓ_j / (2d))`` with ``f`` = :data:`UNEVERTED_MASS_FRACTION`:
a body not yet everted keeps that small share of its mass (it rides on the tip, held
there by its joint rows; a zero mass would make the step's Hessian singular).
"""

from __future__ import annotations

import numpy as np

from ._kernels import (
    evert_gyration_squares,
    evert_mass_factors,
    evert_material_lengths,
    evert_slot_backward,
)
from .model import VineModel

__all__ = ["UNEVERTED_MASS_FRACTION", "material_lengths", "material_lengths_vjp",
           "everted_masses", "everted_masses_vjp", "masses_grow", "inertias_grow",
           "gyration_squares", "gyration_squares_vjp"]

UNEVERTED_MASS_FRACTION = 0.01
"""Share of its mass a body of a vine that everts has before it everts."""


def masses_grow(model: VineModel) -> bool:
    """True when the model's body masses follow the everted material (``linear_density``
    set, or a vine that everts)."""
    return model.linear_density is not None or model.evert


def inertias_grow(model: VineModel) -> bool:
    """True when the bodies' inertias follow the material they carry (their masses grow and
    no ``gyration_radius`` is set; otherwise I = m r² with the model's radius of gyration)."""
    return masses_grow(model) and model.gyration_radius is None


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
    if model.evert:  # compiled (twice a step); the NumPy reference is 2d + evert.slot_offsets
        return evert_material_lengths(model.half_length, model.base,
                                      np.asarray(body_q, dtype=np.float64))
    lengths = np.full(model.body_count, model.body_length)
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


def material_lengths_vjp(model: VineModel, body_q, g_lengths) -> np.ndarray:
    """∂L/∂body_q (N, 3) of :func:`material_lengths` given ∂L/∂ℓ (N,) (the lengths that do
    not move, 2d, take no gradient)."""
    g_lengths = np.asarray(g_lengths, dtype=np.float64)
    g_q = np.zeros((model.body_count, 3))
    if model.evert:  # ℓ_j = 2d + σ_j, and σ_j's gradient is its slot row
        evert_slot_backward(model.half_length, model.base, np.asarray(body_q, dtype=np.float64),
                            g_lengths, g_q)
        return g_q
    a, b, axis, gap = _pair_geometry(model, body_q)
    g_length = g_lengths[b]
    normal = np.stack([-axis[:, 1], axis[:, 0]], axis=1)
    g_q[b, :2] += g_length[:, None] * axis
    g_q[a, :2] -= g_length[:, None] * axis
    g_q[a, 2] += g_length * np.sum(normal * gap, axis=1)
    return g_q


def everted_masses_vjp(model: VineModel, mass, body_q, g_masses, *,
                       g_gyration_sq=None) -> tuple[np.ndarray, np.ndarray]:
    """``(∂L/∂mass (N,), ∂L/∂body_q (N, 3))`` of :func:`everted_masses` given ∂L/∂m (N,),
    plus, given ∂L/∂r² (N,) ``g_gyration_sq``, the pose dependence of
    :func:`gyration_squares` (one pass back through the lengths for both)."""
    mass = np.asarray(mass, dtype=np.float64)
    g_masses = np.asarray(g_masses, dtype=np.float64)
    g_mass = g_masses * _mass_factors(model, body_q)
    # ∂m_i/∂ℓ_i = mass_i / (2d), times (1 − f) for a vine that everts
    share = 1.0 - UNEVERTED_MASS_FRACTION if model.evert else 1.0
    g_lengths = g_masses * mass * share / model.body_length
    if g_gyration_sq is not None and inertias_grow(model):
        g_lengths = g_lengths + _gyration_slopes(model, body_q) * g_gyration_sq
    return g_mass, material_lengths_vjp(model, body_q, g_lengths)


def gyration_squares(model: VineModel, body_q) -> np.ndarray:
    """Squared radius of gyration r_i² [m²] of each body at poses ``body_q`` (N, 3), shape
    (N,): ``ℓ²/3 − d ℓ + d²`` of the material it carries (the inertia about the body's
    centre of a rod of length ℓ_i ending at its distal end, over its mass) when
    :func:`inertias_grow`, else the model's ``gyration²`` for every body."""
    if not inertias_grow(model):
        return np.full(model.body_count, model.gyration**2)
    d = model.half_length
    if model.evert:  # compiled: this runs every step and twice a VJP
        return evert_gyration_squares(d, model.base, np.asarray(body_q, dtype=np.float64))[0]
    lengths = material_lengths(model, body_q)
    return lengths * (lengths / 3.0 - d) + d * d


def gyration_squares_vjp(model: VineModel, body_q, g_gyration_sq) -> np.ndarray:
    """∂L/∂body_q (N, 3) of :func:`gyration_squares` given ∂L/∂r² (N,): zero unless
    :func:`inertias_grow`."""
    if not inertias_grow(model):
        return np.zeros((model.body_count, 3))
    return material_lengths_vjp(model, body_q,
                                _gyration_slopes(model, body_q) * np.asarray(g_gyration_sq))


def _gyration_slopes(model: VineModel, body_q) -> np.ndarray:
    """∂r_i²/∂ℓ_i = 2ℓ_i/3 − d, shape (N,)."""
    if model.evert:
        return evert_gyration_squares(model.half_length, model.base,
                                      np.asarray(body_q, dtype=np.float64))[1]
    return material_lengths(model, body_q) * (2.0 / 3.0) - model.half_length
