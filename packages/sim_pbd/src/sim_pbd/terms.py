"""Robot observers: joint positions and rates (what a real robot's encoders give), the
world position of a point on a link (an end effector, a marker), and an end effector's
position, velocity and Jacobian (what a task-space controller reads). Terms: an end
effector's distance from a circle it should follow and the work of the joint torques (the
two parts of the paper's design loss, Eq. 30), the distance of the joints from a
recorded joint trajectory (the tracking part of Eq. 26) and from resting at a goal pose.

Factories take ``simulator`` (a :class:`~sim_pbd.simulator.PBDSimulator`) and keyword-only
options, as the plugin registry calls them (terms also the run's ``dt`` and ``substeps``).
The observers read the joint frames of the design.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codesign.controllers import CircleTrajectory
from codesign.outputs import read_npz
from codesign.recordings import RecordingSourceError
from codesign.terms import TrajectoryTracking
from codesign.tree import tree_add, tree_zeros_with

from .end_effector import end_effector, end_effector_vjp
from .holding_poses import joint_columns
from .kinematics import joint_positions, joint_positions_vjp
from .model import JOINT_TYPES
from .reports import torque_report
from .rotations import quat_rotate, quat_rotate_vjp

__all__ = ["CircleTracking", "EndEffectorObserver", "JointGoal", "JointObserver",
           "JointTracking", "JointWork", "LinkPointObserver"]


class JointObserver:
    """Observation: joint positions [rad or m] then joint rates [rad/s or m/s], size 2m, in
    the model's joint order (the URDF's)."""

    def __init__(self, *, simulator):
        self.simulator = simulator
        self.size = 2 * simulator.model.joint_count

    def observe(self, state, design):
        """(joint_q, joint_qd) concatenated, shape (2m,)."""
        params = self.simulator.parameters(design)
        return np.concatenate(joint_positions(self.simulator.model, params, state))

    def observe_vjp(self, state, design, g_observation):
        """(∂L/∂state, ∂L/∂(joint origins)) given ∂L/∂observation (2m,)."""
        sim = self.simulator
        m = sim.model.joint_count
        g = np.asarray(g_observation, dtype=np.float64)
        g_state, g_params = joint_positions_vjp(sim.model, sim.parameters(design), state,
                                                g[:m], g[m:])
        return g_state, sim.parameters_vjp(design, g_params)


class LinkPointObserver:
    """Observation: the world position [m] of ``point`` (in the link's URDF frame [m]) on
    ``link`` (a link name; default the last link), size 3."""

    def __init__(self, *, simulator, link: str | None = None,
                 point: list[float] = (0.0, 0.0, 0.0)):
        model = simulator.model
        index, point = _end_effector_link(simulator, link, point, "link_point")
        link = model.link_names[index]
        parent_joint = np.flatnonzero(model.joint_child == index)
        if parent_joint.size == 0:
            raise ValueError(f"link_point: link {link!r} hangs on no joint (a floating base), "
                             "so its URDF frame is not in the model; use a link below a joint")
        self.simulator = simulator
        self.link, self.joint = index, int(parent_joint[0])
        self.size = 3
        self._point = point

    def _offset(self, design) -> np.ndarray:
        # the body frame sits at the centre of mass and the link's URDF frame at its parent
        # joint's origin, joint_child_x in the body frame: body point = point + joint_child_x
        return self._point + self.simulator.parameters(design)["joint_child_x"][self.joint]

    def observe(self, state, design):
        """The point's world position [m], shape (3,)."""
        offset = self._offset(design)
        return state.link_x[self.link] + quat_rotate(state.link_q[self.link], offset)

    def observe_vjp(self, state, design, g_observation):
        """(∂L/∂state, ∂L/∂joint.child_origin) given ∂L/∂position (3,)."""
        offset = self._offset(design)
        g = np.asarray(g_observation, dtype=np.float64)
        g_q, g_offset = quat_rotate_vjp(state.link_q[self.link], offset, g)
        g_x = np.zeros_like(state.link_x)
        g_x[self.link] = g
        g_link_q = np.zeros_like(state.link_q)
        g_link_q[self.link] = g_q
        g_child_x = np.zeros_like(self.simulator.model.joint_child_x)
        g_child_x[self.joint] = g_offset
        return (tree_zeros_with(state, link_x=g_x, link_q=g_link_q),
                {"joint.child_origin": g_child_x})


class EndEffectorObserver:
    """Observation: the position [m] (3), velocity [m/s] (3) and positional Jacobian
    (3, m) [m/rad or m/m], row-major, of ``point`` on ``link`` (a link name; default the
    last link), size 6 + 3m (:func:`sim_pbd.end_effector.end_effector`).

    ``point`` [m] is in the link's body frame, from its centre of mass, so it moves with
    the mass when a design changes the link's length (``joint.child_origin``); the default,
    the centre of mass, is the double pendulum's tip."""

    def __init__(self, *, simulator, link: str | None = None,
                 point: list[float] = (0.0, 0.0, 0.0)):
        self.simulator = simulator
        self.link, self._point = _end_effector_link(simulator, link, point, "end_effector")
        self.size = 6 + 3 * simulator.model.joint_count

    def observe(self, state, design):
        """[position, velocity, Jacobian row-major], shape (6 + 3m,)."""
        sim = self.simulator
        position, velocity, jacobian = end_effector(sim.model, sim.parameters(design), state,
                                                    link=self.link, point=self._point)
        return np.concatenate([position, velocity, jacobian.reshape(-1)])

    def observe_vjp(self, state, design, g_observation):
        """(∂L/∂state, ∂L/∂joint.child_origin) given ∂L/∂observation (6 + 3m,)."""
        sim = self.simulator
        g = np.asarray(g_observation, dtype=np.float64)
        g_state, g_params = end_effector_vjp(
            sim.model, sim.parameters(design), state, link=self.link, point=self._point,
            g_position=g[:3], g_velocity=g[3:6], g_jacobian=g[6:].reshape(3, -1))
        return g_state, sim.parameters_vjp(design, g_params)


def _end_effector_link(simulator, link: str | None, point, what: str):
    """(link index, point (3,)) of an end effector's options, or a ValueError naming them."""
    names = list(simulator.model.link_names)
    link = names[-1] if link is None else link
    if link not in names:
        raise ValueError(f"{what}: unknown link {link!r}; the model's links are {names}")
    point = np.asarray(point, dtype=np.float64)
    if point.shape != (3,) or not np.all(np.isfinite(point)):
        raise ValueError(f"{what}: point must be [x, y, z] in metres, got {point}")
    return names.index(link), point


class CircleTracking:
    """Running term ``‖p(s_t) − p_des(t)‖`` [m]: the distance of an end effector (``link``,
    ``point`` as in :class:`EndEffectorObserver`) from the point of a circle
    (:class:`codesign.controllers.CircleTrajectory`: ``centre``, ``radius``, ``period``,
    ``axes``, ``phase``) at ``t = control_step · dt · substeps`` (the run supplies ``dt``
    [s] and ``substeps``); summed over the rollout, the tracking part of the paper's Eq. 30."""

    kind = "running"

    def __init__(self, *, simulator, dt: float, substeps: int = 1, link: str | None = None,
                 point: list[float] = (0.0, 0.0, 0.0), centre: list[float] = (0.0, 0.0, 0.0),
                 radius: float = 0.3, period: float = 2.0,
                 axes: list[list[float]] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)),
                 phase: float = 0.0):
        self.simulator, self.control_dt = simulator, _control_dt(dt, substeps, "circle_tracking")
        self.link, self._point = _end_effector_link(simulator, link, point, "circle_tracking")
        self.circle = CircleTrajectory(centre=centre, radius=radius, period=period, axes=axes,
                                       phase=phase)

    def _offset(self, state, design, control_step):
        sim = self.simulator
        position, _, _ = end_effector(sim.model, sim.parameters(design), state, link=self.link,
                                      point=self._point)
        return position - self.circle.position(control_step * self.control_dt)

    def value(self, state, action, design, control_step):
        return float(np.linalg.norm(self._offset(state, design, control_step)))

    def grad(self, state, action, design, control_step):
        offset = self._offset(state, design, control_step)
        distance = np.linalg.norm(offset)
        if distance == 0.0:  # on the circle: the norm's subgradient 0
            return None, None, None
        sim = self.simulator
        g_state, g_params = end_effector_vjp(
            sim.model, sim.parameters(design), state, link=self.link, point=self._point,
            g_position=offset / distance, g_velocity=np.zeros(3),
            g_jacobian=np.zeros((3, sim.model.joint_count)))
        return g_state, None, sim.parameters_vjp(design, g_params)


