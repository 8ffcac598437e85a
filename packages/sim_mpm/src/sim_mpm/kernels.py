"""numba CPU kernels for the MLS-MPM substep and its adjoint, equal to :mod:`.step`.

One substep is four compiled passes:

1. particles → grid (:mod:`._particle_kernels`): per particle the Kirchhoff stress with
   actuation, mass, momentum and affine momentum, scattered to the grid; in 3D corotated a
   vectorized pass first finds every particle's polar rotation;
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

Intermediates (grid fields, per-chunk accumulators, per-particle scratch) live in a
workspace per model, reused across calls: fresh multi-megabyte arrays every substep cost
more in page faults than the arithmetic. Returned arrays are always new, so steps stay
pure, but one simulator must not be stepped from two threads at once.
"""

from __future__ import annotations

import dataclasses
import weakref

import numba
import numpy as np

from ._grid_kernels import (
    box_rows,
    grid_update,
    grid_update_vjp,
    project,
    project_vjp,
    sum_chunks,
)
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


class _Workspace:
    """Grid-sized and per-particle scratch arrays reused across calls.

    Results returned to callers are always fresh arrays; only intermediates live here, so a
    simulator must not be stepped from two threads at once.
    """

    def __init__(self):
        self._arrays: dict[str, np.ndarray] = {}
        self._dirty: set[str] = set()

    def get(self, name: str, shape: tuple, dtype) -> np.ndarray:
        """A scratch array of this shape and dtype (contents undefined)."""
        array = self._arrays.get(name)
        if array is None or array.shape != shape or array.dtype != dtype:
            array = np.empty(shape, dtype=dtype)
            self._arrays[name] = array
        return array

    def zeros(self, name: str, shape: tuple, dtype) -> np.ndarray:
        """A zero array that no kernel writes to (allocated once)."""
        array = self._arrays.get(name)
        if array is None or array.shape != shape or array.dtype != dtype:
            array = self._arrays[name] = np.zeros(shape, dtype=dtype)
        return array

    def accumulator(self, name: str, shape: tuple, dtype) -> np.ndarray:
        """A zero array for a scatter whose consumer zeroes it again (then call ``settle``).

        One left dirty by an interrupted step (KeyboardInterrupt between the two kernels) is
        cleared here, so a later step never adds to stale sums.
        """
        array = self._arrays.get(name)
        if array is None or array.shape != shape or array.dtype != dtype:
            array = np.zeros(shape, dtype=dtype)
            self._arrays[name] = array
        elif name in self._dirty:
            array.fill(0)
        self._dirty.add(name)
        return array

    def settle(self, *names: str) -> None:
        """Mark accumulators as zero again (their consumer kernel has cleared them)."""
        self._dirty.difference_update(names)


@dataclasses.dataclass(frozen=True)
class _Static:
    """What the kernels need of a model that never changes, in their layout."""

    actuator_row: np.ndarray  # stress actuator + 1 per particle (0: none), (n,)
    actuator_axes: np.ndarray  # axis masks with a zero row first, (n_stress + 1, d)
    node_index: np.ndarray  # boundary layers: node of each entry
    node_cell: np.ndarray  # ... its cell (entries, d)
    normal: np.ndarray  # ... its outward normal (entries, d)
    layer_start: np.ndarray  # first entry of each layer, (layers + 1,)
    kinds: np.ndarray  # projection kind per layer
    frictions: np.ndarray  # Coulomb μ per layer
    consts: tuple  # Δx [m], K = 4/Δx² [1/m²], polar tolerance (squared), model dtype
    workspace: _Workspace


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
    node_cell = np.ascontiguousarray(
        np.stack(np.unravel_index(node_index, (c.grid_resolution,) * c.dim), axis=1),
        dtype=np.int64).reshape(-1, c.dim)
    axes = np.zeros((c.n_stress + 1, c.dim), dtype=dtype)
    axes[1:] = c.actuator_axes
    eps = np.finfo(dtype).eps
    return _Static(
        actuator_row=np.ascontiguousarray(c.actuator_index + 1, dtype=np.int64),
        actuator_axes=axes, node_index=node_index, node_cell=node_cell,
        normal=np.ascontiguousarray(normal),
        layer_start=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        kinds=np.array([layer.kind for layer in layers], dtype=np.int64),
        frictions=np.array([layer.friction for layer in layers], dtype=dtype),
        consts=(dtype.type(c.dx), dtype.type(4.0 / c.dx**2), dtype.type((4 * eps) ** 2)),
        workspace=_Workspace())


