"""One MLS-MPM substep and its hand-derived adjoint: the readable array-level reference.

Runs on NumPy or CuPy (``xp = array_module_of(...)``). One substep, with K = 4/Δx²:

1. stress: Kirchhoff stress τ_p = P(F_p) F_pᵀ + F_p σ_a Fᵀ_p (material plus actuation);
   affine_p = −Δt V_p K τ_p + m_p C_p; momentum_p = m_p v_p + Δt f_p (cable forces).
2. P2G: m_i = Σ_p w_ip m_p, (mv)_i = Σ_p w_ip (momentum_p + affine_p (x_i − x_p)).
3. grid: v_i = (mv)_i / m_i + Δt g where m_i > 0, then the boundary projections.
4. G2P: v'_p = Σ_i w_ip v_i, C'_p = K Σ_i w_ip v_i (x_i − x_p)ᵀ, F'_p = (I + Δt C'_p) F_p,
   x'_p = x_p + Δt v'_p.

w_ip are quadratic B-spline weights on the 3^d nodes around base = ⌊x/Δx − ½⌋ (clamped to
the grid so that an escaped particle cannot index outside; safety.check_state reports it).
The adjoint (Spielberg et al., Appendix A.2) recomputes the grid from the state and runs
these stages backwards; no cache is kept between calls.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from codesign.backend import scatter_add

from .actuators import cable_forces, cable_forces_vjp, stress_actuation, stress_actuation_vjp
from .boundaries import BoundaryLayer, project, project_vjp
from .materials import first_piola, first_piola_vjp
from .state import MPMState

__all__ = ["StepConstants", "step_constants", "stencil_offsets", "particle_impulses",
           "particle_impulses_vjp", "step", "step_vjp"]


@dataclasses.dataclass(frozen=True, eq=False)
class StepConstants:
    """The model's static arrays on one backend and in one dtype, ready for stepping."""

    xp: Any
    dim: int
    grid_resolution: int
    dx: float
    dtype: Any
    gravity: Any
    material: str
    exponent: int
    actuator_index: Any
    actuator_axes: Any
    actuator_max_stress: Any
    cables: tuple
    layers: tuple
    offsets: Any
    strides: Any
    n_stress: int

    @property
    def node_count(self) -> int:
        """Number of grid nodes, res**dim."""
        return self.grid_resolution**self.dim


def stencil_offsets(dim: int) -> np.ndarray:
    """The 3^dim node offsets of the quadratic stencil, shape (3^dim, dim), C order."""
    return np.array(list(itertools.product(range(3), repeat=dim)), dtype=np.int64)


def step_constants(model, xp) -> StepConstants:
    """Move a model's static arrays to backend ``xp`` and cast them to the model's dtype."""
    dtype = model.dtype

    def put(a, dt=dtype):
        return xp.asarray(np.asarray(a, dtype=dt))

    layers = tuple(BoundaryLayer(put(layer.node_index, np.int64), put(layer.normal),
                                 layer.kind, layer.friction) for layer in model.boundary_layers)
    res, dim = model.grid_resolution, model.dim
    return StepConstants(
        xp=xp, dim=dim, grid_resolution=res, dx=model.dx, dtype=dtype, gravity=put(model.gravity),
        material=model.material, exponent=model.incompressibility_exponent,
        actuator_index=put(model.actuator_index, np.int64), actuator_axes=put(model.actuator_axes),
        actuator_max_stress=put(model.actuator_max_stress), cables=model.cables, layers=layers,
        offsets=put(stencil_offsets(dim), np.int64),
        strides=put([res ** (dim - 1 - k) for k in range(dim)], np.int64),
        n_stress=model.stress_actuator_count)


@dataclasses.dataclass(frozen=True)
class _Stencil:
    weight: Any  # (n, S)
    grad_weight: Any  # (n, S, d), ∂w/∂x [1/m]
    offset_x: Any  # (n, S, d), x_i − x_p [m]
    node: Any  # (n, S) flat node index


def _stencil(c: StepConstants, x) -> _Stencil:
    xp, dx, d = c.xp, c.dx, c.dim
    xs = x / dx
    base = xp.clip(xp.floor(xs - 0.5).astype(xp.int64), 0, c.grid_resolution - 3)
    fx = xs - base
    w = xp.stack([0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2], axis=-1)
    dw = xp.stack([fx - 1.5, -2.0 * (fx - 1.0), fx - 0.5], axis=-1)
    axis = xp.arange(d)[None, :]
    wk = w[:, axis, c.offsets]  # (n, S, d)
    dwk = dw[:, axis, c.offsets]
    weight = xp.prod(wk, axis=-1)
    grads = []
    for k in range(d):
        g = dwk[..., k] / dx
        for j in range(d):
            if j != k:
                g = g * wk[..., j]
        grads.append(g)
    grad_weight = xp.stack(grads, axis=-1)
    offset_x = (c.offsets[None].astype(x.dtype) - fx[:, None, :]) * dx
    node = xp.sum((base[:, None, :] + c.offsets[None]) * c.strides, axis=-1)
    return _Stencil(weight, grad_weight, offset_x, node)