def _control_dt(dt: float, substeps: int, what: str) -> float:
    """The control period ``dt · substeps`` [s], or a ValueError naming ``what``."""
    if not (np.isfinite(dt) and dt > 0) or int(substeps) < 1:
        raise ValueError(f"{what}: dt must be a positive time in s and substeps >= 1, got "
                         f"dt {dt!r}, substeps {substeps!r}")
    return float(dt) * int(substeps)


class JointWork:
    """Running term ``τ_t · (θ^{t+1} − θ^t)`` [J]: the work of the joint torques (the action
    τ_t, N m or N) over control step t; summed over the rollout, the work part of the
    paper's Eq. 30, ``Σ_t (θ^t − θ^{t−1}) · τ^t`` with τ^t the torque that moved the joints
    from θ^{t−1} to θ^t.

    The term sees s_t and τ_t only, so it steps the simulator itself (``substeps`` steps of
    ``dt`` [s], as the rollout does; the run supplies both) to reach θ^{t+1}, and its VJP
    runs back through those steps. The product of τ_t with the step before it,
    ``θ^t − θ^{t−1}`` (the joint rate of s_t times the control period), is no work: under
    a stiff feedback law it turns negative in proportion to how much the joints oscillate,
    and a design optimizer drives the loss below zero with it. Revolute displacements are
    wrapped into (−π, π]. The work is signed: torque that brakes the joints counts negative,
    and without damping its sum is the kinetic energy gained."""

    kind = "running"

    def __init__(self, *, simulator, dt: float, substeps: int = 1):
        self.control_dt = _control_dt(dt, substeps, "joint_work")
        self.simulator, self.dt, self.substeps = simulator, float(dt), int(substeps)
        self._revolute = simulator.model.joint_type == JOINT_TYPES.index("revolute")

    def _states(self, state, action, design) -> list:
        states = [state]
        for _ in range(self.substeps):
            states.append(self.simulator.step(states[-1], action, design, self.dt))
        return states

    def _displacement(self, params, start, end) -> np.ndarray:
        model = self.simulator.model
        change = (joint_positions(model, params, end)[0]
                  - joint_positions(model, params, start)[0])
        return np.where(self._revolute, np.remainder(change + np.pi, 2 * np.pi) - np.pi,
                        change)

    def value(self, state, action, design, control_step):
        params = self.simulator.parameters(design)
        end = self._states(state, action, design)[-1]
        return float(np.dot(action, self._displacement(params, state, end)))

    def grad(self, state, action, design, control_step):
        sim = self.simulator
        params = sim.parameters(design)
        action = np.asarray(action, dtype=np.float64)
        states = self._states(state, action, design)
        zeros = np.zeros(sim.model.joint_count)
        g_state, g_params = joint_positions_vjp(sim.model, params, states[-1], action, zeros)
        g_design = sim.parameters_vjp(design, g_params)
        g_action = self._displacement(params, state, states[-1])
        for start in reversed(states[:-1]):
            g_state, g_step_action, g_step_design = sim.step_vjp(start, action, design,
                                                                 self.dt, g_state)
            g_action = g_action + g_step_action
            _accumulate(g_design, g_step_design)
        g_start, g_params = joint_positions_vjp(sim.model, params, state, -action, zeros)
        _accumulate(g_design, sim.parameters_vjp(design, g_params))
        return tree_add(g_state, g_start), g_action, g_design


