"""``RigidSimulator``: the codesign Simulator protocol for articulated rigid robots in reduced
coordinates, integrated by BDF2 (SDIRK2 first step).

State: :class:`RigidState` (coordinates and rates, now and one step before). Action: one
value per actuated coordinate (the 1-DOF joints' not marked unactuated, in joint order): a
torque [N m] or force [N] per unit of the joint's gear (1 by default), or with
``actuation="position"`` a position target [rad or m] tracked by a PD servo.
Design parameters: ``link.mass``, ``link.com`` (centres of mass in the link frames),
``link.inertia``, ``joint.origin`` (joint origins in the parent's frame: the link lengths),
``joint.axis`` (the revolute and prismatic joints' axis directions in their joint frames,
normalized by the dynamics, so any nonzero vector is a unit axis) and ``joint.damping``, and
for a robot with contact points
``contact.point`` and the contact law's ``contact.stiffness``, ``contact.damping``,
``contact.friction``, ``contact.friction_stiffness`` and ``contact.area`` (each point's
force scale), each defaulting to the model's.
"""

from __future__ import annotations

import numpy as np

from codesign import DesignSpace, Parameter
from codesign.design import fields_from_design
from codesign.inertia import link_parameters
from codesign.simulator import Trajectory

from . import safety
from . import step as rigid_step
from .model import JOINT_TYPES, RigidModel
from .options import RigidOptions
from .render import default_view, render_frame
from .state import RigidState

__all__ = ["DESIGN_FIELDS", "RigidSimulator"]

_DEFAULT = RigidOptions()

DESIGN_FIELDS = {"link.mass": "link_mass", "link.com": "link_com",
                 "link.inertia": "link_inertia", "joint.origin": "joint_origin",
                 "joint.axis": "joint_axis", "joint.damping": "joint_damping",
                 "contact.point": "contact_point", "contact.stiffness": "contact_stiffness",
                 "contact.damping": "contact_damping", "contact.friction": "friction",
                 "contact.friction_stiffness": "friction_stiffness",
                 "contact.area": "contact_area"}
"""Design parameter name -> the model field (:data:`sim_rigid.model.PARAMETERS`) it replaces."""


