"""The vine's safety checks: a start outside the obstacles, a stable time step before a run,
sane inputs every step and divergence detection during a run.

Explicit torsional springs and dampers at a pin between bodies of inertia I (stiffness K,
damping C) are stable for Δt ≤ 2/ω with ω² = 4 K/I and for Δt ≤ 2/(4 C/I); implicit ones
for any Δt. With masses and inertias that grow with the everted material the inertias are
those of the start pose (they only grow); a vine that everts springs a pin only once its
body is out, so its bodies count with their full length.
"""

from __future__ import annotations

import math

import numpy as np

from codesign.simulator import SimulationError, UnstableTimeStepError

from . import evert
from ._kernels import everted_length
from .constraints import joint_residual
from .everted_mass import everted_masses, gyration_squares, masses_grow
from .model import VineModel
from .state import VineState
from .step import StepParameters

__all__ = ["check_start", "check_time_step", "check_step_inputs", "check_state"]


def check_start(model: VineModel, body_q=None, *, what: str = "the vine") -> None:
    """Raise ValueError when a contact point of the start pose ``body_q`` (N, 3) (default:
    the model's ``initial_angles`` pose) is inside an obstacle, naming the point, the
    obstacle and the depth [m]; ``what`` names the pose in the message."""
    q = model.initial_configuration() if body_q is None else np.asarray(body_q)
    inside = model.penetrations(q)
    if inside:
        point, obstacle, depth = inside[0]
        raise ValueError(
            f"{what} starts inside an obstacle: contact point {point} is {-depth:.4g} m "
            f"inside obstacle {obstacle} ({type(model.obstacles[obstacle]).__name__}); "
            "move the base or the obstacle, or change initial_angles")


def check_time_step(model: VineModel, params: StepParameters, dt: float) -> None:
    """Raise UnstableTimeStepError naming the largest safe Δt [s] when ``dt`` exceeds it
    (explicit springs of the stiffest, most damped pin on the lightest body)."""
    if not (np.isfinite(dt) and dt > 0):
        raise UnstableTimeStepError(f"dt must be a positive number of seconds, got {dt!r}")
    if model.implicit_springs:
        return
    inertia = params.mass * model.gyration**2
    if masses_grow(model) and not model.evert:
        q = model.initial_configuration()
        inertia = everted_masses(model, params.mass, q) * gyration_squares(model, q)
    omega = np.sqrt(4.0 * np.max(params.stiffness) / np.min(inertia))
    rate = 4.0 * np.max(params.damping) / np.min(inertia)
    limit = min(2.0 / omega if omega > 0 else np.inf, 2.0 / rate if rate > 0 else np.inf)
    if dt > limit:
        raise UnstableTimeStepError(
            f"dt = {dt:g} s is unstable with explicit springs (stiffest joint ω ≈ "
            f"{omega:.3g} rad/s); use dt <= {limit:.3g} s or implicit_springs: true")


def check_step_inputs(model: VineModel, state: VineState, action, dt: float, *,
                      offset: float) -> float:
    """The growth rate [m/s] of a step: the action (shape (1,)) plus ``offset``; raise for
    a state of the wrong shape (ValueError) or holding NaN (SimulationError), a bad action,
    dt [s] or a negative growth rate (ValueError), growth beyond a vine's ``max_length``
    when it everts (SimulationError). Runs every step, so it stays cheap."""
    n = model.body_count
    for name in ("body_q", "body_qd"):
        value = np.asarray(getattr(state, name))
        if value.shape != (n, 3):
            raise ValueError(f"state.{name} must have shape ({n}, 3), got {value.shape}")
        # the method, not np.sum: this runs every step and np.sum's dispatch costs more
        if not math.isfinite(float(value.sum())):
            raise SimulationError(f"state.{name} holds NaN or inf; the simulation diverged")
    if np.shape(action) != (1,):
        raise ValueError(f"the action is the growth rate, shape (1,), got {np.shape(action)}")
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive number of seconds, got {dt!r}")
    rate = float(action[0]) + offset
    if not np.isfinite(rate):
        raise ValueError(f"the growth rate is not a number ({rate}); check the controller "
                         "output and growth.offset")
    if rate < 0:
        raise ValueError(f"the growth rate is negative ({rate:.4g} m/s): vine robots grow "
                         "by eversion and cannot shrink; bound the controller's output "
                         "at 0 or raise growth.offset")
    if model.evert:
        # compiled: the NumPy reference (evert.everted_length) was a third of a step's time
        grown = everted_length(np.asarray(state.body_q, dtype=np.float64),
                               model.half_length) + dt * rate
        if grown > model.body_length * (n - 1) * (1 + 1e-9):
            raise SimulationError(
                f"the vine has everted all its {n} bodies (max_length {model.max_length:g} m) "
                f"and cannot grow further at {rate:.4g} m/s; raise max_length and bodies")
    return rate


def check_state(model: VineModel, state: VineState, step_index: int, *,
                joint_tolerance: float, penetration_tolerance: float) -> None:
    """Raise SimulationError naming the step and cause for NaN/inf, joints broken by more
    than ``joint_tolerance`` [m] or a contact point deeper than ``penetration_tolerance``
    [m] inside an obstacle."""
    q = np.asarray(state.body_q)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(state.body_qd))):
        raise SimulationError(f"step {step_index}: the vine state holds NaN or inf")
    residual = evert.joint_residual(model, q) if model.evert else joint_residual(model, q)
    error = float(np.max(np.abs(residual), initial=0.0))
    if error > joint_tolerance:
        raise SimulationError(
            f"step {step_index}: joint constraints are violated by {error:.3g} m "
            f"(> {joint_tolerance:g} m); reduce dt or tighten the solver tolerances")
    inside = model.penetrations(q, tolerance=penetration_tolerance)
    if inside:
        point, obstacle, depth = min(inside, key=lambda item: item[2])
        raise SimulationError(
            f"step {step_index}: contact point {point} is {-depth:.3g} m inside obstacle "
            f"{obstacle}; reduce dt or the growth rate, or add contact points")
