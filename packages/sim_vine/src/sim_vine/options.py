"""Every option of the ``vine`` simulator, declared once (``codesign options vine`` lists them).

A YAML ``simulator: {name: vine, options: {...}}`` or a scene file sets these;
:func:`sim_vine.scene.make_simulator` takes them as keywords. ``stiffness``, ``damping``,
``rest_angle``, ``friction``, ``ground_friction`` and ``total_mass`` also give the defaults
and physical bounds of the design parameters ``joint.stiffness``, ``joint.damping``,
``joint.rest_angle``, ``contact.friction``, ``ground.friction`` and ``body.mass``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from codesign.options import Options, option

__all__ = ["GROWTH_MODES", "VineOptions"]

GROWTH_MODES = ("every_prismatic", "tip", "evert")


@dataclasses.dataclass(frozen=True, kw_only=True)
class VineOptions(Options):
    """The vine, its environment and the QP solver's settings."""

    scene: str | None = option(
        None, doc="scene YAML path or bundled scene name; its options fill in unset ones")
    bodies: int = option(10, lower=1, doc="number of rigid bodies N")
    length: float = option(0.2, unit="m", lower=1e-9, doc="initial vine length")
    total_mass: float = option(0.01, unit="kg", lower=1e-12,
                               doc="vine mass, split equally over the bodies")
    linear_density: float | None = option(
        None, unit="kg/m", lower=1e-12,
        doc="vine mass per length: the material that everts joins the pair's distal body, so "
            "body masses (and inertias m r²) grow with the everted length; unset: fixed "
            "masses from total_mass")
    gyration_radius: float | None = option(
        None, unit="m", lower=1e-12, doc="body radius of gyration (a slender rod's when unset)")
    base: list[float] = option([0.0, 0.0, 0.0], doc="base pose [x m, y m, angle rad]")
    stiffness: float | list[float] = option(
        0.05, unit="N m/rad", lower=0.0, doc="torsional spring stiffness K at each pin joint")
    damping: float | list[float] = option(
        0.002, unit="N m s/rad", lower=0.0, doc="torsional damping C at each pin joint")
    rest_angle: float | list[float] = option(
        0.0, unit="rad", doc="spring rest angle φ0 at each pin joint (τ = −K(φ − φ0) − Cφ̇): "
                             "the bend the vine keeps; 0 pulls it straight")
    friction: float = option(0.0, lower=0.0, upper=5.0,
                             doc="Coulomb friction coefficient at the contact points")
    gravity: list[float] = option([0.0, 0.0], unit="m/s^2", doc="gravity [gx, gy]")
    ground_friction: float | list[float] = option(
        0.0, unit="1/s", lower=0.0,
        doc="viscous friction c_g against the ground the vine lies on, a number or one per "
            "body: force −c_g m v and torque −c_g m r² ω on each body, integrated implicitly "
            "(stable for any dt); 0: none")
    growth: str = option("every_prismatic", choices=GROWTH_MODES,
                         doc="how the vine grows: every_prismatic (every prismatic joint "
                             "extends at an equal share of the rate), tip (only the last "
                             "one) or evert (bodies evert one after another at the tip, up "
                             "to max_length)")
    max_length: float | None = option(
        None, unit="m", lower=1e-9,
        doc="growth: evert: the vine's length with all its bodies everted (each body "
            "max_length / bodies long; length is the everted length at t = 0); required "
            "for evert, unused otherwise")
    contact: str | list[list[float]] = option(
        "pins", doc="contact points: pins, bodies (every body's distal end), along (points "
                    "along every body at most contact_gap apart) or a list of [body, offset m]")
    contact_gap: float | None = option(
        None, unit="m", lower=1e-6,
        doc="contact: along: the largest gap between neighbouring contact points on a body "
            "(unset: a quarter of a body)")
    obstacles: list[dict] = option([], doc="obstacle mappings (see sim_vine.obstacles)")
    initial_angles: float | list[float] = option(
        0.0, unit="rad", doc="pin angles at t = 0, a number or one per pin")
    check_initial_pose: bool = option(
        True, doc="refuse, when built, an initial_angles pose inside an obstacle; a fit that "
                  "starts from recorded poses sets false (its start poses are checked, and "
                  "this pose when initial_state uses it)")
    implicit_springs: bool = option(True, doc="implicit spring and damper torques")
    eps_abs: float = option(1e-4, lower=0.0, doc="OSQP absolute tolerance (finds the active "
                                                 "set; its KKT system is then solved exactly)")
    eps_rel: float = option(1e-4, lower=0.0, doc="OSQP relative tolerance")
    max_iter: int = option(10000, lower=1, doc="OSQP iteration limit per step")
    contact_smoothing: float = option(
        0.0, unit="J", lower=0.0,
        doc="relaxed contact complementarity κ = impulse × separation rate; 0: hard contact; "
            "> 0: every step smooth in its inputs (for fits whose gradients must hold across "
            "contact events)")
    view: list[float] | None = option(
        None, unit="m", doc="render window [x_min, x_max, y_min, y_max] (framed automatically)")
    tie: list[str] | None = option(
        None, doc="per-pin design parameters exposed as one scalar shared by every pin")
    base_dir: str | None = option(None, doc="set by the run: the experiment file's folder, "
                                            "where a relative scene path starts (default the "
                                            "working directory)")

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> VineOptions:
        """The scene file's options (``scene``), then ``values`` over them."""
        from .scene import load_scene  # the scene module builds simulators from options

        scene = values.get("scene")
        loaded = {} if scene is None else load_scene(scene, base_dir=values.get("base_dir"))
        return cls(**{**loaded, **values})
