"""Every option of the ``mpm`` simulator, declared once (``codesign options mpm`` lists them).

A YAML ``simulator: {name: mpm, options: {...}}`` sets these; :func:`sim_mpm.scene.make_simulator`
takes them as keywords. The material options are also the defaults and physical bounds of the
design parameters ``particle.youngs_modulus``, ``particle.poissons_ratio`` and
``particle.density`` (see :meth:`sim_mpm.simulator.MPMSimulator.design_space`).
"""

from __future__ import annotations

import dataclasses

from codesign.options import Options, option

from .materials import MATERIALS
from .render import COLOR_MODES
from .tied import TIE_MODES

__all__ = ["MPMOptions"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class MPMOptions(Options):
    """Scene, material and solver options of an MLS-MPM simulator (shapes: see
    :mod:`sim_mpm.scene`)."""

    dim: int = option(2, choices=(2, 3), doc="spatial dimension")
    grid_resolution: int = option(64, lower=8, doc="grid cells per axis of the cubic domain")
    domain_size: float = option(1.0, unit="m", lower=1e-6, doc="edge of the cubic domain")
    gravity: list[float] | None = option(
        None, unit="m/s^2", doc="gravity vector of dim entries (default -9.8 along y)")
    material: str = option("corotated", choices=MATERIALS, doc="hyperelastic material model")
    incompressibility_exponent: int = option(
        0, lower=0, doc="p >= 2 adds the incompressibility term of exponent p; 0 none")
    youngs_modulus: float = option(
        10.0, unit="Pa", lower=1e-6,
        doc="Young's modulus E of every body (bodies may override); 2D is plane strain: the "
            "3D Lame parameters mu = E/(2(1+nu)), lambda = E nu/((1+nu)(1-2nu))")
    poissons_ratio: float = option(
        0.3, lower=1e-3, upper=0.49,
        doc="Poisson's ratio nu of every body (bodies may override); 2D is plane strain (a "
            "thin sheet in plane stress: E(1+2nu)/(1+nu)^2 and nu/(1+nu) instead)")
    density: float = option(1.0, unit="kg/m^dim", lower=1e-6,
                            doc="density rho of every body (bodies may override)")
    particle_spacing: float | None = option(
        None, unit="m", lower=1e-9, doc="particle lattice spacing (default dx / 2)")
    jitter: float = option(0.0, lower=0.0, upper=1.0,
                           doc="random particle offsets as a fraction of the spacing")
    seed: int = option(0, doc="seed of the jitter")
    bodies: list[dict] = option(
        [], doc="shapes sampled on the particle lattice (>= 1), each with optional group, "
                "actuator, youngs_modulus, poissons_ratio, density, velocity [m/s] (overrides "
                "initial_velocity), geometry_group, anchor (see sim_mpm.scene)")
    regions: list[dict] = option([], doc="boxes {lower, upper, group} regrouping particles")
    actuators: list[dict] = option([], doc="stress actuators {groups, axes, max_stress}")
    cables: list[dict] = option(
        [], doc="cable actuators {points | particles, stiffness, max_contraction}")
    boundaries: list[dict] = option([{"type": "walls"}],
                                    doc="grid boundaries, applied in order")
    initial_velocity: list[float] | None = option(
        None, unit="m/s", doc="velocity of every particle at t = 0, dim entries (a body's "
                              "velocity overrides it; the design's initial.velocity adds to it)")
    dtype: str = option("float64", choices=("float64", "float32"), doc="simulation precision")
    asset_dir: str | None = option(None, doc="folder of relative image and mesh paths, "
                                             "relative to base_dir")
    base_dir: str | None = option(None, doc="set by the run: the experiment file's folder, "
                                            "where relative paths start (default the "
                                            "working directory)")
    backend: str = option("numpy", choices=("numpy", "cupy"),
                          doc="array backend (cupy needs kernels: reference)")
    kernels: str = option("numba", choices=("numba", "reference"),
                          doc="compiled CPU kernels or the array-level reference")
    parallel: bool = option(False, doc="run the numba kernels on numba's threads")
    color_by: str = option("group", choices=COLOR_MODES,
                           doc="particle colors in videos: group, actuation or material")
    material_parameters: str = option(
        "particle", choices=("particle", *TIE_MODES),
        doc="material design parameters per particle, shared by all, or per group")
