"""The robot's safety checks: a time step the substeps resolve, sane inputs every step, and
divergence or unconverged joints during a run.

XPBD projects its constraints implicitly, so no time step makes it blow up the way an
explicit spring does; what a too-large substep h loses is the swing itself. A link hanging
from its joint at distance d from its centre of mass swings at ω² = m g d / (I + m d²) (I
about the joint axis), and its swing is resolved while h ω ≤ :data:`MAX_PHASE_PER_SUBSTEP`.
Joints that do not close (the two links' copies of a joint origin apart) mean too few
iterations or substeps for the masses and compliances involved.
"""

from __future__ import annotations

import numpy as np

from codesign.simulator import SimulationError, UnstableTimeStepError

from .kinematics import joint_origins
from .model import JOINT_TYPES, PBDModel
from .rotations import quat_rotate_rows
from .state import PBDState

__all__ = ["MAX_PHASE_PER_SUBSTEP", "check_state", "check_step_inputs", "check_time_step",
           "joint_gaps", "swing_frequency"]

MAX_PHASE_PER_SUBSTEP = 0.5
"""Largest h ω [rad] a substep may take of the fastest link's swing under gravity."""


def swing_frequency(model: PBDModel, params: dict) -> float:
    """The fastest link's swing frequency ω [rad/s] under gravity about its parent joint
    (0 without gravity)."""
    g = float(np.linalg.norm(model.gravity))
    child = model.joint_child
    mass, inertia = params["link_mass"][child], params["link_inertia"][child]
    arm = params["joint_child_x"]
    d = np.linalg.norm(arm, axis=1)
    axis = quat_rotate_rows(model.joint_child_q, model.joint_axis)  # child's body frame
    about_axis = np.einsum("ji,jik,jk->j", axis, inertia, axis)
    omega2 = mass * g * d / (about_axis + mass * d**2)
    return float(np.sqrt(np.max(omega2, initial=0.0)))


def check_time_step(model: PBDModel, params: dict, dt: float, *, substeps: int) -> None:
    """Raise UnstableTimeStepError when ``dt`` [s] is not a positive number or its substeps
    do not resolve the fastest swing (h ω > :data:`MAX_PHASE_PER_SUBSTEP`), naming the
    largest such dt and the substeps that would do."""
    if not (np.isfinite(dt) and dt > 0):
        raise UnstableTimeStepError(f"dt must be a positive number of seconds, got {dt!r}")
    omega = swing_frequency(model, params)
    if omega * dt / substeps > MAX_PHASE_PER_SUBSTEP:
        largest = MAX_PHASE_PER_SUBSTEP * substeps / omega
        needed = int(np.ceil(omega * dt / MAX_PHASE_PER_SUBSTEP))
        raise UnstableTimeStepError(
            f"dt = {dt:g} s in {substeps} substeps does not resolve the fastest link's swing "
            f"(ω ≈ {omega:.3g} rad/s); use dt <= {largest:.3g} s or substeps >= {needed}")


def check_step_inputs(model: PBDModel, state: PBDState, action) -> np.ndarray:
    """The action as a float64 array (m,); raise ValueError for a state or action of the
    wrong shape and SimulationError for NaN or inf in either. Runs every step."""
    n, m = model.link_count, model.joint_count
    for name, width in (("link_x", 3), ("link_q", 4), ("link_v", 3), ("link_w", 3)):
        value = getattr(state, name)
        if np.shape(value) != (n, width):
            raise ValueError(f"state.{name} has shape {np.shape(value)}: state.{name} must "
                             f"have shape ({n}, {width}) for the model's {n} links")
        if not np.all(np.isfinite(value)):
            raise SimulationError(f"state.{name} holds NaN or inf")
    action = np.asarray(action, dtype=np.float64)
    if action.shape != (m,):
        raise ValueError(f"the action holds one torque [N m] or force [N] per joint "
                         f"({', '.join(model.joint_names)}): shape ({m},), got {action.shape}")
    if not np.all(np.isfinite(action)):
        bad = [model.joint_names[j] for j in np.flatnonzero(~np.isfinite(action))]
        raise SimulationError(f"the action is NaN or inf at joint(s) {', '.join(bad)}")
    return action


def joint_gaps(model: PBDModel, state: PBDState, params: dict) -> np.ndarray:
    """Distance [m] between the parent's and the child's copy of each joint origin (for a
    prismatic joint, across its axis), (m,)."""
    on_parent, on_child = joint_origins(model, state, params)
    gap = on_child - on_parent
    prismatic = model.joint_type == JOINT_TYPES.index("prismatic")
    if np.any(prismatic):
        axis = quat_rotate_rows(state.link_q[model.joint_child],
                                quat_rotate_rows(model.joint_child_q, model.joint_axis))
        along = np.einsum("ji,ji->j", gap, axis)
        gap = np.where(prismatic[:, None], gap - along[:, None] * axis, gap)
    return np.linalg.norm(gap, axis=1)


def check_state(model: PBDModel, state: PBDState, step_index: int, *, params: dict,
                tolerance: float) -> None:
    """Raise SimulationError at control step ``step_index`` when the state holds NaN or inf
    or a joint's gap exceeds ``tolerance`` [m] (joint frames from ``params``), naming the
    joint and the fix."""
    for name in ("link_x", "link_q", "link_v", "link_w"):
        if not np.all(np.isfinite(getattr(state, name))):
            raise SimulationError(
                f"step {step_index}: state.{name} holds NaN or inf; reduce dt or the torques")
    gaps = joint_gaps(model, state, params)
    worst = int(np.argmax(gaps)) if gaps.size else 0
    if gaps.size and gaps[worst] > tolerance:
        raise SimulationError(
            f"step {step_index}: joint {model.joint_names[worst]!r} came apart by "
            f"{gaps[worst]:.3g} m (tolerance {tolerance:g} m): the solver did not converge; "
            "raise iterations or substeps, or lower dt")
