"""Tied material parameters: one Young's modulus, Poisson's ratio and density per body part.

:class:`MPMSimulator` exposes material fields per particle (``particle.youngs_modulus`` of
shape (n,), ...). Identifying a material from a few trajectories, or designing one body's
density, needs a handful of scalars instead. :class:`TiedMaterialSimulator` wraps a simulator
and replaces the three per-particle fields by

- ``material.youngs_modulus`` [Pa], ``material.poissons_ratio`` [-], ``material.density``
  [kg/m^d], each of shape (k,),

where particle i takes entry ``tie_index[i]``. ``mode="uniform"`` ties every particle to one
value (k = 1); ``mode="group"`` gives each particle group present (ascending group numbers)
its own entry. Every other parameter of the wrapped simulator (``particle.volume``,
``geometry.scale``, ``initial.velocity``) passes through unchanged.

The expansion θ_particle = θ_tied[tie_index] is linear, so its VJP sums the per-particle
gradients of each tie: ∂L/∂θ_tied[j] = Σ_{i: tie_index[i] = j} ∂L/∂θ_particle[i].
"""

from __future__ import annotations

import numpy as np

from codesign import DesignSpace, Parameter

__all__ = ["TIE_MODES", "TIED_PARAMETERS", "TiedMaterialSimulator"]

TIE_MODES = ("uniform", "group")
"""How particles are tied: all to one value, or one value per particle group."""

TIED_PARAMETERS = {
    "material.youngs_modulus": "particle.youngs_modulus",
    "material.poissons_ratio": "particle.poissons_ratio",
    "material.density": "particle.density",
}
"""Tied parameter name -> the per-particle parameter it replaces."""


class TiedMaterialSimulator:
    """A simulator whose per-particle E, ν, ρ are tied to a few shared values.

    Args:
        inner: the wrapped simulator (an :class:`~sim_mpm.MPMSimulator` or a subclass); its
            ``model.particle_group`` defines the ties in ``"group"`` mode.
        mode: ``"uniform"`` (one value for every particle) or ``"group"`` (one per particle
            group present, in ascending group order; see :attr:`tie_groups`).

    The defaults of the tied parameters are the means of the wrapped defaults over each tie.
    """

    def __init__(self, inner, *, mode: str = "uniform"):
        if mode not in TIE_MODES:
            raise ValueError(f"unknown material tie mode {mode!r}; choose one of "
                             f"{', '.join(TIE_MODES)} (or use the per-particle simulator)")
        self.inner, self.mode = inner, mode
        groups = np.asarray(inner.model.particle_group, dtype=np.int64).reshape(-1)
        if mode == "uniform":
            self.tie_groups = [None]
            self.tie_index = np.zeros(len(groups), dtype=np.int64)
        else:
            present, self.tie_index = np.unique(groups, return_inverse=True)
            self.tie_groups = [int(g) for g in present]
        self.tie_count = len(self.tie_groups)
        self._counts = np.bincount(self.tie_index, minlength=self.tie_count).astype(np.float64)

    # -- pass-through --------------------------------------------------------------------

    @property
    def model(self):
        """The wrapped simulator's scene model."""
        return self.inner.model

    @property
    def action_size(self) -> int:
        """The wrapped simulator's action size."""
        return self.inner.action_size

    # -- design ---------------------------------------------------------------------------

    def design_space(self) -> DesignSpace:
        """The wrapped space with E, ν, ρ per tie (shape (k,)) instead of per particle."""
        inner = self.inner.design_space()
        entity = None if self.mode == "uniform" else "particle_group"
        tied = []
        for name, particle_name in TIED_PARAMETERS.items():
            p = inner[particle_name]
            default = np.bincount(self.tie_index, weights=p.default_array(),
                                  minlength=self.tie_count) / self._counts
            lower = float(np.max(p.lower_array()))
            upper = float(np.min(p.upper_array()))
            doc = p.doc.replace("per particle", "").strip()
            tied.append(Parameter(
                name, (self.tie_count,), default, lower=lower, upper=upper, unit=p.unit,
                scale=p.scale, entity=entity,
                doc=f"{doc}, one value per {'body' if self.mode == 'uniform' else 'group'}"))
        kept = [p for p in inner if p.name not in TIED_PARAMETERS.values()]
        return DesignSpace([*tied, *kept])

    def expand(self, design: dict) -> dict:
        """The wrapped simulator's design: tied values spread over their particles.

        Tied parameters absent from ``design`` take their defaults.
        """
        space = None
        out = {k: v for k, v in design.items() if k not in TIED_PARAMETERS}
        for name, particle_name in TIED_PARAMETERS.items():
            if name in design:
                value = np.asarray(design[name], dtype=np.float64)
            else:
                space = space or self.design_space()
                value = space[name].default_array()
            if value.shape != (self.tie_count,):
                raise ValueError(f"{name} must have shape ({self.tie_count},) (one value per "
                                 f"tie, mode {self.mode!r}), got {value.shape}")
            out[particle_name] = value[self.tie_index]
        return out

    def reduce_gradient(self, g_design: dict) -> dict:
        """Per-particle design gradients summed over each tie (the VJP of :meth:`expand`)."""
        out = {k: v for k, v in g_design.items() if k not in TIED_PARAMETERS.values()}
        for name, particle_name in TIED_PARAMETERS.items():
            if particle_name in g_design and g_design[particle_name] is not None:
                out[name] = np.bincount(self.tie_index,
                                        weights=np.asarray(g_design[particle_name],
                                                           dtype=np.float64).reshape(-1),
                                        minlength=self.tie_count)
        return out

    # -- the simulator protocol -----------------------------------------------------------

    def initial_state(self, design: dict):
        """The wrapped initial state (material does not enter it)."""
        return self.inner.initial_state(self.expand(design))

    def initial_state_vjp(self, design: dict, g_state) -> dict:
        """∂L/∂design through the initial state (tied parameters get none)."""
        return self.reduce_gradient(self.inner.initial_state_vjp(self.expand(design), g_state))

    def step(self, state, action, design: dict, dt: float):
        """One substep of the wrapped simulator with the expanded design; pure."""
        return self.inner.step(state, action, self.expand(design), dt)

    def step_vjp(self, state, action, design: dict, dt: float, g_next):
        """(∂L/∂state, ∂L/∂action, ∂L/∂design) with tied gradients summed per tie."""
        g_state, g_action, g_design = self.inner.step_vjp(state, action, self.expand(design),
                                                          dt, g_next)
        return g_state, g_action, self.reduce_gradient(g_design)

    def check_time_step(self, design: dict, dt: float) -> None:
        """The wrapped simulator's time-step check on the expanded design."""
        self.inner.check_time_step(self.expand(design), dt)

    def check_state(self, state, step_index: int) -> None:
        """The wrapped simulator's state check."""
        self.inner.check_state(state, step_index)

    def render(self, state, design: dict, *, width: int, height: int,
               action=None) -> np.ndarray:
        """The wrapped simulator's video frame, uint8 (height, width, 3)."""
        return self.inner.render(state, self.expand(design), width=width, height=height,
                                 action=action)
