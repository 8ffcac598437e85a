"""Static description of an MLS-MPM scene: grid, particles, materials, actuators, boundaries."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from .actuators import CableActuator
from .boundaries import BoundaryLayer, BoxWalls, HeightField, Plane, compile_boundaries
from .options import MPMOptions

__all__ = ["ModelError", "MPMModel", "build_model"]

_DEFAULT = MPMOptions()
"""The declared default of every option, the defaults of the builders below."""


class ModelError(ValueError):
    """A scene description is invalid; the message names the field and how to fix it."""


@dataclasses.dataclass(frozen=True, eq=False)
class MPMModel:
    """Everything about a scene that does not change during a rollout.

    The domain is the cube [0, grid_resolution·dx]^dim; grid node i sits at i·dx. Particle
    arrays are float64 NumPy here; the simulator casts them to ``dtype``.

    Attributes:
        dim: 2 or 3.
        grid_resolution: cells per axis.
        dx: cell size [m].
        gravity: gravitational acceleration [m/s²], shape (dim,).
        particle_rest_x: rest (initial) positions [m], shape (n, dim).
        particle_rest_v: initial velocities [m/s], shape (n, dim).
        particle_group: body/part index per particle (observers, rendering), shape (n,).
        youngs_modulus: default E [Pa], shape (n,).
        poissons_ratio: default ν [-], shape (n,).
        density: default ρ [kg/m^dim], shape (n,).
        volume: default particle volume [m^dim], shape (n,); mass = density · volume.
        material: "corotated" or "neo_hookean".
        incompressibility_exponent: p ≥ 2 of the incompressibility term, 0 = off.
        actuator_index: stress actuator of each particle, −1 for none, shape (n,).
        actuator_axes: axis mask of each stress actuator, shape (n_stress, dim).
        actuator_max_stress: maximum actuation stress [Pa], shape (n_stress,).
        cables: cable actuators.
        boundaries: boundary objects (BoxWalls, Plane, HeightField), applied in order.
        dtype: float64 or float32, the dtype of states and computation.
        particle_geometry_group: geometry group of each particle, shape (n,).
        geometry_anchor: fixed point of each group's scaling [m], shape (n_groups, dim).
        boundary_layers: the boundaries compiled onto grid nodes.
    """

    dim: int
    grid_resolution: int
    dx: float
    gravity: np.ndarray
    particle_rest_x: np.ndarray
    particle_rest_v: np.ndarray
    particle_group: np.ndarray
    youngs_modulus: np.ndarray
    poissons_ratio: np.ndarray
    density: np.ndarray
    volume: np.ndarray
    material: str
    incompressibility_exponent: int
    actuator_index: np.ndarray
    actuator_axes: np.ndarray
    actuator_max_stress: np.ndarray
    cables: tuple[CableActuator, ...]
    boundaries: tuple[Any, ...]
    dtype: np.dtype
    particle_geometry_group: np.ndarray
    geometry_anchor: np.ndarray
    boundary_layers: tuple[BoundaryLayer, ...]

    @property
    def particle_count(self) -> int:
        """Number of particles n."""
        return int(self.particle_rest_x.shape[0])

    @property
    def stress_actuator_count(self) -> int:
        """Number of stress actuators."""
        return int(self.actuator_axes.shape[0])

    @property
    def cable_count(self) -> int:
        """Number of cable actuators."""
        return len(self.cables)

    @property
    def action_size(self) -> int:
        """Stress signals followed by cable signals."""
        return self.stress_actuator_count + self.cable_count

    @property
    def geometry_group_count(self) -> int:
        """Number of geometry groups (rows of ``geometry.scale``)."""
        return int(self.geometry_anchor.shape[0])

    @property
    def domain_size(self) -> float:
        """Edge length of the simulation cube [m]."""
        return self.grid_resolution * self.dx


def _declared(name: str, value):
    """``value``, checked against the choices or physical bounds :class:`MPMOptions`
    declares for option ``name`` (the one place they are written)."""
    problem = MPMOptions.spec(name).problem(value)
    if problem is not None:
        raise ModelError(f"{name}: {problem}")
    return value


def _per_particle(value, n: int, name: str) -> np.ndarray:
    """``value`` spread to one float per particle, shape (n,); finite and > 0, and within
    the declared bounds when ``name`` is an option of :class:`MPMOptions`."""
    try:
        array = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)).copy()
    except ValueError:
        raise ModelError(f"{name} must be a scalar or have one entry per particle ({n}), got "
                         f"shape {np.shape(value)}") from None
    if not (np.all(np.isfinite(array)) and np.all(array > 0)):
        raise ModelError(f"{name} must be finite and > 0")
    if name in MPMOptions.__dataclass_fields__:
        _declared(name, [float(array.min()), float(array.max())])
    return array


def _index_array(value, n: int, name: str, *, default: int) -> np.ndarray:
    if value is None:
        return np.full(n, default, dtype=np.int64)
    array = np.asarray(value)
    if array.shape != (n,) or not np.issubdtype(array.dtype, np.integer):
        raise ModelError(f"{name} must be an integer array of shape ({n},), got "
                         f"{array.dtype} {array.shape}")
    return array.astype(np.int64)


def build_model(
    *,
    particle_x,
    dim: int,
    grid_resolution: int,
    dx: float,
    particle_v=None,
    particle_group=None,
    gravity=None,
    youngs_modulus=_DEFAULT.youngs_modulus,
    poissons_ratio=_DEFAULT.poissons_ratio,
    density=_DEFAULT.density,
    volume=None,
    material: str = _DEFAULT.material,
    incompressibility_exponent: int = _DEFAULT.incompressibility_exponent,
    actuator_index=None,
    actuator_axes=None,
    actuator_max_stress=None,
    cables: Sequence[dict | CableActuator] = (),
    boundaries: Sequence[Any] = (BoxWalls(),),
    dtype=_DEFAULT.dtype,
    geometry_group=None,
    geometry_anchor=None,
) -> MPMModel:
    """Validate a scene description and return an :class:`MPMModel`.

    Args:
        particle_x: rest positions [m], shape (n, dim), inside the grid with a 2-cell margin.
        dim: 2 or 3.
        grid_resolution: cells per axis (≥ 4).
        dx: cell size [m].
        particle_v: initial velocities [m/s], shape (n, dim); default zero.
        particle_group: body index per particle, shape (n,); default 0.
        gravity: [m/s²], shape (dim,); default −9.8 along axis 1 (y up).
        youngs_modulus, poissons_ratio, density: E [Pa], ν, ρ [kg/m^dim], scalar or shape (n,);
            the defaults are the options' (:class:`~sim_mpm.options.MPMOptions`).
        volume: particle volume [m^dim]; default (dx/2)^dim (four particles per 2D cell).
        material: "corotated" or "neo_hookean".
        incompressibility_exponent: integer p ≥ 2, or 0 for none.
        actuator_index: stress actuator per particle (−1 none), shape (n,).
        actuator_axes: axis mask per stress actuator, shape (n_stress, dim); default all ones
            (isotropic).
        actuator_max_stress: maximum actuation stress [Pa] per actuator, shape (n_stress,).
        cables: CableActuator or dicts with ``route`` (particle indices), ``stiffness`` [N/m],
            ``max_contraction`` [m] and optional ``rest_length`` [m] (default: route length).
        boundaries: BoxWalls / Plane / HeightField objects, applied in order.
        dtype: "float64" or "float32".
        geometry_group: geometry group per particle, shape (n,); default all 0.
        geometry_anchor: fixed point of each group's scaling, shape (n_groups, dim); default
            each group's centroid.
    """
    _declared("dim", dim)
    if int(grid_resolution) < 4:
        raise ModelError(f"grid_resolution must be ≥ 4 cells, got {grid_resolution}")
    if not (np.isfinite(dx) and dx > 0):
        raise ModelError(f"dx must be a positive cell size in metres, got {dx}")
    x = np.asarray(particle_x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != dim or x.shape[0] == 0:
        raise ModelError(f"particle_x must have shape (n, {dim}) with n ≥ 1, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ModelError("particle_x contains NaN or inf")
    n = x.shape[0]
    cell = x / dx
    if np.any(cell < 0.5) or np.any(cell >= grid_resolution - 1.5):
        raise ModelError(
            f"particles must lie in [{0.5 * dx:g}, {(grid_resolution - 1.5) * dx:g}) m on every "
            "axis (the quadratic stencil needs a node either side); move the body or enlarge "
            "grid_resolution")
    v = np.zeros_like(x) if particle_v is None else np.asarray(particle_v, dtype=np.float64)
    if v.shape != x.shape or not np.all(np.isfinite(v)):
        raise ModelError(f"particle_v must be finite with shape {x.shape}")
    g = np.zeros(dim) if gravity is None else np.asarray(gravity, dtype=np.float64)
    if gravity is None:
        g[1] = -9.8
    if g.shape != (dim,) or not np.all(np.isfinite(g)):
        raise ModelError(f"gravity must be {dim} finite numbers, got {gravity!r}")
    _declared("material", material)
    p = incompressibility_exponent
    if int(p) != p or (p != 0 and p < 2):
        raise ModelError(f"incompressibility_exponent must be an integer ≥ 2 or 0 (off), got {p}")
    stress_index = _index_array(actuator_index, n, "actuator_index", default=-1)
    n_stress = int(stress_index.max()) + 1 if stress_index.size else 0
    axes = (np.ones((n_stress, dim)) if actuator_axes is None
            else np.asarray(actuator_axes, dtype=np.float64).reshape(-1, dim))
    if axes.shape[0] != n_stress:
        raise ModelError(f"actuator_axes has {axes.shape[0]} rows but actuator_index names "
                         f"{n_stress} stress actuators")
    max_stress = (np.zeros(n_stress) if actuator_max_stress is None
                  else np.broadcast_to(np.asarray(actuator_max_stress, dtype=np.float64),
                                       (n_stress,)).copy())
    cable_list = []
    for i, cable in enumerate(cables):
        if isinstance(cable, dict):
            unknown = set(cable) - {"route", "stiffness", "max_contraction", "rest_length"}
            if unknown:
                raise ModelError(f"cable {i}: unknown key(s) {sorted(unknown)}")
            cable = CableActuator(route=cable["route"], stiffness=cable.get("stiffness", 1.0),
                                  max_contraction=cable.get("max_contraction", 0.0),
                                  rest_length=cable.get("rest_length", -1.0))
        route = np.asarray(cable.route, dtype=np.int64).reshape(-1)
        if route.size < 2 or route.min() < 0 or route.max() >= n:
            raise ModelError(f"cable {i}: route needs ≥ 2 particle indices in [0, {n})")
        if np.any(np.linalg.norm(np.diff(x[route], axis=0), axis=1) == 0):
            raise ModelError(f"cable {i}: consecutive route particles coincide")
        rest = cable.rest_length
        if rest is None or rest < 0:
            rest = float(np.sum(np.linalg.norm(np.diff(x[route], axis=0), axis=1)))
        if cable.stiffness < 0 or cable.max_contraction < 0:
            raise ModelError(f"cable {i}: stiffness and max_contraction must be ≥ 0")
        cable_list.append(CableActuator(route, float(cable.stiffness),
                                        float(cable.max_contraction), float(rest)))
    for b in boundaries:
        if not isinstance(b, BoxWalls | Plane | HeightField):
            raise ModelError(f"unknown boundary {b!r}; use BoxWalls, Plane or HeightField")
    dtype = np.dtype(_declared("dtype", np.dtype(dtype).name))
    groups = _index_array(geometry_group, n, "geometry_group", default=0)
    if groups.min() < 0:
        raise ModelError("geometry_group entries must be ≥ 0")
    n_groups = int(groups.max()) + 1
    if geometry_anchor is None:
        anchor = np.stack([x[groups == k].mean(axis=0) if np.any(groups == k) else np.zeros(dim)
                           for k in range(n_groups)])
    else:
        anchor = np.asarray(geometry_anchor, dtype=np.float64).reshape(-1, dim)
        if anchor.shape[0] != n_groups:
            raise ModelError(f"geometry_anchor needs {n_groups} rows, got {anchor.shape[0]}")
    return MPMModel(
        dim=dim, grid_resolution=int(grid_resolution), dx=float(dx), gravity=g,
        particle_rest_x=x, particle_rest_v=v,
        particle_group=_index_array(particle_group, n, "particle_group", default=0),
        youngs_modulus=_per_particle(youngs_modulus, n, "youngs_modulus"),
        poissons_ratio=_per_particle(poissons_ratio, n, "poissons_ratio"),
        density=_per_particle(density, n, "density"),
        volume=_per_particle((0.5 * dx) ** dim if volume is None else volume, n, "volume"),
        material=material, incompressibility_exponent=int(p), actuator_index=stress_index,
        actuator_axes=axes, actuator_max_stress=max_stress, cables=tuple(cable_list),
        boundaries=tuple(boundaries), dtype=dtype, particle_geometry_group=groups,
        geometry_anchor=anchor,
        boundary_layers=compile_boundaries(boundaries, dim=dim,
                                           grid_resolution=int(grid_resolution), dx=float(dx)),
    )
