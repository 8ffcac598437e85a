"""Time-step checks before a run and divergence detection during one.

Stability of explicit MPM needs the elastic wave to cross less than a cell per step,
Δt ≤ C_E Δx √(ρ/E), and particles to move less than a cell per step, Δt ≤ C_v Δx / |v|max.
A stress actuator stiffens the particles it acts on: its Kirchhoff stress F σ_a Fᵀ, with
|σ_a| ≤ σ_max for signals in [−1, 1], has a tangent modulus up to 2 σ_max, so the elastic
bound uses E + 2 σ_max there (cables are not counted).

:func:`check_time_step` runs before a rollout and :func:`check_state` after each of its
control steps (``codesign.Rollout`` does both through the simulator's methods); a loop
written by hand over ``MPMSimulator.step`` calls them itself (see the package README).
"""

from __future__ import annotations

import numpy as np

from codesign.backend import to_host
from codesign.simulator import SimulationError, UnstableTimeStepError

__all__ = ["ELASTIC_COURANT", "VELOCITY_COURANT", "actuator_stress", "largest_stable_dt",
           "check_time_step", "check_state"]

ELASTIC_COURANT = 0.5
"""C_E in Δt ≤ C_E Δx √(ρ/E)."""

VELOCITY_COURANT = 0.5
"""C_v in Δt ≤ C_v Δx / |v|max."""


def largest_stable_dt(*, dx: float, youngs_modulus, density, speed: float = 0.0,
                      actuator_stress=0.0, elastic_courant: float = ELASTIC_COURANT,
                      velocity_courant: float = VELOCITY_COURANT) -> float:
    """The largest safe Δt [s] for the stiffest, lightest particle and the largest speed.

    Args:
        dx: grid spacing [m].
        youngs_modulus, density: per particle [Pa], [kg/m^d], shape (n,) or scalars.
        speed: the largest particle speed [m/s].
        actuator_stress: the largest actuation stress σ_max [Pa] on each particle (0 where
            none acts), shape (n,) or a scalar; counted as a modulus of 2 σ_max.
    """
    return min(_elastic_dt(dx, youngs_modulus, density, actuator_stress, elastic_courant),
               velocity_courant * dx / speed if speed > 0 else np.inf)


def _elastic_dt(dx, youngs_modulus, density, actuator_stress, courant) -> float:
    """C_E Δx √(ρ / (E + 2 σ_max)) of the stiffest, lightest particle [s]."""
    E = np.asarray(youngs_modulus, dtype=np.float64)
    E, rho, sigma = np.broadcast_arrays(E, np.asarray(density, dtype=np.float64),
                                        np.abs(np.asarray(actuator_stress, dtype=np.float64)))
    return courant * dx * float(np.min(np.sqrt(rho / (E + 2.0 * sigma))))


def actuator_stress(model) -> np.ndarray:
    """The largest actuation stress σ_max [Pa] on each particle, 0 where no stress actuator
    acts, shape (n,)."""
    index = np.asarray(model.actuator_index)
    largest = np.abs(np.asarray(model.actuator_max_stress, dtype=np.float64))
    return np.where(index >= 0, largest[np.maximum(index, 0)] if largest.size else 0.0, 0.0)


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
    sigma = actuator_stress(model)
    elastic = _elastic_dt(model.dx, E, rho, sigma, elastic_courant)
    safe = largest_stable_dt(dx=model.dx, youngs_modulus=E, density=rho, speed=speed,
                             actuator_stress=sigma, elastic_courant=elastic_courant,
                             velocity_courant=velocity_courant)
    if dt > safe:
        stiffness = "E + 2 σ_max: the actuator stress stiffens" if sigma.any() else "E"
        raise UnstableTimeStepError(
            f"time step {dt:.3g} s is unstable for this MPM scene: the largest safe time step "
            f"is {safe:.3g} s (Δt ≤ {elastic_courant} Δx √(ρ/({stiffness})) = {elastic:.3g} s"
            + (f", Δt ≤ {velocity_courant} Δx / |v|max = "
               f"{velocity_courant * model.dx / speed:.3g} s" if speed > 0 else "")
            + "); lower dt (more substeps), soften or densify the material"
            + (" or lower the actuators' max_stress" if sigma.any() else ""))


def check_state(model, state, step_index: int) -> None:
    """Raise SimulationError naming the substep and the cause when particles left the grid
    or any particle field is NaN or inf. Leaving the grid is reported first, even when
    fields have turned NaN by the time of the check: it is the likelier cause.

    Args:
        model: the scene (grid size ``dx``, ``grid_resolution``).
        state: the :class:`~sim_mpm.state.MPMState` to check.
        step_index: substeps run so far, named in the message. ``codesign.Rollout`` checks at
            the end of every control step, so the state diverged at that substep or within
            the control step before it; a loop of your own can check after every substep.
    """
    x = to_host(state.particle_x)
    cell = x / model.dx
    # NaN compares false: a NaN position is reported below, as NaN
    outside = np.any((cell < 0.5) | (cell >= model.grid_resolution - 1.5), axis=1)
    if outside.any():
        first = int(np.flatnonzero(outside)[0])
        raise SimulationError(
            f"by substep {step_index}: {int(outside.sum())} particle(s) left the grid (first: "
            f"particle {first} at {x[first]}); the domain is [0, {model.domain_size:g}] m with a "
            "1.5-cell margin: add walls, enlarge the grid, lower dt, or lower the actuation "
            "(max_stress, cable stiffness) if the actuators throw the body")
    for name in ("particle_x", "particle_v", "particle_F", "particle_C"):
        array = to_host(getattr(state, name))
        finite = np.isfinite(array)
        if not finite.all():
            bad = np.flatnonzero(~finite.reshape(array.shape[0], -1).all(axis=1))
            raise SimulationError(
                f"by substep {step_index}: {name} of {bad.size} particle(s) is NaN or inf "
                f"(first: particle {bad[0]}); the simulation diverged: lower dt, soften the "
                "material, or lower the actuation (max_stress, cable stiffness, the "
                "controller's action bounds)")
