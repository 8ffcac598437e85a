"""Tied material parameters: one Young's modulus, Poisson's ratio and density per body part.

:class:`TiedMaterialSimulator` is the core's :class:`~codesign.tying.TiedSimulator` replacing
the per-particle fields of :class:`MPMSimulator` by ``material.youngs_modulus`` [Pa],
``material.poissons_ratio`` [-] and ``material.density`` [kg/m^d] of shape (k,): one value
for every particle (``mode="uniform"``, k = 1) or one per particle group present, in
ascending group order (``"group"``). Every other parameter passes through unchanged.
"""

from __future__ import annotations

import numpy as np

from codesign.tying import Tie, TiedSimulator

__all__ = ["TIE_MODES", "TIED_PARAMETERS", "TiedMaterialSimulator"]

TIE_MODES = ("uniform", "group")
"""How particles are tied: all to one value, or one value per particle group."""

TIED_PARAMETERS = {
    "material.youngs_modulus": "particle.youngs_modulus",
    "material.poissons_ratio": "particle.poissons_ratio",
    "material.density": "particle.density",
}
"""Tied parameter name -> the per-particle parameter it replaces."""


class TiedMaterialSimulator(TiedSimulator):
    """A simulator whose per-particle E, ν, ρ are tied to a few shared values.

    Args:
        inner: the wrapped simulator (an :class:`~sim_mpm.MPMSimulator` or a subclass); its
            ``model.particle_group`` defines the ties in ``"group"`` mode.
        mode: ``"uniform"`` (one value for every particle) or ``"group"`` (one per particle
            group present, in ascending group order; see :attr:`tie_groups`).
    """

    def __init__(self, inner, *, mode: str = "uniform"):
        if mode not in TIE_MODES:
            raise ValueError(f"unknown material tie mode {mode!r}; choose one of "
                             f"{', '.join(TIE_MODES)} (or use the per-particle simulator)")
        groups = np.asarray(inner.model.particle_group, dtype=np.int64).reshape(-1)
        uniform = mode == "uniform"
        super().__init__(inner, ties=[
            Tie(source, name=name, groups=np.zeros_like(groups) if uniform else groups,
                entity=None if uniform else "particle_group")
            for name, source in TIED_PARAMETERS.items()])
        self.mode = mode
        self.tie_groups = [None] if uniform else self.groupings["material.density"].labels
