"""numba CPU kernels for the MLS-MPM substep and its adjoint, equal to :mod:`.step`.

One substep is three compiled passes:

1. particles → grid (:mod:`._particle_kernels`): per particle the Kirchhoff stress with
   actuation, mass, momentum and affine momentum (vectorized loops into rows by particle;
   in 3D corotated a vectorized pass first finds every particle's polar rotation), then
   scattered to the grid;
2. grid (:mod:`._grid_kernels`): momentum to velocity plus gravity over the box of nodes
   the particles touch, then the boundary layers;
3. grid → particles: v, C, F ← (I + Δt C) F, x.

The adjoint recomputes passes 1 and 2 from the state (no cache between calls), then runs
the adjoint of G2P (which scatters ∂L/∂(grid v)), of the grid pass, and of pass 1 (which
gathers and goes through the stress per particle). Only the cable forces (a few route
particles) use the array-level functions of :mod:`.actuators`.

Parallelism: with ``parallel=True`` every pass runs on numba's threads (OpenMP when
available: a launch costs about 2 µs, against 50 µs for numba's fallback workqueue). The
scatters split the particles into one chunk of consecutive particles per thread, each with
its own copy of the grid accumulator, summed in chunk order, so results are deterministic
for a given thread count and equal the serial ones to round-off. Serial is the default of
:class:`sim_mpm.MPMSimulator`; see its ``parallel`` option.

Intermediates (grid fields, per-chunk accumulators, per-particle scratch) live in buffers
per model, particle count and thread count, reused across calls: fresh multi-megabyte
arrays every substep cost more in page faults than the arithmetic, and looking each one up
cost more than the kernels of a small scene. Returned arrays are always new, so steps stay
pure, but one simulator must not be stepped from two threads at once.
"""

from __future__ import annotations

import dataclasses
import weakref

import numba
import numpy as np

from ._grid_kernels import boundary_table, grid_pass, grid_pass_vjp
from ._particle_kernels import (
    grid_to_particles,
    grid_to_particles_vjp,
    particles_to_grid,
    particles_to_grid_vjp,
)
from .actuators import cable_forces, cable_forces_vjp
from .state import MPMState
from .step import StepConstants

__all__ = ["substep", "substep_vjp"]


class _Buffers:
    """Scratch arrays of one model for n particles and a chunk count (see module docstring).

    ``acc`` and ``g_acc`` are scatter targets that the grid passes zero again behind them;
    ``dirty`` names those a step left behind unfinished (an exception or KeyboardInterrupt
    between two kernels), which the next use clears.
    """

    def __init__(self, c: StepConstants, n: int, chunks: int, entries: int):
        d, nodes, dtype = c.dim, c.node_count, c.dtype
        self.bounds = (np.arange(chunks + 1, dtype=np.int64) * n) // chunks
        rows = n if d == 3 and c.material == "corotated" else 1
        self.rotation = np.empty((9, rows), dtype=dtype)
        self.material = np.empty((4, n), dtype=dtype)
        self.actuation = np.empty((d, n), dtype=dtype)
        self.saved = np.empty((1 + d + d * d, n), dtype=dtype)
        self.gathered = np.empty_like(self.saved)
        self.g_rows = np.empty((d * d + d, n), dtype=dtype)
        self.box = np.empty((chunks, 2, d), dtype=np.int64)
        # four lanes a node for the vector read-add-writes of the scatters (_particle_kernels
        # .add4): momentum and mass (2D: one lane spare), velocity cotangents (spare lanes)
        self.acc = np.zeros((chunks, nodes, 4), dtype=dtype)
        self.g_acc = np.zeros((chunks, nodes, 4), dtype=dtype)
        # four lanes a node, the lanes past d zero, for the vector row loads (row_sums)
        self.grid_v = np.zeros((nodes, 4), dtype=dtype)
        self.grid_v_free = np.empty((nodes, d), dtype=dtype)
        self.inv_m = np.empty(nodes, dtype=dtype)
        self.g_grid_v = np.empty((nodes, d), dtype=dtype)
        self.g_grid = np.zeros((nodes, 4), dtype=dtype)
        self.inputs = np.empty((entries, d), dtype=dtype)
        self.g_act = np.empty((chunks, c.n_stress + 1), dtype=dtype)
        self.no_cable_force = np.zeros((n, d), dtype=dtype)
        self.dirty: set[str] = set()

    def scatter_target(self, name: str) -> np.ndarray:
        """``acc`` or ``g_acc``, zero; call :meth:`settle` once its grid pass has run."""
        array = getattr(self, name)
        if name in self.dirty:
            array.fill(0)
        self.dirty.add(name)
        return array

    def settle(self, name: str) -> None:
        """Mark a scatter target zero again (its grid pass has cleared it)."""
        self.dirty.discard(name)


