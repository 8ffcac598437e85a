"""``PBDSimulator``: the codesign Simulator protocol for articulated rigid robots (XPBD).

State: :class:`PBDState` (link poses and velocities in maximal coordinates). Action: one
torque [N m] (revolute) or force [N] (prismatic) per joint, in the model's joint order.
Design parameters: ``link.mass``, ``link.inertia``, ``joint.origin`` (joint origins in the
parent's frame: the link lengths), ``joint.child_origin``, ``joint.damping`` and
``joint.compliance``, each defaulting to the model's value. One step is ``substeps`` XPBD
substeps of ``iterations`` projection sweeps (:mod:`sim_pbd.step`); its VJP is the
hand-derived adjoint of the whole loop.
"""

from __future__ import annotations

import numpy as np

from codesign import DesignSpace, Parameter
from codesign.design import fields_from_design
from codesign.inertia import link_parameters
from codesign.tree import tree_add

from . import safety
from . import step as pbd_step
from .kinematics import (
    forward_kinematics,
    forward_kinematics_vjp,
    joint_positions,
    joint_positions_vjp,
    state_at_joints,
)
from .model import PBDModel
from .options import PBDOptions
from .render import default_view, render_frame, render_frames
from .springs import Springs, spring_torques, spring_torques_vjp
from .state import PBDState

__all__ = ["DESIGN_FIELDS", "PBDSimulator"]

_DEFAULT = PBDOptions()

DESIGN_FIELDS = {"link.mass": "link_mass", "link.inertia": "link_inertia",
                 "joint.origin": "joint_parent_x", "joint.child_origin": "joint_child_x",
                 "joint.damping": "joint_damping", "joint.compliance": "joint_compliance"}
"""Design parameter name -> the model field (:data:`sim_pbd.model.PARAMETERS`) it replaces."""


