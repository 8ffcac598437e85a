"""Time-step checks before a run and divergence detection during one.

Stability of explicit MPM needs the elastic wave to cross less than a cell per step,
Δt ≤ C_E Δx √(ρ/E), and particles to move less than a cell per step, Δt ≤ C_v Δx / |v|max.
"""

from __future__ import annotations

import numpy as np

from codesign.backend import to_host
from codesign.simulator import SimulationError, UnstableTimeStepError

__all__ = ["ELASTIC_COURANT", "VELOCITY_COURANT", "largest_stable_dt", "check_time_step",
           "check_state"]

ELASTIC_COURANT = 0.5
"""C_E in Δt ≤ C_E Δx √(ρ/E)."""

VELOCITY_COURANT = 0.5
"""C_v in Δt ≤ C_v Δx / |v|max."""


def largest_stable_dt(*, dx: float, youngs_modulus, density, speed: float = 0.0,
                      elastic_courant: float = ELASTIC_COURANT,
                      velocity_courant: float = VELOCITY_COURANT) -> float:
    """The largest safe Δt [s] for the stiffest, lightest particle and the largest speed."""
    E = np.asarray(youngs_modulus, dtype=np.float64)
    rho = np.broadcast_to(np.asarray(density, dtype=np.float64), E.shape)
    elastic = elastic_courant * dx * float(np.min(np.sqrt(rho / E)))
    if speed > 0:
        return min(elastic, velocity_courant * dx / speed)
    return elastic


def check_time_step(model, params: dict, particle_v, dt: float, *,
                    elastic_courant: float = ELASTIC_COURANT,
                    velocity_courant: float = VELOCITY_COURANT) -> None:
    """Raise UnstableTimeStepError naming the largest safe Δt when ``dt`` exceeds it.

    Args:
        model: the scene (grid spacing ``dx``).
        params: per-particle ``youngs_modulus`` [Pa] and ``density`` [kg/m^d], shape (n,)
            (:meth:`~sim_mpm.MPMSimulator.particle_parameters`).
        particle_v: initial particle velocities [m/s], shape (n, d), for the speed bound.
        dt: the substep [s].
    """
    if not (np.isfinite(dt) and dt > 0):
        raise UnstableTimeStepError(f"time step must be a positive number of seconds, got {dt}")
    E, rho = np.asarray(params["youngs_modulus"]), np.asarray(params["density"])
    if np.any(E <= 0) or np.any(rho <= 0):
        raise UnstableTimeStepError("Young's modulus and density must be > 0 for a stable step")
    speed = float(np.max(np.linalg.norm(to_host(particle_v), axis=1)))
    safe = largest_stable_dt(dx=model.dx, youngs_modulus=E, density=rho, speed=speed,
                             elastic_courant=elastic_courant, velocity_courant=velocity_courant)
    if dt > safe:
        raise UnstableTimeStepError(
            f"time step {dt:.3g} s is unstable for this MPM scene: the largest safe time step "
            f"is {safe:.3g} s (Δt ≤ {elastic_courant} Δx √(ρ/E) = "
            f"{elastic_courant * model.dx * float(np.min(np.sqrt(rho / E))):.3g} s"
            + (f", Δt ≤ {velocity_courant} Δx / |v|max = "
               f"{velocity_courant * model.dx / speed:.3g} s" if speed > 0 else "")
            + "); lower dt (more substeps) or soften/densify the material")


def check_state(model, state, step_index: int) -> None:
    """Raise SimulationError naming the step and cause on NaN/inf or escaped particles."""
    for name in ("particle_x", "particle_v", "particle_F", "particle_C"):
        array = to_host(getattr(state, name))
        finite = np.isfinite(array)
        if not finite.all():
            bad = np.flatnonzero(~finite.reshape(array.shape[0], -1).all(axis=1))
            raise SimulationError(
                f"step {step_index}: {name} of {bad.size} particle(s) is NaN or inf (first: "
                f"particle {bad[0]}); the simulation diverged, lower dt or soften the material")
    cell = to_host(state.particle_x) / model.dx
    outside = np.any((cell < 0.5) | (cell >= model.grid_resolution - 1.5), axis=1)
    if outside.any():
        first = int(np.flatnonzero(outside)[0])
        raise SimulationError(
            f"step {step_index}: {int(outside.sum())} particle(s) left the grid (first: particle "
            f"{first} at {to_host(state.particle_x)[first]}); the domain is [0, "
            f"{model.domain_size:g}] m with a 1.5-cell margin: add walls, enlarge the grid or "
            "lower dt")