_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _static(c: StepConstants) -> _Static:
    static = _STATIC.get(c)
    if static is None:
        static = _STATIC[c] = _build_static(c)
    return static


def _chunk_bounds(n: int, chunks: int) -> np.ndarray:
    """First particle of each of ``chunks`` near-equal chunks, then n; shape (chunks + 1,)."""
    return (np.arange(chunks + 1, dtype=np.int64) * n) // chunks


def _contiguous(state: MPMState) -> MPMState:
    return MPMState(*(np.ascontiguousarray(a) for a in (
        state.particle_x, state.particle_v, state.particle_F, state.particle_C)))


def _layer_args(s: _Static) -> tuple:
    return s.node_index, s.node_cell, s.normal, s.layer_start, s.kinds, s.frictions


def _to_grid(c: StepConstants, state: MPMState, action, params: dict, dt: float,
             parallel: bool, *, keep: bool) -> dict:
    """Pass 1 (stresses and P2G) and pass 2 (grid update and boundaries); returns what G2P
    and the adjoint read (grid arrays live in the workspace until the next call); ``keep``
    keeps each particle's P2G inputs for the adjoint."""
    s = _static(c)
    ws = s.workspace
    dtype = c.dtype
    x = state.particle_x
    n, d = x.shape
    nodes = c.node_count
    chunks = numba.get_num_threads() if parallel else 1
    bounds = _chunk_bounds(n, chunks)
    action = np.asarray(action, dtype=dtype)
    stress_signals, cable_signals = action[: c.n_stress], action[c.n_stress:]
    scale = np.concatenate([np.zeros(1, dtype=dtype), stress_signals * c.actuator_max_stress])
    act = (s.actuator_row, scale.astype(dtype), s.actuator_axes)
    if c.cables:
        cable_f = cable_forces(np, x, cable_signals, c.cables)
    else:
        cable_f = ws.zeros("no_cable_force", (n, d), dtype)
    dx, K, tolerance = s.consts
    consts = (dtype.type(dt), dx, K, tolerance)
    corotated = c.material == "corotated"
    rotation = ws.get("rotation", (9, n if d == 3 and corotated else 1), dtype)
    saved = ws.get("saved" if keep else "not_saved", (n if keep else 0, 1 + d + d * d), dtype)
    box = ws.get("box", (chunks, 2, d), np.int64)
    acc = ws.accumulator("acc", (chunks, nodes, d + 1), dtype)
    params = (params["youngs_modulus"], params["poissons_ratio"], params["density"],
              params["volume"])
    particles_to_grid.pick(parallel)(
        x, state.particle_v, state.particle_F, state.particle_C, params, act, cable_f, consts,
        c.grid_resolution, corotated, c.exponent, rotation, saved, acc, box, bounds)
    row_start, row_length, lo, hi = box_rows(box, c.strides)
    grid_v, grid_v_free = ws.get("grid_v", (nodes, d), dtype), ws.get("grid_v_free", (nodes, d),
                                                                      dtype)
    inv_m = ws.get("inv_m", (nodes,), dtype)
    grid_update.pick(parallel)(acc, c.gravity, consts[0], grid_v, grid_v_free, inv_m,
                                    row_start, row_length)
    ws.settle("acc")
    inputs = ws.get("inputs", (s.node_index.shape[0], d), dtype)
    project.pick(parallel)(grid_v, *_layer_args(s), inputs, lo, hi)
    return dict(params=params, act=act, consts=consts, corotated=corotated, rotation=rotation,
                saved=saved, bounds=bounds, chunks=chunks, cable_signals=cable_signals,
                grid_v=grid_v, grid_v_free=grid_v_free, inv_m=inv_m, inputs=inputs, lo=lo,
                hi=hi, row_start=row_start, row_length=row_length)


