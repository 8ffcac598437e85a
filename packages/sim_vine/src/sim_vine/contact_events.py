"""How a trajectory's gradient behaves across contact events: the package README's table
("At contact events"), printed by ``python examples/vine/contact_events.py``.

A 20-body vine grows at 0.1 m/s through the ``cluttered`` scene (μ 0.3, 250 steps of 10 ms:
contacts are made, broken and switch between stick and slip). Its loss is a keypoint sum
over the run, ``Σ_k Σ_i w_i · p_i(q_k)`` with fixed random weights ``w`` on 8 keypoints,
taken as a function of the relative change of the tied K, C and μ (``x = 0`` is the
scene's design, ``x = 0.01`` one percent more). :class:`SlidingTrajectory` gives the loss,
its gradient through ``step_vjp`` (the adjoint sweep over the recorded states) and central
differences ``(L(h) − L(−h)) / 2h`` of whole rollouts, for hard contact
(``contact_smoothing`` 0) or smoothed contact (κ > 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .kinematics import keypoints, keypoints_vjp
from .scene import make_simulator
from .state import VineState

__all__ = ["NAMES", "RELATIVE_STEPS", "SlidingTrajectory", "contact_event_rows"]

NAMES = ("joint.stiffness", "joint.damping", "contact.friction")
"""The design entries the loss is differentiated in (relative changes of each)."""
RELATIVE_STEPS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)
"""The table's relative finite-difference steps."""


class SlidingTrajectory:
    """The loss of a vine sliding through the cluttered scene, its adjoint gradient and
    central differences, in the relative change of :data:`NAMES` (see the module).

    Args:
        contact_smoothing: κ [J] (0: hard contact).
        bodies, steps, dt: the vine's bodies, the steps and their length [s].
        friction: the contact friction μ.
        growth_rate: the commanded growth [m/s].
        points: keypoints in the loss.
        seed: seeds the loss weights.
    """

    def __init__(self, contact_smoothing: float, *, bodies: int = 20, steps: int = 250,
                 dt: float = 0.01, friction: float = 0.3, growth_rate: float = 0.1,
                 points: int = 8, seed: int = 0):
        self.simulator = make_simulator(scene="cluttered", bodies=bodies, friction=friction,
                                        contact_smoothing=contact_smoothing,
                                        tie=["joint.stiffness", "joint.damping"])
        self.design = self.simulator.design_space().defaults()
        self.weights = np.random.default_rng(seed).standard_normal((points, 2))
        self.steps, self.dt = int(steps), float(dt)
        self.action = np.array([float(growth_rate)])

    def _run(self, relative: Mapping[str, float]) -> tuple[float, list[VineState]]:
        design = {**self.design, **{name: self.design[name] * (1.0 + relative[name])
                                    for name in NAMES}}
        model, points = self.simulator.model, len(self.weights)
        state, total, states = self.simulator.initial_state(design), 0.0, []
        for _ in range(self.steps):
            states.append(state)
            state = self.simulator.step(state, self.action, design, self.dt)
            total += float(np.sum(self.weights * keypoints(model, state.body_q, points)))
        return total, states + [state]

    def loss(self, relative: Mapping[str, float]) -> float:
        """The loss at the relative changes ``relative`` (name -> x) of :data:`NAMES`."""
        return self._run(relative)[0]

    def gradient(self) -> dict[str, float]:
        """d loss / d relative change of each of :data:`NAMES` at the scene's design, by the
        adjoint sweep (``step_vjp``) over the recorded states."""
        model, points = self.simulator.model, len(self.weights)
        _, states = self._run(dict.fromkeys(NAMES, 0.0))
        g_next = VineState(body_q=np.zeros_like(states[0].body_q),
                           body_qd=np.zeros_like(states[0].body_qd))
        gradient = dict.fromkeys(NAMES, 0.0)
        for k in range(self.steps, 0, -1):
            g_q = g_next.body_q + keypoints_vjp(model, states[k].body_q, points, self.weights)
            g_next, _, g_design = self.simulator.step_vjp(
                states[k - 1], self.action, self.design, self.dt,
                VineState(body_q=g_q, body_qd=g_next.body_qd))
            for name in NAMES:
                gradient[name] += float(np.sum(g_design[name] * self.design[name]))
        return gradient

    def central_difference(self, name: str, step: float) -> float:
        """``(L(h) − L(−h)) / 2h`` in the relative change of ``name`` at relative step
        ``h = step``."""
        if name not in NAMES:
            raise ValueError(f"name must be one of {NAMES}, got {name!r}")
        shifted = [self.loss({**dict.fromkeys(NAMES, 0.0), name: sign * step})
                   for sign in (1.0, -1.0)]
        return (shifted[0] - shifted[1]) / (2.0 * step)


def contact_event_rows(smoothings: Sequence[float] = (0.0, 1e-7, 1e-6, 1e-5), *,
                       relative_steps: Sequence[float] = RELATIVE_STEPS,
                       **options) -> list[dict]:
    """Per κ in ``smoothings``: the adjoint gradient and the central differences at every
    step of ``relative_steps``, ``{"contact_smoothing", "gradient": {name: value},
    "differences": {name: [value per step]}}``; ``options`` go to
    :class:`SlidingTrajectory`."""
    rows = []
    for kappa in smoothings:
        trajectory = SlidingTrajectory(kappa, **options)
        rows.append({"contact_smoothing": float(kappa), "gradient": trajectory.gradient(),
                     "differences": {name: [trajectory.central_difference(name, h)
                                            for h in relative_steps] for name in NAMES}})
    return rows
