"""``MPMSimulator``: the MLS-MPM scene behind the codesign Simulator protocol."""

from __future__ import annotations

import functools

import numpy as np

from codesign import DesignSpace, Parameter
from codesign.backend import get_array_module, to_host

from . import safety
from . import step as reference
from .model import MPMModel
from .options import MPMOptions
from .render import render_frame
from .state import MPMState

__all__ = ["MPMSimulator", "PARTICLE_PARAMETERS"]

PARTICLE_PARAMETERS = {
    "particle.youngs_modulus": "youngs_modulus",
    "particle.poissons_ratio": "poissons_ratio",
    "particle.density": "density",
    "particle.volume": "volume",
}


class MPMSimulator:
    """Differentiable MLS-MPM (ChainQueen) for one scene.

    Design parameters: ``particle.youngs_modulus`` [Pa], ``particle.poissons_ratio``,
    ``particle.density`` [kg/m^d], ``particle.volume`` [m^d] (each shape (n,); mass =
    density · volume), ``geometry.scale`` (n_groups, d) scaling rest positions per group and
    axis about the group's anchor, ``initial.velocity`` [m/s] (d,) added to every particle's
    initial velocity. Action: stress signals then cable signals (see :mod:`.actuators`).

    Args:
        model: the scene (:func:`sim_mpm.model.build_model`).
        backend: "numpy" or "cupy" (the array-level reference runs on either).
        kernels: "numba" (compiled CPU kernels, NumPy backend only) or "reference".
        parallel: with numba kernels, run them on numba's threads (worth it on machines with
            several idle cores; much slower when other processes compete for the cores, see
            :mod:`sim_mpm.kernels`).
        color_by: how :meth:`render` colors particles: "group", "actuation" or "material".
        elastic_courant, velocity_courant: constants of :meth:`check_time_step`.
    """

    def __init__(self, model: MPMModel, *, backend: str = "numpy", kernels: str = "numba",
                 parallel: bool = False, color_by: str = "group",
                 elastic_courant: float = safety.ELASTIC_COURANT,
                 velocity_courant: float = safety.VELOCITY_COURANT):
        MPMOptions(backend=backend, kernels=kernels, color_by=color_by)  # checks the choices
        self.model = model
        self._choices = {"backend": backend, "kernels": kernels, "parallel": parallel,
                         "color_by": color_by, "elastic_courant": elastic_courant,
                         "velocity_courant": velocity_courant}
        self.xp = get_array_module(backend)
        if kernels == "numba" and self.xp is not np:
            raise ValueError("numba kernels run on the CPU; use kernels='reference' with "
                             "backend='cupy'")
        if kernels == "numba":
            from . import kernels as numba_kernels

            self._step = functools.partial(numba_kernels.step, parallel=parallel)
            self._step_vjp = functools.partial(numba_kernels.step_vjp, parallel=parallel)
        else:
            self._step, self._step_vjp = reference.step, reference.step_vjp
        self.kernels = kernels
        self._constants = reference.step_constants(model, self.xp)
        self.color_by = color_by
        self.elastic_courant = elastic_courant
        self.velocity_courant = velocity_courant

    def __reduce__(self):
        """Pickle the model and the constructor's choices; the array module and kernels are
        looked up again where it is unpickled (process and Dask executors)."""
        return functools.partial(type(self), **self._choices), (self.model,)

    @property
    def action_size(self) -> int:
        """Stress actuators plus cables."""
        return self.model.action_size

    def design_space(self) -> DesignSpace:
        """Per-particle material fields, per-group geometry scale, initial velocity."""
        m = self.model
        n, d = m.particle_count, m.dim

        def material(field: str, scale: float) -> Parameter:
            return MPMOptions.parameter(field, name=f"particle.{field}", shape=(n,),
                                        default=getattr(m, field), scale=scale,
                                        entity="particle")

        return DesignSpace([
            material("youngs_modulus", float(np.mean(m.youngs_modulus))),
            material("poissons_ratio", 0.1),
            material("density", float(np.mean(m.density))),
            Parameter("particle.volume", (n,), m.volume, lower=1e-12, unit=f"m^{d}",
                      scale=float(np.mean(m.volume)), entity="particle",
                      doc="volume V per particle"),
            Parameter("geometry.scale", (m.geometry_group_count, d), 1.0, lower=1e-2,
                      upper=1e2, scale=1.0, entity="geometry_group",
                      doc="per-group, per-axis scale of rest positions about the group anchor"),
            Parameter("initial.velocity", (d,), 0.0, unit="m/s", scale=1.0,
                      doc="uniform velocity added to every particle's initial velocity"),
        ])

    def _put(self, array):
        return self.xp.asarray(np.asarray(to_host(array), dtype=self.model.dtype))

    def particle_parameters(self, design: dict) -> dict:
        """Per-particle ``youngs_modulus`` [Pa], ``poissons_ratio``, ``density`` [kg/m^d] and
        ``volume`` [m^d] from ``design`` (the model's where absent): float64 host arrays,
        shape (n,). The one place the model's defaults meet the design."""
        m = self.model
        return {field: np.asarray(to_host(design.get(name, getattr(m, field))), dtype=np.float64)
                for name, field in PARTICLE_PARAMETERS.items()}

    def initial_state(self, design: dict) -> MPMState:
        """Scaled rest positions, rest velocities plus ``initial.velocity``, F = I, C = 0."""
        m = self.model
        scale = np.asarray(design.get("geometry.scale", 1.0), dtype=np.float64)
        scale = np.broadcast_to(scale, (m.geometry_group_count, m.dim))
        group = m.particle_geometry_group
        anchor = m.geometry_anchor[group]
        x = anchor + scale[group] * (m.particle_rest_x - anchor)
        v = m.particle_rest_v + np.asarray(design.get("initial.velocity", 0.0))
        n, d = m.particle_count, m.dim
        F = np.broadcast_to(np.eye(d), (n, d, d))
        return MPMState(self._put(x), self._put(v), self._put(F), self._put(np.zeros((n, d, d))))

    def initial_state_vjp(self, design: dict, g_state: MPMState) -> dict:
        """∂L/∂geometry.scale and ∂L/∂initial.velocity through :meth:`initial_state`."""
        m = self.model
        out = {}
        if g_state.particle_x is not None:
            g_x = to_host(g_state.particle_x).astype(np.float64)
            group = m.particle_geometry_group
            lever = m.particle_rest_x - m.geometry_anchor[group]
            g_scale = np.zeros((m.geometry_group_count, m.dim))
            np.add.at(g_scale, group, g_x * lever)
            out["geometry.scale"] = g_scale
        if g_state.particle_v is not None:
            out["initial.velocity"] = to_host(g_state.particle_v).astype(np.float64).sum(axis=0)
        return out

    def _check_action(self, action):
        action = np.asarray(to_host(action), dtype=np.float64)
        if action.shape != (self.action_size,):
            raise ValueError(f"action must have shape ({self.action_size},) (stress signals then "
                             f"cable signals), got {action.shape}")
        return action

    def _step_parameters(self, design: dict) -> dict:
        """:meth:`particle_parameters` as the substep takes them: the numba kernels read the
        float64 host arrays in the model's precision (a conversion per call cost as much as
        a small scene's substep), the array-level reference takes them on its backend."""
        params = self.particle_parameters(design)
        if self.kernels == "numba":
            return params
        return {field: self._put(value) for field, value in params.items()}

    def step(self, state: MPMState, action, design: dict, dt: float) -> MPMState:
        """One MLS-MPM substep of ``dt`` [s]; pure."""
        return self._step(self._constants, state, self._check_action(action),
                          self._step_parameters(design), float(dt))

    def step_vjp(self, state: MPMState, action, design: dict, dt: float, g_next: MPMState):
        """(∂L/∂state, ∂L/∂action, ∂L/∂design) given ∂L/∂(next state)."""
        xp, dtype = self.xp, self.model.dtype
        fields = (g_next.particle_x, g_next.particle_v, g_next.particle_F, g_next.particle_C)
        if not all(isinstance(g, xp.ndarray) and g.dtype == dtype for g in fields):
            g_next = MPMState(*(xp.zeros_like(s) if g is None else xp.asarray(g, dtype=dtype)
                                for s, g in zip((state.particle_x, state.particle_v,
                                                 state.particle_F, state.particle_C), fields,
                                                strict=True)))
        g_state, g_action, g_params = self._step_vjp(
            self._constants, state, self._check_action(action), self._step_parameters(design),
            float(dt), g_next)
        g_design = {name: np.asarray(to_host(g_params[field]), dtype=np.float64)
                    for name, field in PARTICLE_PARAMETERS.items()}
        return g_state, to_host(g_action).astype(np.float64), g_design

    def render(self, state, design, *, width: int, height: int, action=None) -> np.ndarray:
        """One video frame, uint8 (height, width, 3); ``action`` (the stress and cable
        signals applied from this state) colors actuators when ``color_by`` is
        "actuation"."""
        return render_frame(self.model, state, width=width, height=height,
                            color_by=self.color_by, action=action,
                            youngs_modulus=self.particle_parameters(design)["youngs_modulus"])

    def check_time_step(self, design: dict, dt: float) -> None:
        """Raise codesign.UnstableTimeStepError, naming the largest safe Δt, if dt is unsafe."""
        safety.check_time_step(self.model, self.particle_parameters(design),
                               self.initial_state(design).particle_v, dt,
                               elastic_courant=self.elastic_courant,
                               velocity_courant=self.velocity_courant)

    def check_state(self, state: MPMState, step_index: int) -> None:
        """Raise codesign.SimulationError on NaN/inf or particles leaving the grid."""
        safety.check_state(self.model, state, step_index)