@dataclasses.dataclass(frozen=True)
class _Static:
    """What the kernels need of a model that never changes, in their layout, and the
    buffers per (particle count, chunk count)."""

    actuator_row: np.ndarray  # stress actuator + 1 per particle (0: none), (n,)
    actuator_axes: np.ndarray  # axis masks with a zero row first, (n_stress + 1, d)
    boundary: tuple  # entries by node (see boundary_table), then per entry normal, kind, μ
    consts: tuple  # Δx [m], K = 4/Δx² [1/m²], polar tolerance (squared), model dtype
    corotated: bool
    no_actuation: np.ndarray  # the actuator scale table without stress actuators, [0]
    buffers: dict


def _build_static(c: StepConstants) -> _Static:
    dtype = c.dtype
    layers = c.layers
    sizes = [int(layer.node_index.shape[0]) for layer in layers]
    if layers:
        node_index = np.concatenate([layer.node_index for layer in layers]).astype(np.int64)
        normal = np.concatenate([layer.normal for layer in layers]).astype(dtype)
    else:
        node_index = np.zeros(0, dtype=np.int64)
        normal = np.zeros((0, c.dim), dtype=dtype)
    entry_start, entries = boundary_table(
        node_index, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), c.node_count)
    axes = np.zeros((c.n_stress + 1, c.dim), dtype=dtype)
    axes[1:] = c.actuator_axes
    eps = np.finfo(dtype).eps
    return _Static(
        actuator_row=np.ascontiguousarray(c.actuator_index + 1, dtype=np.int64),
        actuator_axes=axes,
        boundary=(entries, entry_start, np.ascontiguousarray(normal),
                  np.repeat(np.array([layer.kind for layer in layers], dtype=np.int64), sizes),
                  np.repeat(np.array([layer.friction for layer in layers], dtype=dtype),
                            sizes)),
        consts=(dtype.type(c.dx), dtype.type(4.0 / c.dx**2), dtype.type((4 * eps) ** 2)),
        corotated=c.material == "corotated", no_actuation=np.zeros(1, dtype=dtype),
        buffers={})


_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _static(c: StepConstants) -> _Static:
    static = _STATIC.get(c)
    if static is None:
        static = _STATIC[c] = _build_static(c)
    return static


def _buffers(c: StepConstants, s: _Static, n: int, parallel: bool) -> _Buffers:
    chunks = numba.get_num_threads() if parallel else 1
    buffers = s.buffers.get((n, chunks))
    if buffers is None:
        buffers = s.buffers[n, chunks] = _Buffers(c, n, chunks, s.boundary[0].shape[0])
    return buffers


def _contiguous(*arrays) -> tuple:
    if all(a.flags.c_contiguous for a in arrays):
        return arrays
    return tuple(np.ascontiguousarray(a) for a in arrays)