def substep(c: StepConstants, state: MPMState, action, params: dict, dt: float, *,
            parallel: bool = False) -> MPMState:
    """Same contract as :func:`sim_mpm.step.substep` (NumPy arrays); ``parallel`` selects
    the multithreaded builds."""
    state = _contiguous(state)
    g = _to_grid(c, state, action, params, dt, parallel, keep=False)
    dx, K, _ = _static(c).consts
    new_x, new_v, new_C, new_F = grid_to_particles.pick(parallel)(
        state.particle_x, state.particle_F, g["grid_v"], dx, c.grid_resolution, g["consts"][0],
        K, g["bounds"])
    return MPMState(new_x, new_v, new_F, new_C)


def substep_vjp(c: StepConstants, state: MPMState, action, params: dict, dt: float,
                g_next: MPMState, *, parallel: bool = False):
    """Same contract as :func:`sim_mpm.step.substep_vjp` (NumPy arrays)."""
    state = _contiguous(state)
    g_next = _contiguous(g_next)
    g = _to_grid(c, state, action, params, dt, parallel, keep=True)
    s = _static(c)
    ws = s.workspace
    dtype = c.dtype
    x = state.particle_x
    n, d = x.shape
    nodes = c.node_count
    dt_t, dx, K, _ = g["consts"]
    res = c.grid_resolution
    g_acc = ws.accumulator("g_acc", (g["chunks"], nodes, d), dtype)
    g_x, g_F = grid_to_particles_vjp.pick(parallel)(
        x, state.particle_F, g["grid_v"], (g_next.particle_x, g_next.particle_v,
                                           g_next.particle_F, g_next.particle_C),
        dx, res, dt_t, K, g_acc, g["bounds"])
    g_grid_v = ws.get("g_grid_v", (nodes, d), dtype)
    sum_chunks.pick(parallel)(g_acc, g_grid_v, g["row_start"], g["row_length"])
    ws.settle("g_acc")
    project_vjp.pick(parallel)(g_grid_v, *_layer_args(s), g["inputs"], g["lo"],
                                          g["hi"])
    g_grid = ws.get("g_grid", (nodes, d + 1), dtype)
    grid_update_vjp.pick(parallel)(g_grid_v, g["grid_v_free"], g["inv_m"], g_grid,
                                             g["row_start"], g["row_length"])
    g_act = ws.get("g_act", (g["chunks"], c.n_stress + 1), dtype)
    g_v, g_C, g_E, g_nu, g_rho, g_V, g_momentum = particles_to_grid_vjp.pick(parallel)(
        x, state.particle_v, state.particle_F, state.particle_C, g["params"], g["act"],
        g["consts"], res, g["corotated"], c.exponent, g["rotation"], g["saved"], g_grid, g_x,
        g_F, g_act, ws.get("gathered", g["saved"].shape, dtype), g["bounds"])
    g_stress = g_act.sum(axis=0)[1:] * c.actuator_max_stress
    if c.cables:
        g_x_cable, g_cable = cable_forces_vjp(np, x, g["cable_signals"], c.cables,
                                              dt_t * g_momentum)
        g_x += g_x_cable
    else:
        g_cable = np.zeros(0, dtype=dtype)
    g_params = {"youngs_modulus": g_E, "poissons_ratio": g_nu, "density": g_rho,
                "volume": g_V}
    return (MPMState(g_x, g_v, g_F, g_C), np.concatenate([g_stress, g_cable]).astype(dtype),
            g_params)
