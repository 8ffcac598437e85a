"""``VineSimulator``: the codesign Simulator protocol for vine robots.

State: :class:`VineState` (body poses and velocities). Action: the growth rate u [m/s],
shape (1,), to which the design's ``growth.offset`` is added. Design parameters:
``joint.stiffness`` and ``joint.damping`` per pin, ``contact.friction``, ``body.mass`` per
body, ``growth.offset``, ``joint.rest_angle`` per pin and ``ground.friction`` per body. One
step solves one QP (see :mod:`sim_vine.qp`); its VJP differentiates the QP's KKT conditions
at the active set (see :mod:`sim_vine.step`).
"""

from __future__ import annotations

import dataclasses
import functools
import weakref

import numpy as np

from codesign import DesignSpace, Parameter, SimulationError

from . import safety
from . import step as vine_step
from ._kernels import model_arrays
from .constraints import row_layout
from .everted_mass import (
    everted_masses,
    everted_masses_vjp,
    gyration_squares,
    inertias_grow,
    masses_grow,
)
from .kinematics import tip_position
from .model import VineModel
from .options import VineOptions
from .qp import QPError, SolverSettings, VineQP
from .render import render_frame
from .state import VineState

__all__ = ["VineSimulator"]


class VineSimulator:
    """A differentiable vine robot simulator (one OSQP instance, reused every step).

    Args:
        model: the vine and its environment.
        settings: QP solver settings.
        view: world rectangle ``(x_min, x_max, y_min, y_max)`` [m] for ``render``;
            ``None`` frames the obstacles and the vine's reach.
        joint_tolerance: largest joint constraint error [m] ``check_state`` accepts.
        penetration_tolerance: deepest contact-point penetration [m] ``check_state`` accepts.
        check_initial_pose: refuse the model's ``initial_angles`` pose inside an obstacle
            here; when False (a fit that starts from recorded poses), ``initial_state``
            refuses it only if it is used.
    """

    action_size = 1

    def __init__(self, model: VineModel, *, settings: SolverSettings | None = None,
                 view=None, joint_tolerance: float = 1e-3, penetration_tolerance: float = 5e-3,
                 check_initial_pose: bool = True):
        self.model = model
        self.settings = settings or SolverSettings()
        self.layout = row_layout(model)
        self.qp = VineQP(model, self.layout, self.settings)
        self.arrays = model_arrays(model)
        self.view = None if view is None else tuple(float(x) for x in view)
        self.joint_tolerance = float(joint_tolerance)
        self.penetration_tolerance = float(penetration_tolerance)
        self.check_initial_pose = bool(check_initial_pose)
        if self.check_initial_pose:
            safety.check_start(model)
        # step number of every live state this simulator produced, so that errors name the
        # step since initial_state also when a reverse sweep recomputes a segment from a
        # checkpoint: id(state) -> (weak reference, step number)
        self._step_numbers: dict[int, tuple[weakref.ref, int]] = {}
        self._design_space = self._build_design_space()
        self._design_names = self._design_space.names
        self._parameter_cache = None

    def __reduce__(self):
        """Pickle the description only; the OSQP solver is rebuilt (process executors)."""
        return functools.partial(type(self), settings=self.settings, view=self.view,
                                 joint_tolerance=self.joint_tolerance,
                                 penetration_tolerance=self.penetration_tolerance,
                                 check_initial_pose=self.check_initial_pose), (self.model,)

    # -- contract -----------------------------------------------------------------------

    def design_space(self) -> DesignSpace:
        """Pin stiffness and damping, friction, body masses, the growth-rate offset, the
        pins' rest angles and the bodies' ground friction."""
        return self._design_space

    def _build_design_space(self) -> DesignSpace:
        m = self.model
        body_mass = m.body_mass
        return DesignSpace([
            VineOptions.parameter("stiffness", name="joint.stiffness", shape=(m.pin_count,),
                                  default=m.stiffness, entity="pin",
                                  scale=max(float(np.mean(m.stiffness)), 1e-6)),
            VineOptions.parameter("damping", name="joint.damping", shape=(m.pin_count,),
                                  default=m.damping, entity="pin",
                                  scale=max(float(np.mean(m.damping)), 1e-6)),
            VineOptions.parameter("friction", name="contact.friction", shape=(),
                                  default=m.friction, scale=0.1),
            VineOptions.parameter("total_mass", name="body.mass", shape=(m.body_count,),
                                  default=body_mass, scale=body_mass, entity="body",
                                  doc="mass of each body"),
            Parameter("growth.offset", (), 0.0, unit="m/s", scale=0.01,
                      doc="added to the growth-rate action (a calibration offset)"),
            VineOptions.parameter("rest_angle", name="joint.rest_angle", shape=(m.pin_count,),
                                  default=m.rest_angle, entity="pin", scale=0.1),
            VineOptions.parameter("ground_friction", name="ground.friction",
                                  shape=(m.body_count,), default=m.ground_friction,
                                  entity="body",
                                  scale=max(float(np.mean(m.ground_friction)), 1.0)),
        ])

    def initial_state(self, design) -> VineState:
        """The straight (or ``initial_angles``-bent) vine at rest."""
        q = self.model.initial_configuration()
        if not self.check_initial_pose:  # not checked when built: it is used now
            safety.check_start(self.model, q)
        return self._numbered(VineState(body_q=q, body_qd=np.zeros_like(q)), 0)

    def initial_state_vjp(self, design, g_state) -> dict:
        """The initial state does not depend on the design."""
        return {}

    def _numbered(self, state: VineState, number: int) -> VineState:
        key, numbers = id(state), self._step_numbers

        def forget(reference):
            if numbers.get(key, (None,))[0] is reference:
                del numbers[key]

        numbers[key] = (weakref.ref(state, forget), number)
        return state

    def start_from(self, state: VineState) -> VineState:
        """A copy of ``state`` that this simulator counts as step 0 (in error messages)."""
        return self._numbered(VineState(body_q=np.array(state.body_q, dtype=np.float64),
                                        body_qd=np.array(state.body_qd, dtype=np.float64)), 0)

    def step_number(self, state) -> int | None:
        """Steps from ``initial_state`` to ``state``, or None for a state made elsewhere."""
        entry = self._step_numbers.get(id(state))
        return entry[1] if entry is not None and entry[0]() is state else None

    def _where(self, state, q, rate: float, dt: float, sweep: str) -> str:
        number = self.step_number(state)
        step = ("a step from a state not made by this simulator" if number is None
                else f"step {number + 1} after initial_state")
        tip = tip_position(self.model, q)
        return (f"{step}{sweep} (tip at ({tip[0]:.4f}, {tip[1]:.4f}) m, growth rate "
                f"{rate:.4g} m/s, dt {dt:g} s)")

    def _parameters(self, design) -> tuple[vine_step.StepParameters, float]:
        objects = [design.get(name) for name in self._design_names]
        cached = self._parameter_cache
        if (cached is not None and len(design) == len(objects)
                and all(a is b for a, b in zip(objects, cached[0], strict=True))):
            # the same arrays as last step (a rollout): skip re-validating them
            params, friction = cached[1], float(objects[2])
            if friction != params.friction:
                params = dataclasses.replace(params, friction=friction)
            return params, float(objects[4])
        space = self.design_space()
        values = [np.asarray(design.get(p.name), dtype=np.float64) if p.name in design
                  else None for p in space]
        fine = len(design) == len(values) and all(
            v is not None and v.shape == p.shape for v, p in zip(values, space, strict=True))
        if fine and np.isfinite(sum(float(np.sum(v)) for v in values)):
            checked = {p.name: v for p, v in zip(space, values, strict=True)}
        else:  # the full check names what is wrong
            checked = space.check(design)
        params = vine_step.StepParameters(
            stiffness=np.asarray(checked["joint.stiffness"], dtype=np.float64),
            damping=np.asarray(checked["joint.damping"], dtype=np.float64),
            rest_angle=np.asarray(checked["joint.rest_angle"], dtype=np.float64),
            friction=float(checked["contact.friction"]),
            mass=np.asarray(checked["body.mass"], dtype=np.float64),
            ground_friction=np.asarray(checked["ground.friction"], dtype=np.float64),
        )
        if np.any(params.mass <= 0):
            raise ValueError("body.mass must be positive for every body")
        if all(isinstance(value, np.ndarray) and value.dtype == np.float64
               for value in objects):  # so that in-place edits reach the cached arrays
            self._parameter_cache = (objects, params)
        return params, float(checked["growth.offset"])

    def step(self, state: VineState, action, design, dt: float) -> VineState:
        """Advance by ``dt`` [s]: solve the step QP, then ``q' = q + Δt v'``."""
        params, offset = self._parameters(design)
        rate = safety.check_step_inputs(self.model, state, action, dt, offset=offset)
        q = np.asarray(state.body_q, dtype=np.float64)
        v = np.asarray(state.body_qd, dtype=np.float64)
        params = self._step_masses(params, q)
        try:
            q_next, v_next, _, _ = vine_step.step(self.arrays, self.layout, self.qp, q, v, rate,
                                                  params, dt)
        except QPError as exc:
            raise SimulationError(f"{self._where(state, q, rate, dt, '')}: {exc}") from exc
        number = self.step_number(state)
        next_state = VineState(body_q=q_next, body_qd=v_next)
        return next_state if number is None else self._numbered(next_state, number + 1)

    def step_vjp(self, state: VineState, action, design, dt: float, g_next: VineState):
        """(∂L/∂state, ∂L/∂action, ∂L/∂design) given ∂L/∂next state."""
        params, offset = self._parameters(design)
        rate = safety.check_step_inputs(self.model, state, action, dt, offset=offset)
        n = self.model.body_count
        g_q = np.zeros((n, 3)) if g_next.body_q is None else np.asarray(g_next.body_q, float)
        g_v = np.zeros((n, 3)) if g_next.body_qd is None else np.asarray(g_next.body_qd, float)
        q = np.asarray(state.body_q, dtype=np.float64)
        try:
            grad = vine_step.step_vjp(self.arrays, self.layout, self.qp, q,
                                      np.asarray(state.body_qd, dtype=np.float64), rate,
                                      self._step_masses(params, q), dt, g_q, g_v)
        except QPError as exc:
            raise SimulationError(
                f"{self._where(state, q, rate, dt, ' (its gradient, in the reverse sweep)')}: "
                f"{exc}") from exc
        g_mass, g_state_q = grad.mass, grad.q
        if masses_grow(self.model):  # and their inertias' radii of gyration, if they grow
            g_mass, g_q_masses = everted_masses_vjp(self.model, params.mass, q, grad.mass,
                                                    g_gyration_sq=grad.gyration_sq)
            g_state_q = g_state_q + g_q_masses
        g_design = {
            "joint.stiffness": grad.stiffness,
            "joint.damping": grad.damping,
            "contact.friction": np.asarray(grad.friction),
            "body.mass": g_mass,
            "growth.offset": np.asarray(grad.rate),
            "joint.rest_angle": grad.rest_angle,
            "ground.friction": grad.ground_friction,
        }
        return VineState(body_q=g_state_q, body_qd=grad.v), np.array([grad.rate]), g_design

    def _step_masses(self, params: vine_step.StepParameters, q) -> vine_step.StepParameters:
        """``params`` with the masses at poses ``q`` when they grow with the everted length,
        and the inertias' radii of gyration when those grow too."""
        if not masses_grow(self.model):
            return params
        return dataclasses.replace(
            params, mass=everted_masses(self.model, params.mass, q),
            gyration_sq=gyration_squares(self.model, q) if inertias_grow(self.model) else None)

    # -- optional hooks -----------------------------------------------------------------

    def check_time_step(self, design, dt: float) -> None:
        """Raise codesign.UnstableTimeStepError, naming the largest safe Δt, if dt is unsafe
        (explicit springs only; implicit ones are stable for any dt)."""
        safety.check_time_step(self.model, self._parameters(design)[0], dt)

    def check_state(self, state: VineState, step_index: int) -> None:
        """Raise codesign.SimulationError for NaN, broken joints or deep penetration."""
        safety.check_state(self.model, state, step_index, joint_tolerance=self.joint_tolerance,
                           penetration_tolerance=self.penetration_tolerance)

    def render(self, state: VineState, design, *, width: int = 640, height: int = 480,
               action=None):
        """An RGB frame (height, width, 3) uint8 of the vine, contacts and obstacles (the
        growth-rate ``action`` is not drawn)."""
        return render_frame(self.model, state, width=width, height=height, view=self.view)
