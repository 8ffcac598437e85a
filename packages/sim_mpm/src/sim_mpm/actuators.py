"""Actuators: stress (pneumatic/hydraulic) and cable, with VJPs, array-level.

Action layout: ``action = [stress signals (n_stress), cable signals (n_cables)]``. Signals
are meant to lie in [−1, 1] and are scaled by each actuator's maximum here; keeping them in
range (clip, tanh) is the controller's job, so values outside are applied as given.

Stress actuators (ChainQueen; Spielberg et al. Eq. 15) add A = F σ_a Fᵀ to the Kirchhoff
stress of each particle of actuator k, σ_a = u_k · σ_max,k · diag(axis mask_k). A positive
signal is tensile (the actuator contracts along its axes); a negative one expands it.

Cable actuators (Spielberg et al. Eq. 17) store E = k/2 · max(0, L − ℓ(u))², with L the
length of the polyline through the route particles and ℓ(u) = max(0, L₀ − R u) the cable's
free length: L₀ its rest length (the route's length in the rest configuration), R the
maximum contraction [m]. At u = 0 the cable is just taut, u = 1 shortens it by R, u < 0
slackens it (a cable cannot push). The paper writes ℓ = max(0, R u) with R a rest length,
which leaves the cable fully tensioned at u = 0; the offset by L₀ keeps the rest pose
force-free. Forces f = −∂E/∂p enter as Δv = f Δt / m (momentum Δt f in P2G).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from codesign.backend import scatter_add

__all__ = [
    "CableActuator",
    "stress_actuation",
    "stress_actuation_vjp",
    "cable_forces",
    "cable_forces_vjp",
]


@dataclasses.dataclass(frozen=True)
class CableActuator:
    """One cable routed through an ordered list of particles.

    Attributes:
        route: particle indices in order, shape (r,), r ≥ 2.
        stiffness: k [N/m].
        max_contraction: R [m], the shortening at signal 1.
        rest_length: L₀ [m], the route's length in the rest configuration.
    """

    route: Any
    stiffness: float
    max_contraction: float
    rest_length: float


def stress_actuation(xp, signals, actuator_index, actuator_axes, actuator_max_stress):
    """Per-particle diagonal actuation stress σ_a [Pa], shape (n, d) (zero if unactuated).

    Args:
        signals: stress signals u, shape (n_stress,).
        actuator_index: actuator of each particle or −1, shape (n,).
        actuator_axes: axis mask per actuator, shape (n_stress, d).
        actuator_max_stress: σ_max per actuator [Pa], shape (n_stress,).
    """
    if actuator_axes.shape[0] == 0:
        return xp.zeros((actuator_index.shape[0], actuator_axes.shape[1]), dtype=signals.dtype)
    per_actuator = (signals * actuator_max_stress)[:, None] * actuator_axes
    active = actuator_index >= 0
    safe = xp.where(active, actuator_index, 0)
    return per_actuator[safe] * active[:, None]


def stress_actuation_vjp(xp, g_sigma, actuator_index, actuator_axes, actuator_max_stress):
    """∂L/∂u, shape (n_stress,), given ∂L/∂σ_a of shape (n, d)."""
    n_stress = actuator_axes.shape[0]
    if n_stress == 0:
        return xp.zeros(0, dtype=g_sigma.dtype)
    active = actuator_index >= 0
    safe = xp.where(active, actuator_index, 0)
    per_particle = xp.sum(g_sigma * actuator_axes[safe], axis=1) * active
    g = xp.zeros(n_stress, dtype=g_sigma.dtype)
    scatter_add(g, safe, per_particle)
    return g * actuator_max_stress


def _cable_geometry(xp, x, signals, cables):
    """Per route segment (start and end particle, owning cable, length, direction) and per
    cable (free length, stretch, tension, maximum contraction, stiffness)."""
    routes = [np.asarray(cable.route) for cable in cables]
    a, b, owner = (xp.asarray(np.concatenate(parts)) for parts in (
        [route[:-1] for route in routes], [route[1:] for route in routes],
        [np.full(route.size - 1, c) for c, route in enumerate(routes)]))
    delta = x[b] - x[a]
    length = xp.sqrt(xp.sum(delta * delta, axis=1))
    direction = delta / length[:, None]
    total = xp.zeros(len(cables), dtype=x.dtype)
    scatter_add(total, owner, length)
    rest = xp.asarray([c.rest_length for c in cables], dtype=x.dtype)
    reach = xp.asarray([c.max_contraction for c in cables], dtype=x.dtype)
    stiffness = xp.asarray([c.stiffness for c in cables], dtype=x.dtype)
    free = rest - reach * signals
    stretch = total - xp.maximum(free, 0.0)
    tension = stiffness * xp.maximum(stretch, 0.0)
    return a, b, owner, length, direction, free, stretch, tension, reach, stiffness


def cable_forces(xp, x, signals, cables):
    """Cable forces f = −∂E/∂x [N], shape (n, d), for positions x (n, d), signals (n_cables,)."""
    f = xp.zeros_like(x)
    if not cables:
        return f
    a, b, owner, _, direction, *_, tension, _, _ = _cable_geometry(xp, x, signals, cables)
    pull = tension[owner][:, None] * direction
    scatter_add(f, a, pull)
    scatter_add(f, b, -pull)
    return f


def cable_forces_vjp(xp, x, signals, cables, g_f):
    """(∂L/∂x (n, d), ∂L/∂u (n_cables,)) given ∂L/∂f of shape (n, d)."""
    if not cables:
        return xp.zeros_like(x), xp.zeros(0, dtype=x.dtype)
    (a, b, owner, length, direction, free, stretch, tension, reach,
     stiffness) = _cable_geometry(xp, x, signals, cables)
    g_pull = g_f[a] - g_f[b]
    g_tension = xp.zeros(len(cables), dtype=x.dtype)
    scatter_add(g_tension, owner, xp.sum(g_pull * direction, axis=1))
    g_direction = tension[owner][:, None] * g_pull
    g_delta = (g_direction - xp.sum(g_direction * direction, axis=1, keepdims=True)
               * direction) / length[:, None]
    g_stretch = xp.where(stretch > 0, stiffness * g_tension, 0.0)  # = ∂L/∂(route length)
    g_signals = xp.where(free > 0, g_stretch * reach, 0.0)
    g_delta = g_delta + g_stretch[owner][:, None] * direction
    g_x = xp.zeros_like(x)
    scatter_add(g_x, b, g_delta)
    scatter_add(g_x, a, -g_delta)
    return g_x, g_signals