def _split_action(c: StepConstants, action):
    action = c.xp.asarray(action, dtype=c.dtype)
    return action[: c.n_stress], action[c.n_stress:]


def _particle_stress(c, F, params, stress_signals):
    """Kirchhoff stress τ = P Fᵀ + F σ_a Fᵀ, shape (n, d, d)."""
    xp = c.xp
    P = first_piola(xp, F, params["youngs_modulus"], params["poissons_ratio"],
                    material=c.material, exponent=c.exponent)
    sigma = stress_actuation(xp, stress_signals, c.actuator_index, c.actuator_axes,
                             c.actuator_max_stress)
    FT = xp.swapaxes(F, 1, 2)
    return P @ FT + (F * sigma[:, None, :]) @ FT


def particle_impulses(c: StepConstants, state: MPMState, action, params: dict, dt: float):
    """Per-particle P2G inputs: (mass (n,), affine (n, d, d), momentum (n, d), saved dict).

    affine = −Δt V K τ + m C (τ the Kirchhoff stress with actuation), momentum = m v + Δt f.
    """
    xp, K = c.xp, 4.0 / c.dx**2
    stress_signals, cable_signals = _split_action(c, action)
    mass = params["density"] * params["volume"]
    tau = _particle_stress(c, state.particle_F, params, stress_signals)
    affine = ((-dt * K) * params["volume"][:, None, None] * tau
              + mass[:, None, None] * state.particle_C)
    momentum = (mass[:, None] * state.particle_v
                + dt * cable_forces(xp, state.particle_x, cable_signals, c.cables))
    saved = dict(tau=tau, stress_signals=stress_signals, cable_signals=cable_signals)
    return mass, affine, momentum, saved


def particle_impulses_vjp(c: StepConstants, state: MPMState, params: dict, dt: float, saved,
                          g_mass, g_affine, g_momentum):
    """VJP of :func:`particle_impulses`: (g_x, g_v, g_F, g_C, g_action, g_params)."""
    xp, K = c.xp, 4.0 / c.dx**2
    x, v, F, C = state.particle_x, state.particle_v, state.particle_F, state.particle_C
    mass = params["density"] * params["volume"]
    g_v = mass[:, None] * g_momentum
    g_mass = g_mass + xp.sum(v * g_momentum, axis=1) + xp.sum(C * g_affine, axis=(1, 2))
    g_C = mass[:, None, None] * g_affine
    g_x, g_cable = cable_forces_vjp(xp, x, saved["cable_signals"], c.cables, dt * g_momentum)
    volume = params["volume"]
    g_tau = (-dt * K) * volume[:, None, None] * g_affine
    g_volume = (-dt * K) * xp.sum(saved["tau"] * g_affine, axis=(1, 2))
    # τ = P Fᵀ + F σ Fᵀ
    P = first_piola(xp, F, params["youngs_modulus"], params["poissons_ratio"],
                    material=c.material, exponent=c.exponent)
    sigma = stress_actuation(xp, saved["stress_signals"], c.actuator_index, c.actuator_axes,
                             c.actuator_max_stress)
    g_P = g_tau @ F
    g_F = xp.swapaxes(g_tau, 1, 2) @ P
    g_F = g_F + ((g_tau + xp.swapaxes(g_tau, 1, 2)) @ F) * sigma[:, None, :]
    g_sigma = xp.einsum("nai,nab,nbi->ni", F, g_tau, F)
    g_stress = stress_actuation_vjp(xp, g_sigma, c.actuator_index, c.actuator_axes,
                                    c.actuator_max_stress)
    g_Fp, g_E, g_nu = first_piola_vjp(xp, F, params["youngs_modulus"],
                                      params["poissons_ratio"], g_P, material=c.material,
                                      exponent=c.exponent)
    g_params = {
        "youngs_modulus": g_E,
        "poissons_ratio": g_nu,
        "density": g_mass * volume,
        "volume": g_volume + g_mass * params["density"],
    }
    return g_x, g_v, g_F + g_Fp, g_C, xp.concatenate([g_stress, g_cable]), g_params