def _accumulate(total: dict, gradient: dict) -> None:
    """Add the design gradient ``gradient`` into ``total`` (name -> array), in place."""
    for name, value in gradient.items():
        total[name] = total[name] + value if name in total else value


class _WeightedJoints(JointObserver):
    """The joints observer with its angles scaled by √λ1 and its rates by √λ2, so that a
    squared distance weighs them as Eq. 26 does."""

    def __init__(self, *, simulator, angle_weight: float, rate_weight: float):
        super().__init__(simulator=simulator)
        m = simulator.model.joint_count
        self.scale = np.repeat(np.sqrt([angle_weight, rate_weight]), m)

    def observe(self, state, design):
        return self.scale * super().observe(state, design)

    def observe_vjp(self, state, design, g_observation):
        return super().observe_vjp(state, design, self.scale * np.asarray(g_observation))


class JointGoal:
    """Running term ``λ1 ‖q_t − q_d‖² + λ2 ‖q̇_t‖²`` [rad²]: how far the joints are from
    resting at the goal angles ``goal`` (q_d [rad or m], one value or one per joint) at each
    control step; summed over the rollout, the regulation error of a controller holding a
    pose (λ1 ``angle_weight`` [1/rad²], λ2 ``rate_weight`` [s²/rad²], as in Eq. 26)."""

    kind = "running"

    def __init__(self, *, simulator, goal: float | list[float] = 0.0,
                 angle_weight: float = 1.0, rate_weight: float = 0.0):
        for name, value in (("angle_weight", angle_weight), ("rate_weight", rate_weight)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"joint_goal: {name} must be >= 0, got {value!r}")
        m = simulator.model.joint_count
        goal = np.asarray(goal, dtype=np.float64)
        goal = np.full(m, float(goal)) if goal.ndim == 0 else goal
        if goal.shape != (m,) or not np.all(np.isfinite(goal)):
            raise ValueError(f"joint_goal: goal must be one finite value or one per joint "
                             f"({m}: {list(simulator.model.joint_names)}), got {goal.tolist()}")
        self.observer = _WeightedJoints(simulator=simulator, angle_weight=angle_weight,
                                        rate_weight=rate_weight)
        self.target = self.observer.scale * np.concatenate([goal, np.zeros(m)])

    def value(self, state, action, design, control_step):
        residual = self.observer.observe(state, design) - self.target
        return float(np.dot(residual, residual))

    def grad(self, state, action, design, control_step):
        residual = self.observer.observe(state, design) - self.target
        g_state, g_design = self.observer.observe_vjp(state, design, 2.0 * residual)
        return g_state, None, g_design