class RigidSimulator:
    """A differentiable implicit simulator of one robot.

    Args:
        model: the robot.
        actuation, servo_stiffness, servo_damping: what the action holds and the PD servos'
            gains (see :class:`RigidOptions`).
        newton_tolerance, newton_iterations: the implicit solves' convergence test and
            budget.
        kernels: "numba" (compiled dynamics) or "numpy" (the reference they equal).
        view, window: what ``render`` shows (see :func:`render_frame`).
    """

    def __init__(self, model: RigidModel, *, actuation: str = _DEFAULT.actuation,
                 servo_stiffness: float = _DEFAULT.servo_stiffness,
                 servo_damping: float = _DEFAULT.servo_damping,
                 newton_tolerance: float = _DEFAULT.newton_tolerance,
                 newton_iterations: int = _DEFAULT.newton_iterations,
                 kernels: str = _DEFAULT.kernels, view: str = _DEFAULT.view, window=None):
        RigidOptions(actuation=actuation, servo_stiffness=servo_stiffness,  # checks them
                     servo_damping=servo_damping, newton_tolerance=newton_tolerance,
                     newton_iterations=newton_iterations, kernels=kernels, view=view)
        if actuation == "position" and np.any(model.joint_gear != 1.0):
            raise ValueError("joint gears scale torque actuation; with actuation: position "
                             "the action is a position target, so leave every joint's gear "
                             "at 1")
        self.model = model
        self.settings = dict(actuation=str(actuation), servo_stiffness=float(servo_stiffness),
                             servo_damping=float(servo_damping),
                             tolerance=float(newton_tolerance),
                             iterations=int(newton_iterations), kernels=str(kernels))
        self.view, self.window = view, window
        self.action_size = len(model.actuated)
        self._axis_joints = np.flatnonzero(model.joint_type <= JOINT_TYPES.index("prismatic"))
        self._design_space = self._build_design_space()
        # built once: parameters() runs on every step and VJP (the model is immutable)
        self._model_parameters = model.parameters()
        self._design_fields = {name: field for name, field in DESIGN_FIELDS.items()
                               if name in self._design_space}

    # -- contract -----------------------------------------------------------------------

    def design_space(self) -> DesignSpace:
        """Link masses, centres of mass and inertias, joint origins and axes, joint
        damping; contact points and coefficients where the robot has contact points."""
        return self._design_space

    def _build_design_space(self) -> DesignSpace:
        m = self.model
        n, d = m.link_count, m.coordinate_count
        length = max(float(np.max(np.linalg.norm(m.joint_origin, axis=1), initial=0.0)), 0.01)
        mass, inertia = link_parameters(m.link_mass, m.link_inertia, frame="link frame")
        return DesignSpace([
            mass,
            Parameter("link.com", (n, 3), m.link_com, unit="m", scale=length, entity="link",
                      doc="centre of mass in the link frame"),
            inertia,
            Parameter("joint.origin", (n, 3), m.joint_origin, unit="m", scale=length,
                      entity="joint", doc="joint origin in the parent link's frame"),
            # a direction, normalized by the dynamics: the box bounds each entry to [-1, 1]
            # so an optimizer's steps stay on the scale of a unit vector
            Parameter("joint.axis", (n, 3), m.joint_axis, lower=-1.0, upper=1.0,
                      entity="joint", doc="revolute or prismatic joint axis direction in the "
                      "joint frame (normalized; unused for fixed and free joints)"),
            RigidOptions.parameter("damping", name="joint.damping", shape=(d,),
                                   default=m.joint_damping, entity="coordinate",
                                   scale=max(float(np.mean(m.joint_damping)) if d else 0.0,
                                             0.01)),
            *self._contact_parameters(),
        ])

    def _contact_parameters(self) -> list[Parameter]:
        m = self.model
        if not len(m.contact_link):
            return []
        return [
            Parameter("contact.point", (len(m.contact_link), 3), m.contact_point, unit="m",
                      scale=max(float(np.abs(m.contact_point).max()), 0.01), entity="contact",
                      doc="contact point in its link's frame"),
            Parameter("contact.area", (len(m.contact_link),), m.contact_area, unit="m^2",
                      scale=max(float(np.abs(m.contact_area).max()), 1e-4), entity="contact",
                      doc="area weight scaling each contact point's force"),
            *(RigidOptions.parameter(option, name=name, shape=(), default=getattr(m, option),
                                     scale=max(abs(getattr(m, option)), 1e-3))
              for name, option in (("contact.stiffness", "contact_stiffness"),
                                   ("contact.damping", "contact_damping"),
                                   ("contact.friction", "friction"),
                                   ("contact.friction_stiffness", "friction_stiffness")))]

    def parameters(self, design: dict) -> dict[str, np.ndarray]:
        """The model's :data:`~sim_rigid.model.PARAMETERS` with the design's values in place
        (float64), the one place the model's values meet the design's."""
        params = fields_from_design(self._model_parameters, design, self._design_fields)
        if np.any(params["link_mass"] <= 0):
            raise ValueError("link.mass must be positive for every link")
        axis = params["joint_axis"]
        # squared lengths and one min: this runs on every step (NaN fails the test too)
        lengths = (axis * axis).sum(axis=1)[self._axis_joints]
        if not 0.0 < lengths.min(initial=1.0) < np.inf:
            bad = self._axis_joints[~((lengths > 0.0) & (lengths < np.inf))]
            raise ValueError(f"joint.axis of joint {self.model.joint_names[bad[0]]!r} is "
                             f"{axis[bad[0]].tolist()}: a revolute or "
                             f"prismatic joint needs a finite nonzero axis direction (it is "
                             f"normalized, so any length > 0 will do)")
        return params

    def initial_state(self, design: dict) -> RigidState:
        """The robot at rest in its rest pose (the description's ``initial`` values)."""
        rest = np.array(self.model.joint_rest, dtype=np.float64)
        return RigidState(joint_q=rest, joint_qd=np.zeros_like(rest),
                          joint_q_prev=rest.copy(), joint_qd_prev=np.zeros_like(rest),
                          step_count=np.asarray(0, dtype=np.int64))

    def initial_state_vjp(self, design: dict, g_state: RigidState) -> dict:
        """The initial state does not depend on the design: no gradient."""
        return {}

    def parameters_vjp(self, design: dict, g_params: dict) -> dict:
        """∂L/∂design from ∂L/∂params (entries of :data:`~sim_rigid.model.PARAMETERS`) of
        :func:`parameters` at ``design`` (a renaming, whatever the design; a wrapper such as
        :class:`~sim_rigid.cage_design.CageSimulator` has the same pair and needs it)."""
        return {name: np.asarray(g_params[field], dtype=np.float64)
                for name, field in self._design_fields.items() if field in g_params}

    def step(self, state: RigidState, action, design: dict, dt: float) -> RigidState:
        """Advance by ``dt`` [s]; pure."""
        action = safety.check_step_inputs(self.model, state, action)
        return rigid_step.step(self.model, state, action, self.parameters(design), float(dt),
                               **self.settings)

    def step_vjp(self, state: RigidState, action, design: dict, dt: float,
                 g_next: RigidState):
        """(∂L/∂state, ∂L/∂action, ∂L/∂design) given ∂L/∂(next state)."""
        action = safety.check_step_inputs(self.model, state, action)
        g_state, g_action, g_params = rigid_step.step_vjp(
            self.model, state, action, self.parameters(design), float(dt), g_next,
            **self.settings)
        return g_state, g_action, self.parameters_vjp(design, g_params)

    def simulate(self, state: RigidState, actions, design: dict, dt: float) -> Trajectory:
        """len(``actions``) steps from ``state`` in one call, ``actions`` (N, a): the N + 1
        states (the start first) and the solves :meth:`simulate_vjp` sweeps back through."""
        actions = safety.check_actions(self.model, state, actions)
        return rigid_step.simulate(self.model, state, actions, self.parameters(design),
                                   float(dt), **self.settings)

    def simulate_vjp(self, trajectory: Trajectory, actions, design: dict, dt: float,
                     g_states):
        """(∂L/∂(start state), ∂L/∂actions (N, a), ∂L/∂design) of :meth:`simulate`, given
        ∂L/∂(state i) taken at each of the N + 1 states directly (None for none)."""
        g_state, g_actions, g_params = rigid_step.simulate_vjp(
            self.model, trajectory, actions, self.parameters(design), float(dt), g_states,
            **self.settings)
        return g_state, g_actions, self.parameters_vjp(design, g_params)

    def check_time_step(self, design: dict, dt: float) -> None:
        """Raise UnstableTimeStepError unless dt is a positive finite number (the
        integrators are A-stable; a step too large shows as a failed Newton solve)."""
        safety.check_time_step(dt)

    def check_state(self, state: RigidState, step_index: int) -> None:
        """Raise SimulationError on NaN/inf or a free joint at its Euler singularity."""
        safety.check_state(self.model, state, step_index)

    def render(self, state: RigidState, design: dict, *, width: int, height: int,
               action=None) -> np.ndarray:
        """One video frame, uint8 (height, width, 3)."""
        params = self.parameters(design)
        window = self.window
        if window is None:  # framed on the rest pose, so the camera does not move
            window = default_view(self.model, params, self.model.joint_rest, view=self.view)
        return render_frame(self.model, state, params=params, width=width, height=height,
                            view=self.view, window=window)
