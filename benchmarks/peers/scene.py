"""The benchmark scene every implementation runs: one elastic block (2D) or cube (3D).

Fixed-corotated material (E = 10 Pa, ν = 0.2, ρ = 1), particles on a lattice of spacing
Δx/2 (volume (Δx/2)^d), gravity −9.8 m/s² along y, sticky box walls three cells thick,
Δt = 1e-3 s. The block spins (ω = 2 rad/s about its center) and drifts right (0.5 m/s), so
the elastic stress is not trivially zero. MLS-MPM as in ChainQueen: quadratic B-splines,
APIC, K = 4/Δx², τ = P Fᵀ, F ← (I + Δt C) F after G2P.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["BenchmarkScene", "block_scene", "SCENES", "MASS_FLOOR"]

MASS_FLOOR = 1e-15
"""[kg] Grid nodes lighter than this get no velocity in the float32 peers: the autodiff of
v = (mv)/m divides by m², which underflows to zero for the 1e-23 kg a node at the far edge of
a stencil can receive and turns the adjoint into inf. The particles never feel such nodes
(their weights are below 1e-8), so trajectories are unchanged."""


@dataclasses.dataclass(frozen=True)
class BenchmarkScene:
    """Everything a peer needs to build the identical scene (float64 NumPy arrays)."""

    name: str
    dim: int
    grid_resolution: int
    dx: float
    dt: float
    gravity: np.ndarray
    youngs_modulus: float
    poissons_ratio: float
    density: float
    volume: float
    wall_margin: int
    particle_x: np.ndarray
    particle_v: np.ndarray

    @property
    def particle_count(self) -> int:
        """Number of particles."""
        return len(self.particle_x)

    @property
    def lame(self) -> tuple[float, float]:
        """(μ, λ) [Pa]."""
        E, nu = self.youngs_modulus, self.poissons_ratio
        return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))


def block_scene(name: str, *, dim: int, per_axis: int, grid_resolution: int) -> BenchmarkScene:
    """A block of ``per_axis``^dim particles with its lower corner at 0.3 m on every axis."""
    dx = 1.0 / grid_resolution
    spacing = 0.5 * dx
    axes = [0.3 + (np.arange(per_axis) + 0.5) * spacing] * dim
    x = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, dim)
    center = x.mean(axis=0)
    v = np.zeros_like(x)
    v[:, 0] = 0.5 - 2.0 * (x[:, 1] - center[1])
    v[:, 1] = 2.0 * (x[:, 0] - center[0])
    gravity = np.zeros(dim)
    gravity[1] = -9.8
    return BenchmarkScene(name=name, dim=dim, grid_resolution=grid_resolution, dx=dx, dt=1e-3,
                          gravity=gravity, youngs_modulus=10.0, poissons_ratio=0.2, density=1.0,
                          volume=spacing**dim, wall_margin=3, particle_x=x, particle_v=v)


SCENES = {
    "2d_6400": lambda: block_scene("2D block, 6,400 particles, 128² grid", dim=2, per_axis=80,
                                   grid_resolution=128),
    "3d_8000": lambda: block_scene("3D cube, 8,000 particles, 64³ grid", dim=3, per_axis=20,
                                   grid_resolution=64),
    "3d_64000": lambda: block_scene("3D cube, 64,000 particles, 64³ grid", dim=3, per_axis=40,
                                    grid_resolution=64),
}


def build_sim_mpm(scene: BenchmarkScene, dtype: str, *, parallel: bool = False):
    """The scene as an ``MPMSimulator`` (numba kernels; multithreaded if ``parallel``) and
    its default design."""
    from sim_mpm import BoxWalls, MPMSimulator, build_model

    model = build_model(
        particle_x=scene.particle_x, particle_v=scene.particle_v, dim=scene.dim,
        grid_resolution=scene.grid_resolution, dx=scene.dx, gravity=scene.gravity,
        youngs_modulus=scene.youngs_modulus, poissons_ratio=scene.poissons_ratio,
        density=scene.density, volume=scene.volume, material="corotated",
        boundaries=(BoxWalls(kind="sticky", margin=scene.wall_margin),), dtype=dtype)
    simulator = MPMSimulator(model, kernels="numba", parallel=parallel)
    return simulator, simulator.design_space().defaults()
