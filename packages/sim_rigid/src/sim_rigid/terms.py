"""Task terms of the ``rigid`` simulator (registered by the plugin), each evaluated at every
control step after the start (the paper sums its costs over t = 1 … T):

- ``reach_targets``: a point on a link (the fingertip) against targets taken in sequence,
  each over its time window: the paper's Finger Reach cost c_p Σ_t ‖p_t − p̂_t‖ (Xu et al.
  2021, appendix, Eq. 6; the norm, not its square);
- ``joint_target``: one coordinate against its target, (q_t − q̂)²: Flip Box's c_flip
  ‖θ_t − π/2‖² (Eq. 7), the box's hinge angle, at every control step; with ``at_end`` only
  after the last step: Rotate Rubik's Cube's c_rotate ‖θ_T − π/2‖² (Eq. 11), the top
  layer's angle; with ``relative_to`` the difference of two coordinates: Assemble's
  c_rotation ‖θ^M_t − θ^box_t‖² (Eq. 13);
- ``touch_point``: the squared distance between a point on one link and a point on another
  until a time: Flip Box's c_touch ‖p_t − p_touch‖² for t < T/2 (Eq. 7), the fingertip
  against a point on the box's back face, which moves with the box.
"""

from __future__ import annotations

import numpy as np

from codesign.tree import tree_zeros_with

from .kinematics import link_point, link_point_jacobians

__all__ = ["JointTarget", "ReachTargets", "TouchPoint"]


def _link_index(model, term: str, key: str, link: str | None) -> int:
    """The index of link ``link`` (default the last link: a finger's tip) of ``model``."""
    names = list(model.link_names)
    if link is not None and link not in names:
        raise ValueError(f"{term}: {key} {link!r} is not one of the robot's links {names}")
    return names.index(link) if link is not None else len(names) - 1


def _joint_frames(simulator, design) -> tuple[np.ndarray, np.ndarray]:
    """The joint origins [m] (n, 3) and axis directions (n, 3) at ``design``: the design's
    own, or those its cage parameters set (:class:`~sim_rigid.cage_design.CageSimulator`)."""
    params = simulator.parameters(design)
    return params["joint_origin"], params["joint_axis"]


def _joint_frames_vjp(simulator, design, g_origin, g_axis) -> dict:
    """∂L/∂design from ∂L/∂(the joint origins and axis directions of :func:`_joint_frames`)
    (n, 3) each."""
    return simulator.parameters_vjp(design, {"joint_origin": g_origin, "joint_axis": g_axis})


def _link_point(term: str, key: str, point) -> np.ndarray:
    point = np.asarray(point, dtype=np.float64)
    if point.shape != (3,):
        raise ValueError(f"{term}: {key} is [x, y, z] in the link's frame [m], got "
                         f"{point.tolist()!r}")
    return point


