"""``VineSimulator``: the codesign Simulator protocol for vine robots.

State: :class:`VineState` (body poses and velocities). Action: the growth rate u [m/s],
shape (1,), to which the design's ``growth.offset`` is added. Design parameters:
``joint.stiffness`` and ``joint.damping`` per pin, ``contact.friction``, ``body.mass`` per
body and ``growth.offset``. One step solves one QP (see :mod:`sim_vine.qp`); its VJP
differentiates the QP's KKT conditions at the active set (see :mod:`sim_vine.step`).
"""

from __future__ import annotations

import dataclasses
import math
import weakref

import numpy as np

from codesign import DesignSpace, Parameter, SimulationError, UnstableTimeStepError

from ._kernels import model_arrays
from .constraints import joint_residual, row_layout
from .kinematics import tip_position
from .model import VineModel
from .options import VineOptions
from .qp import QPError, SolverSettings, VineQP
from .render import render_vine
from .state import VineState
from .step import StepParameters, step_backward, step_forward

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
    """

    action_size = 1

    def __init__(self, model: VineModel, *, settings: SolverSettings | None = None,
                 view=None, joint_tolerance: float = 1e-3, penetration_tolerance: float = 5e-3):
        self.model = model
        self.settings = settings or SolverSettings()
        self.layout = row_layout(model)
        self.qp = VineQP(model, self.layout, self.settings)
        self.arrays = model_arrays(model)
        self.view = None if view is None else tuple(float(x) for x in view)
        self.joint_tolerance = float(joint_tolerance)
        self.penetration_tolerance = float(penetration_tolerance)
        inside = model.penetrations(model.initial_configuration())
        if inside:
            point, obstacle, depth = inside[0]
            raise ValueError(
                f"the vine starts inside an obstacle: contact point {point} is {-depth:.4g} m "
                f"inside obstacle {obstacle} ({type(model.obstacles[obstacle]).__name__}); "
                "move the base or the obstacle, or change initial_angles")
        # step number of every live state this simulator produced, so that errors name the
        # step since initial_state also when a reverse sweep recomputes a segment from a
        # checkpoint: id(state) -> (weak reference, step number)
        self._step_numbers: dict[int, tuple[weakref.ref, int]] = {}
        self._design_space = self._build_design_space()
        self._design_names = self._design_space.names
        self._parameter_cache = None

    def __getstate__(self):
        """Pickle the description only; the OSQP solver is rebuilt (process executors)."""
        return {"model": self.model, "settings": self.settings, "view": self.view,
                "joint_tolerance": self.joint_tolerance,
                "penetration_tolerance": self.penetration_tolerance}

    def __setstate__(self, state):
        self.__init__(state["model"], settings=state["settings"], view=state["view"],
                      joint_tolerance=state["joint_tolerance"],
                      penetration_tolerance=state["penetration_tolerance"])

    # -- contract -----------------------------------------------------------------------

    def design_space(self) -> DesignSpace:
        """Pin stiffness and damping, friction, body masses and the growth-rate offset."""
        return self._design_space

    def _build_design_space(self) -> DesignSpace:
        m = self.model
        body_mass = m.total_mass / m.body_count
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
        ])

    def initial_state(self, design) -> VineState:
        """The straight (or ``initial_angles``-bent) vine at rest."""
        q = self.model.initial_configuration()
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

    def _parameters(self, design) -> tuple[StepParameters, float]:
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
        params = StepParameters(
            stiffness=np.asarray(checked["joint.stiffness"], dtype=np.float64),
            damping=np.asarray(checked["joint.damping"], dtype=np.float64),
            friction=float(checked["contact.friction"]),
            mass=np.asarray(checked["body.mass"], dtype=np.float64),
        )
        if np.any(params.mass <= 0):
            raise ValueError("body.mass must be positive for every body")
        if all(isinstance(value, np.ndarray) and value.dtype == np.float64
               for value in objects):  # so that in-place edits reach the cached arrays
            self._parameter_cache = (objects, params)
        return params, float(checked["growth.offset"])

    def _check_inputs(self, state: VineState, action, dt: float) -> float:
        n = self.model.body_count
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
        return float(action[0])

    def _rate(self, action_value: float, offset: float) -> float:
        rate = action_value + offset
        if not np.isfinite(rate):
            raise ValueError(f"the growth rate is not a number ({rate}); check the controller "
                             "output and growth.offset")
        if rate < 0:
            raise ValueError(f"the growth rate is negative ({rate:.4g} m/s): vine robots grow "
                             "by eversion and cannot shrink; bound the controller's output "
                             "at 0 or raise growth.offset")
        return rate

    def step(self, state: VineState, action, design, dt: float) -> VineState:
        """Advance by ``dt`` [s]: solve the step QP, then ``q' = q + Δt v'``."""
        params, offset = self._parameters(design)
        rate = self._rate(self._check_inputs(state, action, dt), offset)
        q = np.asarray(state.body_q, dtype=np.float64)
        v = np.asarray(state.body_qd, dtype=np.float64)
        try:
            q_next, v_next, _, _ = step_forward(self.arrays, self.layout, self.qp, q, v, rate,
                                                params, dt)
        except QPError as exc:
            raise SimulationError(f"{self._where(state, q, rate, dt, '')}: {exc}") from exc
        number = self.step_number(state)
        next_state = VineState(body_q=q_next, body_qd=v_next)
        return next_state if number is None else self._numbered(next_state, number + 1)

    def step_vjp(self, state: VineState, action, design, dt: float, g_next: VineState):
        """(∂L/∂state, ∂L/∂action, ∂L/∂design) given ∂L/∂next state."""
        params, offset = self._parameters(design)
        rate = self._rate(self._check_inputs(state, action, dt), offset)
        n = self.model.body_count
        g_q = np.zeros((n, 3)) if g_next.body_q is None else np.asarray(g_next.body_q, float)
        g_v = np.zeros((n, 3)) if g_next.body_qd is None else np.asarray(g_next.body_qd, float)
        q = np.asarray(state.body_q, dtype=np.float64)
        try:
            grad = step_backward(self.model, self.layout, self.qp, q,
                                 np.asarray(state.body_qd, dtype=np.float64), rate, params, dt,
                                 g_q, g_v)
        except QPError as exc:
            raise SimulationError(
                f"{self._where(state, q, rate, dt, ' (its gradient, in the reverse sweep)')}: "
                f"{exc}") from exc
        g_design = {
            "joint.stiffness": grad.stiffness,
            "joint.damping": grad.damping,
            "contact.friction": np.asarray(grad.friction),
            "body.mass": grad.mass,
            "growth.offset": np.asarray(grad.rate),
        }
        return VineState(body_q=grad.q, body_qd=grad.v), np.array([grad.rate]), g_design

    # -- optional hooks -----------------------------------------------------------------

    def check_time_step(self, design, dt: float) -> None:
        """Explicit springs are stable only below ``2/ω_max``; implicit ones for any dt."""
        if not (np.isfinite(dt) and dt > 0):
            raise UnstableTimeStepError(f"dt must be a positive number of seconds, got {dt!r}")
        if self.model.implicit_springs:
            return
        params, _ = self._parameters(design)
        inertia = params.mass * self.model.gyration**2
        omega = np.sqrt(4.0 * np.max(params.stiffness) / np.min(inertia))
        rate = 4.0 * np.max(params.damping) / np.min(inertia)
        limit = min(2.0 / omega if omega > 0 else np.inf, 2.0 / rate if rate > 0 else np.inf)
        if dt > limit:
            raise UnstableTimeStepError(
                f"dt = {dt:g} s is unstable with explicit springs (stiffest joint ω ≈ "
                f"{omega:.3g} rad/s); use dt <= {limit:.3g} s or implicit_springs: true")

    def check_state(self, state: VineState, step_index: int) -> None:
        """Raise :class:`SimulationError` for NaN, broken joints or deep penetration."""
        q = np.asarray(state.body_q)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(state.body_qd))):
            raise SimulationError(f"step {step_index}: the vine state holds NaN or inf")
        error = float(np.max(np.abs(joint_residual(self.model, q)), initial=0.0))
        if error > self.joint_tolerance:
            raise SimulationError(
                f"step {step_index}: joint constraints are violated by {error:.3g} m "
                f"(> {self.joint_tolerance:g} m); reduce dt or tighten the solver tolerances")
        inside = self.model.penetrations(q, tolerance=self.penetration_tolerance)
        if inside:
            point, obstacle, depth = min(inside, key=lambda item: item[2])
            raise SimulationError(
                f"step {step_index}: contact point {point} is {-depth:.3g} m inside obstacle "
                f"{obstacle}; reduce dt or the growth rate, or add contact points")

    def render(self, state: VineState, design, *, width: int = 640, height: int = 480,
               action=None):
        """An RGB frame (height, width, 3) uint8 of the vine, contacts and obstacles (the
        growth-rate ``action`` is not drawn)."""
        return render_vine(self.model, np.asarray(state.body_q), width=width, height=height,
                           view=self.view)
