"""Small scenes and helpers shared by the sim_mpm tests (imported by relative path)."""

from __future__ import annotations

import numpy as np

from sim_mpm import BoxWalls, MPMSimulator, MPMState, build_model


def block_points(dim: int, lower, upper, spacing: float) -> np.ndarray:
    """A regular lattice of points in the box [lower, upper), shape (n, dim)."""
    axes = [np.arange(lo + 0.5 * spacing, hi, spacing) for lo, hi in zip(lower, upper, strict=True)]
    grid = np.meshgrid(*axes, indexing="ij")
    return np.stack([g.reshape(-1) for g in grid], axis=1)


def small_model(dim: int = 2, *, material: str = "corotated", exponent: int = 0,
                actuators: bool = True, cables: bool = False, boundaries=None,
                gravity=None, dtype="float64", resolution: int = 12, seed: int = 0,
                volume=None):
    """A block of a few dozen particles near the middle of a small grid.

    ``volume`` overrides the particle volume: the dynamics do not change when every volume
    is scaled (mass and stress impulse both scale with V), and volumes near 1 let
    finite-difference kits that use absolute steps check ∂L/∂V.
    """
    boundaries = (BoxWalls(),) if boundaries is None else boundaries
    dx = 1.0 / resolution
    lower = [0.35] * dim
    upper = [0.6] * dim
    upper[0] = 0.65
    x = block_points(dim, lower, upper, 0.5 * dx if dim == 2 else 0.75 * dx)
    rng = np.random.default_rng(seed)
    x = x + rng.uniform(-0.05, 0.05, x.shape) * dx
    n = x.shape[0]
    actuator_index = np.where(x[:, 0] < 0.5, 0, 1) if actuators else None
    axes = np.array([[1.0] * dim, [0.0] + [1.0] * (dim - 1)]) if actuators else None
    cable_list = []
    if cables:
        order = np.argsort(x[:, 1])
        left = order[np.isin(order, np.flatnonzero(x[:, 0] < 0.42))][::3][:4]
        cable_list = [dict(route=left, stiffness=40.0, max_contraction=0.02)]
    return build_model(
        particle_x=x, dim=dim, grid_resolution=resolution, dx=dx,
        gravity=gravity, youngs_modulus=rng.uniform(15, 25, n),
        poissons_ratio=rng.uniform(0.2, 0.35, n), density=rng.uniform(0.8, 1.2, n),
        volume=volume, material=material, incompressibility_exponent=exponent,
        actuator_index=actuator_index, actuator_axes=axes,
        actuator_max_stress=[3.0, 2.0] if actuators else None, cables=cable_list,
        boundaries=boundaries, dtype=dtype,
        geometry_group=(x[:, 1] > 0.48).astype(np.int64))


def contact_model(dim: int = 2, *, boundaries=None,
                  material: str = "corotated", resolution: int = 12, dtype="float64",
                  spacing: float = 0.5, cables: bool = True):
    """A block resting on the floor of a small grid (floor nodes: y < 3 Δx), two stress
    actuators and optionally a cable, so that every boundary projection is exercised."""
    if boundaries is None:
        boundaries = (BoxWalls(kind="friction", friction=0.3),)
    dx = 1.0 / resolution
    lower = [0.4] * dim
    upper = [0.6] * dim
    lower[1], upper[1] = 2.9 * dx, 2.9 * dx + 0.15
    x = block_points(dim, lower, upper, spacing * dx)
    rng = np.random.default_rng(3)
    x = x + rng.uniform(-0.05, 0.05, x.shape) * dx
    n = x.shape[0]
    cable_list = []
    if cables:
        order = np.argsort(x[:, 1])
        left = order[np.isin(order, np.flatnonzero(x[:, 0] < 0.4 + spacing * dx))][::2][:4]
        cable_list = [dict(route=left, stiffness=40.0, max_contraction=0.02)]
    return build_model(
        particle_x=x, dim=dim, grid_resolution=resolution, dx=dx,
        youngs_modulus=rng.uniform(15, 25, n), poissons_ratio=rng.uniform(0.2, 0.35, n),
        density=rng.uniform(0.8, 1.2, n), material=material,
        actuator_index=np.where(x[:, 0] < 0.5, 0, 1),
        actuator_axes=np.array([[1.0] * dim, [0.0] + [1.0] * (dim - 1)]),
        actuator_max_stress=[3.0, 2.0], cables=cable_list, boundaries=boundaries,
        dtype=dtype, particle_v=np.tile([0.3] + [-0.2] * (dim - 1), (n, 1)))


def perturbed_state(sim: MPMSimulator, *, seed: int = 1, scale: float = 1.0) -> MPMState:
    """The initial state with random velocities, F near identity and small affine C."""
    rng = np.random.default_rng(seed)
    s0 = sim.initial_state(sim.design_space().defaults())
    n, d = s0.particle_x.shape
    return MPMState(
        s0.particle_x,
        s0.particle_v + scale * rng.normal(0, 0.3, (n, d)),
        s0.particle_F + scale * rng.normal(0, 0.05, (n, d, d)),
        s0.particle_C + scale * rng.normal(0, 0.5, (n, d, d)),
    )
