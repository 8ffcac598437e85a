"""A starting point for the joint estimation from a simulated trajectory.

The estimation (:func:`sim_vine.fit.estimation.estimate`) needs poses, velocities,
parameters, constraint impulses and a contact schedule at every model step. From poses
fitted to each frame alone (its default start) the contact schedule can be far off: a
vine whose length is not fitted per frame never reaches the wall. A simulation already
holds all of them, consistently: :func:`simulated_warm_start` steps the simulator and keeps
each step's velocities, its joint and growth impulses and its active contact rows (the
contact schedule the simulator itself found); :func:`warm_start_from_fit` does so along a
shooting fit's rollout (its fitted design, start pose and growth rates). At the design it
was simulated with, such a start is exactly feasible for the estimation's NLP with zero
dynamics residual (``tests/test_estimation_warm_start.py``).

Impulses follow the estimation's signs: the momentum residual is ``M(v' − v) − Δt F =
Jᵀλ + Σ impulse × (N ± μT)``, where the step's QP has ``P v − b = −Aᵀ y`` (OSQP's
multipliers, ``y ≤ 0`` on a pushing contact row), so ``λ = −y``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..state import VineState
from ..step import step as vine_step
from .shooting import FitError, ShootingFit, VideoRecording, frame_schedule

__all__ = ["WarmStart", "simulated_warm_start", "warm_start_from_fit"]


@dataclasses.dataclass(frozen=True)
class WarmStart:
    """A simulated trajectory at every model step, as the estimation's starting point.

    Attributes:
        design: the simulator design it was simulated with (its free parameters are the
            estimation's starting values, the others stay fixed).
        body_q: poses of steps 0 … K [m, m, rad], shape (K + 1, N, 3).
        body_qd: velocities of steps 0 … K [m/s, m/s, rad/s], shape (K + 1, N, 3).
        joint_impulse: each step's joint and growth impulses λ [N s] in the simulator's row
            order (joints, then growth), shape (K, rows).
        contacts: contact modes of each step's active contact rows (+1 / −1: the cone edge
            N ± μT, 0 free), shape (K, pairs): see
            :func:`sim_vine.fit.contact_schedule.detect_contacts`.
        contact_impulse: normal impulses of the scheduled contacts [N s], shape (K, pairs).
    """

    design: dict[str, np.ndarray]
    body_q: np.ndarray
    body_qd: np.ndarray
    joint_impulse: np.ndarray
    contacts: np.ndarray
    contact_impulse: np.ndarray

    @property
    def steps(self) -> int:
        """Model steps K."""
        return len(self.body_q) - 1


def simulated_warm_start(simulator, design, *, initial_state: VineState, growth_rate,
                         dt: float) -> WarmStart:
    """Step ``simulator`` from ``initial_state`` and keep what the estimation starts from.

    A contact whose two cone edges are both active (sticking, or at μ = 0 where the edges
    coincide) takes the edge of the larger impulse and the normal impulse of both (each
    edge's normal component is 1).

    Args:
        simulator: a :class:`~sim_vine.simulator.VineSimulator` and its ``design``.
        initial_state: the state at step 0.
        growth_rate: the growth rate of every model step [m/s] (before the design's
            ``growth.offset``), shape (K,).
        dt: the model step [s].
    """
    layout = simulator.layout
    design = simulator.design_space().check(dict(design))
    params, offset = simulator._parameters(design)
    rates = np.asarray(growth_rate, dtype=np.float64).reshape(-1)
    q = np.asarray(initial_state.body_q, dtype=np.float64)
    v = np.asarray(initial_state.body_qd, dtype=np.float64)
    poses, velocities, reactions, modes, impulses = [q], [v], [], [], []
    for rate in rates:
        q, v, solution, _ = vine_step(simulator.arrays, layout, simulator.qp, q, v,
                                      float(rate) + offset, simulator._step_masses(params, q),
                                      dt)
        reactions.append(-solution.y[:layout.contact.start])
        edges = -solution.y[layout.contact].reshape(-1, 2) * solution.active[
            layout.contact].reshape(-1, 2)
        modes.append(np.where(edges.any(axis=1), np.where(edges[:, 0] >= edges[:, 1], 1, -1),
                              0))
        impulses.append(edges.sum(axis=1))
        poses.append(q)
        velocities.append(v)
    return WarmStart(design={name: np.asarray(value).copy() for name, value in design.items()},
                     body_q=np.array(poses), body_qd=np.array(velocities),
                     joint_impulse=np.array(reactions).reshape(len(rates), -1),
                     contacts=np.array(modes, dtype=np.int64).reshape(len(rates), -1),
                     contact_impulse=np.array(impulses).reshape(len(rates), -1))


def warm_start_from_fit(simulator, fit: ShootingFit, recording: VideoRecording, *,
                        model_rate: float = 90.0, index: int = 0) -> WarmStart:
    """The trajectory of a shooting fit's rollout of ``recording``, at every model step.

    Args:
        simulator: the :class:`~sim_vine.simulator.VineSimulator` that was fitted.
        fit: what :func:`sim_vine.fit.shooting.fit_shooting` returned.
        recording: the recording the fit rolled out as its ``index``-th.
        model_rate: the fit's model steps per second [Hz] (the same schedule).
        index: which of the fit's recordings.
    """
    if not 0 <= index < len(fit.start_poses):
        raise FitError(f"the fit has {len(fit.start_poses)} recording(s); index {index} is "
                       "not one of them")
    schedule = frame_schedule(recording.keypoints.times, model_rate=model_rate)
    rates = np.asarray(fit.growth_rates[index], dtype=np.float64)
    if len(rates) != recording.keypoints.frame_count - 1:
        raise FitError(f"the fit's recording {index} has {len(rates) + 1} frames and this "
                       f"recording {recording.keypoints.frame_count}: pass the recording the "
                       "fit was made on")
    start = fit.start_poses[index].body_q(simulator.model)
    return simulated_warm_start(simulator, fit.design,
                                initial_state=VineState(body_q=start,
                                                        body_qd=np.zeros_like(start)),
                                growth_rate=np.repeat(rates, schedule.substeps),
                                dt=schedule.dt)