class JointTracking(TrajectoryTracking):
    """Term ``Σ_t (λ1 ‖q_t − q̂_t‖² + λ2 ‖q̇_t − q̂̇_t‖²) / (T + 1)`` over the control steps
    t = 0 … T of a joint trajectory recorded in ``path``: the tracking part of the paper's
    Eq. 26 (λ1 ``angle_weight`` [1/rad²], λ2 ``rate_weight`` [s²/rad²]).

    ``path`` (relative to the experiment's folder, ``base_dir``) is an ``.npz`` with
    ``joint_names`` (m,), ``joint_q`` (T + 1, m) [rad or m] and ``joint_qd`` (T + 1, m)
    [rad/s or m/s], one row per control step from the start, and optionally ``time``
    (T + 1,) [s], which must advance by the run's control period ``dt × substeps``, and
    ``torques`` (T, m) [N m], the torques that drove the recording when known
    (``true_torques``, for comparing an estimate). The simulator must start where the
    recording does: its joints within ``start_tolerance`` [rad or m] of the first row (set
    the simulator's ``initial_positions``). Steps beyond the recording are not tracked."""

    def __init__(self, *, simulator, dt: float, substeps: int = 1, base_dir: Path | None = None,
                 path: str, angle_weight: float = 1.0, rate_weight: float = 0.02,
                 start_tolerance: float = 0.01):
        control_dt = _control_dt(dt, substeps, "joint_tracking")
        for name, value in (("angle_weight", angle_weight), ("rate_weight", rate_weight)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"joint_tracking: {name} must be >= 0, got {value!r}")
        file = Path(path) if Path(path).is_absolute() or base_dir is None \
            else Path(base_dir) / path
        model = simulator.model
        self.simulator, self.control_dt = simulator, control_dt
        self.joint_q, self.joint_qd, self.true_torques = _read_trajectory(file, model,
                                                                          control_dt)
        observer = _WeightedJoints(simulator=simulator, angle_weight=angle_weight,
                                   rate_weight=rate_weight)
        super().__init__(observer=observer, targets=observer.scale * np.concatenate(
            [self.joint_q, self.joint_qd], axis=1))
        design = simulator.design_space().defaults()
        start = joint_positions(model, simulator.parameters(design),
                                simulator.initial_state(design))[0]
        gap = np.abs(start - self.joint_q[0])
        if np.any(gap > start_tolerance):
            row = ", ".join(f"{n}: {q:.6g}" for n, q in zip(model.joint_names,
                                                             self.joint_q[0], strict=True))
            raise ValueError(f"joint_tracking: the simulator starts {gap.max():.3g} away from "
                             f"the recording's first row; set the simulator's "
                             f"initial_positions to {{{row}}}")


    def report(self, folder: Path, context) -> dict:
        """``torques.png`` and the RMSE of the run's torques against the recording's
        (:func:`sim_pbd.reports.torque_report`)."""
        sim = self.simulator
        params = sim.parameters(context.design)
        simulated = [joint_positions(sim.model, params, s)[0] for s in context.states]
        return torque_report(folder, joint_names=sim.model.joint_names,
                             control_dt=self.control_dt, estimated=context.actions,
                             true=self.true_torques, recorded_q=self.joint_q,
                             simulated_q=np.array(simulated))