def _forward(c: StepConstants, state: MPMState, action, params, dt):
    """The step, returning the next state and the intermediates the adjoint needs."""
    xp, K = c.xp, 4.0 / c.dx**2
    x, F = state.particle_x, state.particle_F
    mass, affine, momentum, saved = particle_impulses(c, state, action, params, dt)
    st = _stencil(c, x)
    contrib = st.weight[..., None] * (momentum[:, None, :]
                                      + xp.einsum("nab,nsb->nsa", affine, st.offset_x))
    grid_mv = xp.zeros((c.node_count, c.dim), dtype=c.dtype)
    grid_m = xp.zeros(c.node_count, dtype=c.dtype)
    scatter_add(grid_mv, st.node.reshape(-1), contrib.reshape(-1, c.dim))
    scatter_add(grid_m, st.node.reshape(-1), (st.weight * mass[:, None]).reshape(-1))
    has_mass = grid_m > 0
    inv_m = xp.where(has_mass, 1.0 / xp.where(has_mass, grid_m, 1.0), 0.0)
    grid_v_free = grid_mv * inv_m[:, None]
    grid_v0 = grid_v_free + has_mass[:, None] * (dt * c.gravity)
    grid_v, layer_inputs = project(xp, grid_v0, c.layers)
    gathered = grid_v[st.node]  # (n, S, d)
    new_v = xp.sum(st.weight[..., None] * gathered, axis=1)
    new_C = K * xp.einsum("ns,nsa,nsb->nab", st.weight, gathered, st.offset_x)
    new_F = F + dt * (new_C @ F)
    new_x = x + dt * new_v
    saved.update(mass=mass, affine=affine, momentum=momentum, stencil=st, inv_m=inv_m,
                 grid_v_free=grid_v_free, layer_inputs=layer_inputs, gathered=gathered,
                 new_C=new_C)
    return MPMState(new_x, new_v, new_F, new_C), saved


def step(c: StepConstants, state: MPMState, action, params: dict, dt: float) -> MPMState:
    """Advance ``state`` by one step of ``dt`` [s]; pure.

    Args:
        c: the model's constants (:func:`step_constants`).
        state: particle state in the model's dtype.
        action: stress signals then cable signals, shape (action_size,).
        params: per-particle ``youngs_modulus`` [Pa], ``poissons_ratio``, ``density``
            [kg/m^d] and ``volume`` [m^d], each shape (n,), on the backend in the model dtype.
        dt: step length [s].
    """
    return _forward(c, state, action, params, dt)[0]


def step_vjp(c: StepConstants, state: MPMState, action, params: dict, dt: float,
             g_next: MPMState):
    """(∂L/∂state, ∂L/∂action, ∂L/∂params) given ∂L/∂(next state); params as in step."""
    xp, K, d = c.xp, 4.0 / c.dx**2, c.dim
    F = state.particle_F
    _, s = _forward(c, state, action, params, dt)
    st = s["stencil"]
    gx_next, gv_next = g_next.particle_x, g_next.particle_v
    gF_next, gC_next = g_next.particle_F, g_next.particle_C

    # G2P
    g_x = gx_next.copy()
    g_new_v = gv_next + dt * gx_next
    g_F = xp.swapaxes(xp.eye(d, dtype=c.dtype) + dt * s["new_C"], 1, 2) @ gF_next
    g_new_C = gC_next + dt * (gF_next @ xp.swapaxes(F, 1, 2))
    gathered = s["gathered"]
    g_gathered = st.weight[..., None] * (
        g_new_v[:, None, :] + K * xp.einsum("nab,nsb->nsa", g_new_C, st.offset_x))
    g_grid_v = xp.zeros((c.node_count, d), dtype=c.dtype)
    scatter_add(g_grid_v, st.node.reshape(-1), g_gathered.reshape(-1, d))
    dot_v = xp.sum(gathered * g_new_v[:, None, :], axis=-1)
    dot_c = K * xp.einsum("nsa,nab,nsb->ns", gathered, g_new_C, st.offset_x)
    g_x = g_x + xp.sum(st.grad_weight * (dot_v + dot_c)[..., None], axis=1)
    g_x = g_x - K * xp.einsum("ns,nsa,nab->nb", st.weight, gathered, g_new_C)

    # grid update
    g_grid_v0 = project_vjp(xp, c.layers, s["layer_inputs"], g_grid_v)
    g_grid_mv = g_grid_v0 * s["inv_m"][:, None]
    g_grid_m = -xp.sum(g_grid_v0 * s["grid_v_free"], axis=1) * s["inv_m"]

    # P2G
    G = g_grid_mv[st.node]  # (n, S, d)
    gm_nodes = g_grid_m[st.node]  # (n, S)
    affine, momentum, mass = s["affine"], s["momentum"], s["mass"]
    g_momentum = xp.sum(st.weight[..., None] * G, axis=1)
    g_affine = xp.einsum("ns,nsa,nsb->nab", st.weight, G, st.offset_x)
    g_mass = xp.sum(st.weight * gm_nodes, axis=1)
    moved = momentum[:, None, :] + xp.einsum("nab,nsb->nsa", affine, st.offset_x)
    dot_p = xp.sum(G * moved, axis=-1) + gm_nodes * mass[:, None]
    g_x = g_x + xp.sum(st.grad_weight * dot_p[..., None], axis=1)
    g_x = g_x - xp.einsum("ns,nsa,nab->nb", st.weight, G, affine)

    g_xp, g_v, g_Fp, g_C, g_action, g_params = particle_impulses_vjp(
        c, state, params, dt, s, g_mass, g_affine, g_momentum)
    return MPMState(g_x + g_xp, g_v, g_F + g_Fp, g_C), g_action, g_params