class PBDSimulator:
    """A differentiable XPBD simulator of one robot.

    Args:
        model: the robot.
        substeps, iterations, solver, scheme: the XPBD settings (see :class:`PBDOptions`).
        kernels: "numba" (compiled step and VJP) or "numpy" (the reference they equal).
        view, window: what ``render`` shows (see :func:`render_frame`).
        joint_tolerance: largest joint gap [m] ``check_state`` accepts.
        springs: joint-space springs (:mod:`sim_pbd.springs`), whose torques join the
            action every step; their stiffness and offset are design parameters.
    """

    def __init__(self, model: PBDModel, *, substeps: int = _DEFAULT.substeps,
                 iterations: int = _DEFAULT.iterations, solver: str = _DEFAULT.solver,
                 scheme: str = _DEFAULT.scheme, kernels: str = _DEFAULT.kernels,
                 view: str = _DEFAULT.view, window=None,
                 joint_tolerance: float = 1e-3, springs: Springs | None = None):
        self.model = model
        self.springs = springs if springs is not None and springs.count else None
        PBDOptions(solver=solver, scheme=scheme, kernels=kernels)  # checks the choices
        self.settings = dict(substeps=int(substeps), iterations=int(iterations),
                             solver=str(solver), scheme=str(scheme), kernels=str(kernels))
        self.view, self.window = view, window
        self.joint_tolerance = float(joint_tolerance)
        self.action_size = model.joint_count
        self._design_space = self._build_design_space()
        # the joint frames of the latest step, which check_state (given no design) measures
        # the joints' gaps with
        self._stepped_params = model.parameters()

    # -- contract -----------------------------------------------------------------------

    def design_space(self) -> DesignSpace:
        """Link masses and inertias, joint origins, damping and compliance; springs'
        stiffness and offset."""
        return self._design_space

    def _build_design_space(self) -> DesignSpace:
        m = self.model
        j = m.joint_count
        length = max(float(np.max(np.linalg.norm(m.joint_parent_x, axis=1), initial=0.0)), 0.01)
        return DesignSpace([
            *link_parameters(m.link_mass, m.link_inertia, frame="body frame"),
            Parameter("joint.origin", (j, 3), m.joint_parent_x, unit="m", scale=length,
                      entity="joint", doc="joint origin in the parent's body frame"),
            Parameter("joint.child_origin", (j, 3), m.joint_child_x, unit="m", scale=length,
                      entity="joint",
                      doc="joint origin in the child's body frame (minus its centre of mass)"),
            PBDOptions.parameter("damping", name="joint.damping", shape=(j,),
                                 default=m.joint_damping, entity="joint",
                                 scale=max(float(np.mean(m.joint_damping)), 0.01)),
            PBDOptions.parameter("compliance", name="joint.compliance", shape=(j,),
                                 default=m.joint_compliance, entity="joint", scale=1e-6),
            *self._spring_parameters(),
        ])

    def _spring_parameters(self) -> list[Parameter]:
        sp = self.springs
        if sp is None:
            return []
        return [Parameter("spring.stiffness", (sp.count,), sp.stiffness, lower=0.0,
                          unit="N/m", scale=max(float(np.mean(sp.stiffness)), 1.0),
                          entity="spring", doc="spring stiffness k"),
                Parameter("spring.offset", (sp.count,), sp.offset, unit="rad", scale=0.1,
                          entity="spring", doc="spring offset angle α₂ (Eq. 31)")]

    def parameters(self, design: dict) -> dict[str, np.ndarray]:
        """The model's :data:`~sim_pbd.model.PARAMETERS` with the design's values in place
        (float64), the one place the model's values meet the design's."""
        params = fields_from_design(self.model.parameters(), design, DESIGN_FIELDS)
        if np.any(params["link_mass"] <= 0):
            raise ValueError("link.mass must be positive for every link")
        return params

    def initial_state(self, design: dict) -> PBDState:
        """The robot at rest in its rest pose (``initial_positions``)."""
        link_x, link_q = forward_kinematics(self.model, self.parameters(design),
                                            self.model.joint_rest)
        return PBDState(link_x=link_x, link_q=link_q, link_v=np.zeros_like(link_x),
                        link_w=np.zeros_like(link_x))

    def state_at_joints(self, design: dict, joint_q, joint_qd) -> PBDState:
        """The robot at joint positions ``joint_q`` (m,) [rad or m] moving at joint rates
        ``joint_qd`` (m,) [rad/s or m/s] (:func:`~sim_pbd.kinematics.state_at_joints`): a
        recording's measured start, a controller's test state. It depends on the joint
        origins of ``design``; a fit that starts recordings here does not differentiate
        through it."""
        return state_at_joints(self.model, self.parameters(design), joint_q, joint_qd)

    def initial_state_vjp(self, design: dict, g_state: PBDState) -> dict:
        """∂L/∂(joint origins) through the rest pose's forward kinematics."""
        if g_state.link_x is None and g_state.link_q is None:
            return {}
        zeros = np.zeros((self.model.link_count, 3))
        g_x = zeros if g_state.link_x is None else np.asarray(g_state.link_x, dtype=np.float64)
        g_q = (np.zeros((self.model.link_count, 4)) if g_state.link_q is None
               else np.asarray(g_state.link_q, dtype=np.float64))
        _, g_params = forward_kinematics_vjp(self.model, self.parameters(design),
                                             self.model.joint_rest, g_x, g_q)
        return self.parameters_vjp(design, g_params)

    def _spring_torques(self, state: PBDState, design: dict, params: dict, dt: float):
        """(the joint positions half a step ahead (m,), the springs' joint torques there (m,))
        from ``state``: the torque is held over the step, and held at the midpoint angle
        q + q̇ Δt/2 its impulse is second order in Δt (held at q it is first order, an error
        that no number of substeps removes)."""
        sp = self.springs
        joint_q, joint_qd = joint_positions(self.model, params, state)
        joint_q_mid = joint_q + 0.5 * dt * joint_qd
        return joint_q_mid, spring_torques(sp, joint_q_mid,
                                           design.get("spring.stiffness", sp.stiffness),
                                           design.get("spring.offset", sp.offset))

    def parameters_vjp(self, design: dict, g_params: dict) -> dict:
        """∂L/∂design from ∂L/∂params (entries of :data:`~sim_pbd.model.PARAMETERS`), the
        VJP of :meth:`parameters` at ``design`` (a renaming: it does not depend on it; the
        verb pairs with :meth:`parameters` as in sim_rigid)."""
        return {name: np.asarray(g_params[field], dtype=np.float64)
                for name, field in DESIGN_FIELDS.items() if field in g_params}

    def step(self, state: PBDState, action, design: dict, dt: float) -> PBDState:
        """Advance by ``dt`` [s]; pure."""
        params = self._stepped_params = self.parameters(design)
        if self.springs is not None:
            # the springs read the state's joint angles: check it before (the step checks
            # its inputs itself, once, where there are no springs)
            action = safety.check_step_inputs(self.model, state, action)
            action = action + self._spring_torques(state, design, params, float(dt))[1]
        return pbd_step.step(self.model, state, action, params, float(dt), **self.settings)

    def step_vjp(self, state: PBDState, action, design: dict, dt: float, g_next: PBDState):
        """(∂L/∂state, ∂L/∂action, ∂L/∂design) given ∂L/∂(next state)."""
        action = safety.check_step_inputs(self.model, state, action)
        n = self.model.link_count
        g_next = PBDState(*(np.zeros((n, width)) if g is None else np.asarray(g, np.float64)
                            for g, width in ((g_next.link_x, 3), (g_next.link_q, 4),
                                             (g_next.link_v, 3), (g_next.link_w, 3))))
        params = self.parameters(design)
        if self.springs is not None:
            joint_q_mid, tau = self._spring_torques(state, design, params, float(dt))
            action = action + tau
        g_state, g_action, g_params = pbd_step.step_vjp(
            self.model, state, action, params, float(dt), g_next, **self.settings)
        g_design = self.parameters_vjp(design, g_params)
        if self.springs is not None:  # the torques read the state's joint angles and rates
            sp = self.springs
            g_joint_q, g_design["spring.stiffness"], g_design["spring.offset"] = (
                spring_torques_vjp(sp, joint_q_mid, design.get("spring.stiffness", sp.stiffness),
                                   design.get("spring.offset", sp.offset), g_action))
            g_from_q, g_origins = joint_positions_vjp(self.model, params, state, g_joint_q,
                                                      0.5 * float(dt) * g_joint_q)
            g_state = tree_add(g_state, g_from_q)
            for name, value in self.parameters_vjp(design, g_origins).items():
                g_design[name] = g_design[name] + value
        return g_state, g_action, g_design

    def check_time_step(self, design: dict, dt: float) -> None:
        """Raise UnstableTimeStepError when the substeps do not resolve the fastest swing."""
        safety.check_time_step(self.model, self.parameters(design), dt,
                               substeps=self.settings["substeps"])

    def check_state(self, state: PBDState, step_index: int) -> None:
        """Raise SimulationError on NaN/inf or a joint that came apart."""
        safety.check_state(self.model, state, step_index, params=self._stepped_params,
                           tolerance=self.joint_tolerance)

    def render(self, state: PBDState, design: dict, *, width: int, height: int,
               action=None) -> np.ndarray:
        """One video frame, uint8 (height, width, 3)."""
        params = self.parameters(design)
        window = self.window
        if window is None:  # framed on the rest pose, so the camera does not move
            window = self._rest_window(params)
        return render_frame(self.model, state, width=width, height=height, params=params,
                            view=self.view, window=window)

    def render_sequence(self, states, design: dict, *, width: int, height: int,
                        actions=None) -> list[np.ndarray]:
        """Video frames of a motion, uint8 (height, width, 3) each, with the end effector's
        path drawn behind the robot; ``actions`` is not drawn."""
        params = self.parameters(design)
        window = self._rest_window(params) if self.window is None else self.window
        return render_frames(self.model, states, width=width, height=height, params=params,
                             view=self.view, window=window)

    def _rest_window(self, params: dict):
        link_x, link_q = forward_kinematics(self.model, params, self.model.joint_rest)
        rest = PBDState(link_x, link_q, np.zeros_like(link_x), np.zeros_like(link_x))
        return default_view(self.model, rest, params, view=self.view)