def _to_grid(c: StepConstants, s: _Static, b: _Buffers, arrays: tuple, action, params: tuple,
             dt, parallel: bool):
    """Pass 1 (stresses and P2G) and pass 2 (grid update and boundaries) of the state
    ``arrays`` = (x, v, F, C) into the buffers; returns (act, consts, cable signals, box
    rows) for G2P and the adjoint, which also reads each particle's P2G inputs from
    ``b.saved``."""
    dtype = c.dtype
    x = arrays[0]
    action = np.asarray(action, dtype=dtype)
    if c.n_stress:
        scale = np.zeros(c.n_stress + 1, dtype=dtype)
        np.multiply(action[: c.n_stress], c.actuator_max_stress, out=scale[1:])
    else:
        scale = s.no_actuation
    act = (s.actuator_row, scale, s.actuator_axes)
    cable_signals = action[c.n_stress:]
    cable_f = (cable_forces(np, x, cable_signals, c.cables) if c.cables
               else b.no_cable_force)
    dx, K, tolerance = s.consts
    consts = (dtype.type(dt), dx, K, tolerance)
    acc = b.scatter_target("acc")
    particles_to_grid.pick(parallel)(
        *arrays, params, act, cable_f, consts, c.grid_resolution, s.corotated, c.exponent,
        b.rotation, b.material, b.actuation, b.saved, acc, b.box, b.bounds)
    rows = grid_pass.pick(parallel)(acc, b.box, c.strides, c.gravity, consts[0], b.grid_v,
                                    b.grid_v_free, b.inv_m, s.boundary, b.inputs)
    b.settle("acc")
    return act, consts, cable_signals, rows


def _params(params: dict) -> tuple:
    return (params["youngs_modulus"], params["poissons_ratio"], params["density"],
            params["volume"])


def substep(c: StepConstants, state: MPMState, action, params: dict, dt: float, *,
            parallel: bool = False) -> MPMState:
    """Same contract as :func:`sim_mpm.step.substep` (NumPy arrays); ``parallel`` selects
    the multithreaded builds."""
    arrays = _contiguous(state.particle_x, state.particle_v, state.particle_F, state.particle_C)
    s = _static(c)
    b = _buffers(c, s, arrays[0].shape[0], parallel)
    _, consts, _, _ = _to_grid(c, s, b, arrays, action, _params(params), dt, parallel)
    dt_t, dx, K, _ = consts
    new_x, new_v, new_C, new_F = grid_to_particles.pick(parallel)(
        arrays[0], arrays[2], b.grid_v, dx, c.grid_resolution, dt_t, K, b.bounds)
    return MPMState(new_x, new_v, new_F, new_C)


def substep_vjp(c: StepConstants, state: MPMState, action, params: dict, dt: float,
                g_next: MPMState, *, parallel: bool = False):
    """Same contract as :func:`sim_mpm.step.substep_vjp` (NumPy arrays)."""
    arrays = _contiguous(state.particle_x, state.particle_v, state.particle_F, state.particle_C)
    g_arrays = _contiguous(g_next.particle_x, g_next.particle_v, g_next.particle_F,
                           g_next.particle_C)
    s = _static(c)
    x = arrays[0]
    b = _buffers(c, s, x.shape[0], parallel)
    params = _params(params)
    act, consts, cable_signals, rows = _to_grid(c, s, b, arrays, action, params, dt,
                                                parallel)
    dt_t, dx, K, _ = consts
    res = c.grid_resolution
    g_acc = b.scatter_target("g_acc")
    g_x, g_F = grid_to_particles_vjp.pick(parallel)(x, arrays[2], b.grid_v, g_arrays, dx, res,
                                                    dt_t, K, g_acc, b.bounds)
    grid_pass_vjp.pick(parallel)(g_acc, b.grid_v_free, b.inv_m, s.boundary, b.inputs, rows,
                                 b.g_grid_v, b.g_grid)
    b.settle("g_acc")
    g_v, g_C, g_E, g_nu, g_rho, g_V, g_momentum = particles_to_grid_vjp.pick(parallel)(
        *arrays, params, act, consts, res, s.corotated, c.exponent, b.rotation, b.material,
        b.actuation, b.saved, b.g_grid, g_x, g_F, b.g_act, b.gathered, b.g_rows, b.bounds)
    g_stress = (b.g_act.sum(axis=0)[1:] * c.actuator_max_stress if c.n_stress
                else np.zeros(0, dtype=c.dtype))
    if c.cables:
        g_x_cable, g_cable = cable_forces_vjp(np, x, cable_signals, c.cables,
                                              dt_t * g_momentum)
        g_x += g_x_cable
        g_action = np.concatenate([g_stress, g_cable]).astype(c.dtype)
    else:
        g_action = g_stress.astype(c.dtype)
    g_params = {"youngs_modulus": g_E, "poissons_ratio": g_nu, "density": g_rho,
                "volume": g_V}
    return MPMState(g_x, g_v, g_F, g_C), g_action, g_params
