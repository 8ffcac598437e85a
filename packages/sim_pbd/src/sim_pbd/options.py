"""Every option of the ``pbd`` simulator, declared once (``codesign options pbd`` lists them).

A YAML ``simulator: {name: pbd, options: {...}}`` sets these; :func:`sim_pbd.scene.build_model`
turns them into a :class:`~sim_pbd.model.PBDModel`. ``damping`` and ``compliance`` also give
the physical bounds :class:`~sim_pbd.model.PBDModel` checks its ``joint_damping`` and
``joint_compliance`` against, and the defaults of :func:`sim_pbd.urdf.load_urdf`.
"""

from __future__ import annotations

import dataclasses

from codesign.options import Options, option

__all__ = ["KERNELS", "PBDOptions", "SCHEMES", "SOLVERS", "VIEWS"]

SOLVERS = ("gauss_seidel", "jacobi")
"""Constraint projection orders: one constraint after another (Gauss-Seidel) or all from the
same positions, corrections averaged (Jacobi, the paper's)."""

SCHEMES = ("second_order", "first_order")
"""Time-stepping schemes (:mod:`sim_pbd.step`): ``second_order`` (half kicks, projections
along the substep's start, Cayley-consistent angular velocities, joint damping as a midpoint
damper in the projection loop) or ``first_order`` (Müller et al.'s XPBD substeps, the
paper's)."""

KERNELS = ("numba", "numpy")
"""Step implementations: compiled (numba, one call per step) or the NumPy reference."""

VIEWS = ("front", "side", "top")
"""Render projections: front (the y-z plane seen from +x), side (x-z seen from -y), top (x-y
seen from +z)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PBDOptions(Options):
    """The robot (a URDF), its environment and the XPBD solver's settings."""

    urdf: str = option("baxter", doc="URDF path (relative to the experiment file's folder) or "
                                     "bundled robot name: baxter, double_pendulum")
    base_link: str | None = option(
        None, doc="link fixed to the world (or floating), the world frame's origin; default "
                  "the URDF's root link")
    joints: list[str] | None = option(
        None, doc="movable joints kept (a chain, e.g. Baxter's left arm); the others are "
                  "frozen at their initial position; default every movable joint")
    floating_base: bool = option(False, doc="the base link moves freely (no joint to the "
                                            "world)")
    initial_positions: dict[str, float] | list[float] = option(
        {}, unit="rad or m", doc="joint positions at t = 0 by joint name, or one per kept "
                                 "joint; unnamed joints start (and frozen joints stay) at 0")
    gravity: list[float] = option([0.0, 0.0, -9.81], unit="m/s^2",
                                  doc="gravity [gx, gy, gz] in the world frame")
    substeps: int = option(100, lower=1, upper=10000,
                           doc="XPBD substeps (predict, project, update) inside one step; "
                               "the default keeps Baxter's arm within 1e-3 rad of Pinocchio "
                               "over 2 s at dt 0.01 s (10 x 2 is 10x faster, 4e-2 rad)")
    iterations: int = option(4, lower=1, upper=1000,
                             doc="constraint projection sweeps per substep")
    solver: str = option("gauss_seidel", choices=SOLVERS, doc="constraint projection order")
    scheme: str = option("second_order", choices=SCHEMES,
                         doc="time-stepping scheme: second_order, or the paper's first_order "
                             "XPBD")
    kernels: str = option("numba", choices=KERNELS,
                          doc="compiled step kernels or the NumPy reference they equal")
    compliance: float = option(0.0, unit="m/N or rad/(N m)", lower=0.0,
                               doc="XPBD compliance (inverse stiffness) of every joint "
                                   "constraint; 0 is rigid")
    joint_limits: bool = option(True, doc="enforce the URDF's joint position limits")
    damping: float | list[float] | None = option(
        None, unit="N m s/rad or N s/m", lower=0.0,
        doc="joint viscous damping, one value or one per joint (default the URDF's)")
    springs: list[dict] = option(
        [], doc="joint-space springs, each {joint, stiffness N/m, rest_length m, lever_parent "
                "m, lever_child m, angle rad, offset rad} (sim_pbd.springs, the paper's Eq. 31)")
    view: str = option("front", choices=VIEWS, doc="render projection")
    view_window: list[float] | None = option(
        None, unit="m", doc="render window [u_min, u_max, v_min, v_max] in the projection "
                            "plane (framed automatically)")
    base_dir: str | None = option(None, doc="set by the run: the experiment file's folder, "
                                            "where a relative urdf path starts (default the "
                                            "working directory)")
