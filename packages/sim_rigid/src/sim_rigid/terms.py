"""Task terms of the ``rigid`` simulator (registered by the plugin).

``reach_targets``: a point on a link (the fingertip) against targets taken in sequence, each
over its time window: the paper's Finger Reach cost c_p Σ_t ‖p_t − p̂_t‖ (Xu et al. 2021,
appendix, Eq. 6; the norm, not its square), evaluated at every control step after the start.
"""

from __future__ import annotations

import numpy as np

from codesign.tree import tree_zeros_with

from .kinematics import link_point, link_point_jacobians

__all__ = ["ReachTargets"]


class ReachTargets:
    """``‖p(s_t) − p̂(t)‖`` [m] at control steps t >= 1: p a point fixed on a link, p̂ the
    target whose window holds the time t · substeps · dt.

    Args:
        simulator: a :class:`~sim_rigid.simulator.RigidSimulator`.
        targets: target positions [m] in the world, (k, 3), reached in this order.
        start_times: when each target's window opens [s], (k,), increasing from 0; the last
            lasts to the end.
        link: the link's name (default the last link: a finger's tip).
        point: the point in the link's frame [m] (3,).
        dt, substeps: the run's substep length [s] and substeps per control step (injected).
    """

    kind = "trajectory"

    def __init__(self, *, simulator, targets, start_times, link: str | None = None,
                 point=(0.0, 0.0, 0.0), dt: float, substeps: int):
        self.model = simulator.model
        names = list(self.model.link_names)
        if link is not None and link not in names:
            raise ValueError(f"reach_targets: link {link!r} is not one of the robot's links "
                             f"{names}")
        self.link = names.index(link) if link is not None else len(names) - 1
        self.point = np.asarray(point, dtype=np.float64)
        if self.point.shape != (3,):
            raise ValueError(f"reach_targets: point is [x, y, z] in the link's frame [m], got "
                             f"{point!r}")
        self.targets = np.asarray(targets, dtype=np.float64)
        self.start_times = np.asarray(start_times, dtype=np.float64)
        if self.targets.ndim != 2 or self.targets.shape[1] != 3 or len(self.targets) == 0:
            raise ValueError(f"reach_targets: targets must be a list of [x, y, z] [m], got "
                             f"shape {self.targets.shape}")
        if self.start_times.shape != (len(self.targets),) or self.start_times[0] != 0.0 \
                or np.any(np.diff(self.start_times) <= 0):
            raise ValueError(f"reach_targets: start_times needs one time per target "
                             f"({len(self.targets)}), increasing from 0 [s], got "
                             f"{self.start_times.tolist()}")
        self.control_dt = float(dt) * int(substeps)

    def target(self, time: float) -> np.ndarray:
        """The target [m] (3,) whose window holds ``time`` [s]."""
        return self.targets[np.searchsorted(self.start_times, time, side="right") - 1]

    def distance(self, state, design, time: float) -> float:
        """‖p − p̂(time)‖ [m] at ``state`` (any step, not only a control step)."""
        position = link_point(self.model, design["joint.origin"], state.joint_q, self.link,
                              self.point)
        return float(np.linalg.norm(position - self.target(time)))

    def value(self, state, action, design, control_step):
        if control_step == 0:  # the start is given, not controlled (the paper sums t >= 1)
            return 0.0
        return self.distance(state, design, control_step * self.control_dt)

    def grad(self, state, action, design, control_step):
        if control_step == 0:
            return None, None, None
        position, d_q, d_origin = link_point_jacobians(
            self.model, design["joint.origin"], state.joint_q, self.link, self.point)
        residual = position - self.target(control_step * self.control_dt)
        norm = np.linalg.norm(residual)
        if norm == 0.0:  # the norm's kink: zero is a subgradient
            return None, None, None
        unit = residual / norm
        return (tree_zeros_with(state, joint_q=unit @ d_q), None,
                {"joint.origin": np.einsum("i,ijk->jk", unit, d_origin)})