def _read_trajectory(file: Path, model, control_dt: float):
    """(joint_q (T + 1, m), joint_qd (T + 1, m), torques (T, m) or None) of a recorded
    joint trajectory in the model's joint order, checked (see :class:`JointTracking`)."""
    where = f"joint_tracking: recording {str(file)!r}"
    if not file.is_file():
        raise ValueError(f"{where} not found; check options.path (relative paths start at "
                         "the experiment's folder)")
    try:
        arrays = read_npz(file)
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{where} cannot be read as .npz: {exc}") from None
    needed = ("joint_names", "joint_q", "joint_qd")
    if any(name not in arrays for name in needed):
        raise ValueError(f"{where} has arrays {sorted(arrays)}; it needs joint_names (m,), "
                         "joint_q (T + 1, m) and joint_qd (T + 1, m)")
    names = [str(n) for n in np.asarray(arrays["joint_names"]).reshape(-1)]
    try:
        columns = joint_columns(where, names, model.joint_names,
                                {k: np.asarray(arrays[k], dtype=np.float64)
                                 for k in ("joint_q", "joint_qd")})
        torques = None
        if "torques" in arrays:
            torques = joint_columns(where, names, model.joint_names, {
                "torques": np.asarray(arrays["torques"], dtype=np.float64)})["torques"]
    except RecordingSourceError as exc:
        raise ValueError(str(exc)) from None
    rows = len(columns["joint_q"])
    if rows < 2 or (torques is not None and len(torques) != rows - 1):
        raise ValueError(f"{where}: {rows} rows of joint_q need at least 2, and torques one "
                         "row fewer (one per step between them)")
    if "time" in arrays:
        step = np.diff(np.asarray(arrays["time"], dtype=np.float64).reshape(-1))
        if step.size != rows - 1 or not np.allclose(step, control_dt, rtol=1e-6, atol=0.0):
            raise ValueError(f"{where} is sampled every {np.median(step):.6g} s but a control "
                             f"step lasts dt × substeps = {control_dt:.6g} s; set run.dt and "
                             "run.substeps so that one control step is one sample")
    return columns["joint_q"], columns["joint_qd"], torques