class ReachTargets:
    """``‖p(s_t) − p̂(t)‖`` [m] at control steps t >= 1: p a point fixed on a link, p̂ the
    target whose window holds the time t · substeps · dt.

    Args:
        simulator: a :class:`~sim_rigid.simulator.RigidSimulator` or a
            :class:`~sim_rigid.cage_design.CageSimulator` (then the gradient reaches θ).
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
        self.simulator, self.model = simulator, simulator.model
        self.link = _link_index(self.model, "reach_targets", "link", link)
        self.point = _link_point("reach_targets", "point", point)
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
        origin, axis = _joint_frames(self.simulator, design)
        position = link_point(self.model, origin, state.joint_q, self.link, self.point,
                              joint_axis=axis)
        return float(np.linalg.norm(position - self.target(time)))

    def value(self, state, action, design, control_step):
        if control_step == 0:  # the start is given, not controlled (the paper sums t >= 1)
            return 0.0
        return self.distance(state, design, control_step * self.control_dt)

    def grad(self, state, action, design, control_step):
        if control_step == 0:
            return None, None, None
        origin, axis = _joint_frames(self.simulator, design)
        position, d_q, d_origin, d_axis = link_point_jacobians(
            self.model, origin, state.joint_q, self.link, self.point, joint_axis=axis)
        residual = position - self.target(control_step * self.control_dt)
        norm = np.linalg.norm(residual)
        if norm == 0.0:  # the norm's kink: zero is a subgradient
            return None, None, None
        unit = residual / norm
        return (tree_zeros_with(state, joint_q=unit @ d_q), None,
                _joint_frames_vjp(self.simulator, design, np.einsum("i,ijk->jk", unit, d_origin),
                                  np.einsum("i,ijk->jk", unit, d_axis)))


class JointTarget:
    """``(q_j − q_r − q̂)²`` [rad² or m²] of one coordinate q_j (less another, q_r, when
    ``relative_to`` names it; else q_r = 0) at control steps t >= 1, or with ``at_end`` only
    at the last one (the core's ``final`` kind: once, at s_T).

    Args:
        simulator: a :class:`~sim_rigid.simulator.RigidSimulator`.
        joint: the coordinate's name (a 1-DOF joint's name, a free joint's ``name.x`` ...).
        target: q̂ [rad or m] (default π/2: a quarter turn).
        at_end: score the state after the episode's last step only (default false: every
            control step after the start).
        relative_to: another coordinate's name: the term scores q_j − q_r (Assemble's
            c_rotation ‖θ^M − θ^box‖², the mount's and the box's turns, with q̂ = 0).
    """

    kind = "trajectory"

    def __init__(self, *, simulator, joint: str, target: float = np.pi / 2,
                 at_end: bool = False, relative_to: str | None = None):
        names = list(simulator.model.coordinate_names)
        for key, name in (("joint", joint), ("relative_to", relative_to)):
            if name is not None and name not in names:
                raise ValueError(f"joint_target: {key} {name!r} is not one of the robot's "
                                 f"coordinates {names}")
        if relative_to == joint:
            raise ValueError(f"joint_target: relative_to is the joint itself ({joint!r}); "
                             f"name another coordinate or leave relative_to out")
        self.joint, self.coordinate = joint, names.index(joint)
        self.reference = None if relative_to is None else names.index(relative_to)
        self.target = float(target)
        if not np.isfinite(self.target):
            raise ValueError(f"joint_target: target must be a finite number [rad or m], got "
                             f"{target!r}")
        if not isinstance(at_end, bool):
            raise ValueError(f"joint_target: at_end must be true (score the last step only) "
                             f"or false (every control step), got {at_end!r}")
        # the rollout reads each term's kind: a final term is evaluated once, at s_T
        self.kind = "final" if at_end else "trajectory"

    def error(self, state) -> float:
        """q_j − q_r − q̂ [rad or m] at ``state``."""
        reference = 0.0 if self.reference is None else float(state.joint_q[self.reference])
        return float(state.joint_q[self.coordinate]) - reference - self.target

    def value(self, state, action, design, control_step):
        if control_step == 0:  # the start is given, not controlled (the paper sums t >= 1)
            return 0.0
        return self.error(state) ** 2

    def grad(self, state, action, design, control_step):
        if control_step == 0:
            return None, None, None
        g_q = np.zeros_like(np.asarray(state.joint_q, dtype=np.float64))
        g_q[self.coordinate] = 2.0 * self.error(state)
        if self.reference is not None:
            g_q[self.reference] = -2.0 * self.error(state)
        return tree_zeros_with(state, joint_q=g_q), None, None


class TouchPoint:
    """``‖p − p_touch‖²`` [m²] at control steps t >= 1 whose time t · substeps · dt is
    before ``until``: p a point fixed on one link (a fingertip), p_touch a point fixed on
    another (a face of the object to touch), so the target moves with its link.

    Args:
        simulator: a :class:`~sim_rigid.simulator.RigidSimulator` or a
            :class:`~sim_rigid.cage_design.CageSimulator`.
        link, point: the touching link's name (default the last link) and the point in its
            frame [m] (3,).
        target_link, target_point: the touched link's name and the point in its frame [m].
        until: the time [s] from which the term stops counting (default: never stops).
        dt, substeps: the run's substep length [s] and substeps per control step (injected).
    """

    kind = "trajectory"

    def __init__(self, *, simulator, target_link: str, target_point, link: str | None = None,
                 point=(0.0, 0.0, 0.0), until: float = np.inf, dt: float, substeps: int):
        self.simulator, self.model = simulator, simulator.model
        self.link = _link_index(self.model, "touch_point", "link", link)
        self.point = _link_point("touch_point", "point", point)
        self.target_link = _link_index(self.model, "touch_point", "target_link", target_link)
        self.target_point = _link_point("touch_point", "target_point", target_point)
        if self.target_link == self.link:
            raise ValueError(f"touch_point: link and target_link are both "
                             f"{self.model.link_names[self.link]!r}; the touched point must "
                             f"be on another link")
        self.until = float(until)
        if not self.until > 0.0:
            raise ValueError(f"touch_point: until must be a time > 0 [s], got {until!r}")
        self.control_dt = float(dt) * int(substeps)

    def counts(self, control_step: int) -> bool:
        """Whether the term counts at ``control_step`` (after the start, before ``until``)."""
        return control_step > 0 and control_step * self.control_dt < self.until

    def offset(self, state, design) -> np.ndarray:
        """p − p_touch [m] (3,) at ``state``."""
        (origin, axis), q = _joint_frames(self.simulator, design), state.joint_q
        return (link_point(self.model, origin, q, self.link, self.point, joint_axis=axis)
                - link_point(self.model, origin, q, self.target_link, self.target_point,
                             joint_axis=axis))

    def value(self, state, action, design, control_step):
        if not self.counts(control_step):
            return 0.0
        offset = self.offset(state, design)
        return float(offset @ offset)

    def grad(self, state, action, design, control_step):
        if not self.counts(control_step):
            return None, None, None
        (origin, axis), q = _joint_frames(self.simulator, design), state.joint_q
        position, d_q, d_origin, d_axis = link_point_jacobians(
            self.model, origin, q, self.link, self.point, joint_axis=axis)
        target, t_q, t_origin, t_axis = link_point_jacobians(
            self.model, origin, q, self.target_link, self.target_point, joint_axis=axis)
        twice = 2.0 * (position - target)
        return (tree_zeros_with(state, joint_q=twice @ (d_q - t_q)), None,
                _joint_frames_vjp(self.simulator, design,
                                  np.einsum("i,ijk->jk", twice, d_origin - t_origin),
                                  np.einsum("i,ijk->jk", twice, d_axis - t_axis)))
