"""Every option of the ``rigid`` simulator, declared once (``codesign options rigid`` lists them).

A YAML ``simulator: {name: rigid, options: {...}}`` sets these; :func:`sim_rigid.scene.build_model`
turns them into a :class:`~sim_rigid.model.RigidModel`. ``damping`` also gives the physical
bound :class:`~sim_rigid.model.RigidModel` checks its ``joint_damping`` against and the default
of :func:`sim_rigid.description.load_description`.
"""

from __future__ import annotations

import dataclasses

from codesign.options import Options, option

__all__ = ["ACTUATIONS", "DESIGN_SPACES", "KERNELS", "RigidOptions", "VIEWS"]

ACTUATIONS = ("torque", "position")
"""What the action holds per actuated coordinate: a joint torque [N m] or force [N], or a
position target [rad or m] a joint PD servo tracks (the paper's actuation)."""

DESIGN_SPACES = ("simulation", "cage")
"""What the design holds: the simulator's own parameters, or a cage-built finger's cage
parameters θ (:class:`~sim_rigid.cage_design.CageSimulator`)."""

KERNELS = ("numba", "numpy")
"""Dynamics implementations: compiled (numba) or the NumPy reference they equal."""

VIEWS = ("front", "side", "top")
"""Render projections: front (the y-z plane seen from +x), side (x-z seen from -y), top (x-y
seen from +z)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RigidOptions(Options):
    """The robot (a description), its actuation and the implicit integrator's settings."""

    robot: str | dict = option(
        "arm4", doc="robot description: a YAML file (relative to the experiment file's "
                    "folder), a bundled robot's name (arm4), the description itself "
                    "{links: [...], joints: [...]} (sim_rigid.description), or {finger: "
                    "{phalanges: 4, ...}}: a finger of the cage-based components "
                    "(sim_rigid.scene.finger_description), with optional links and joints "
                    "beside it (sim_rigid.scene.robot_description), or {gripper: {...}}: "
                    "the free-form gripper scene (sim_rigid.gripper_scene)")
    design_space: str = option(
        "simulation", choices=DESIGN_SPACES,
        doc="what the design section optimizes: simulation (the simulator's parameters: "
            "link.mass, link.inertia, joint.origin, contact.point, ...) or cage (a robot: "
            "{finger: ...}'s cage parameters length.<component>, width.<station>, "
            "height.tip, which set the finger's simulation parameters, or a robot: "
            "{gripper: ...}'s inner handles handles.left_finger, handles.right_finger; "
            "sim_rigid.cage_design)")
    initial_positions: dict[str, float] | list[float] = option(
        {}, unit="rad or m", doc="coordinates at t = 0 by name (a 1-DOF joint's name, a free "
                                 "joint's name.x ... name.rx), or one per coordinate; "
                                 "default the description's")
    gravity: list[float] = option([0.0, 0.0, -9.81], unit="m/s^2",
                                  doc="gravity [gx, gy, gz] in the world frame")
    damping: float | list[float] | None = option(
        None, unit="N m s/rad or N s/m", lower=0.0,
        doc="joint viscous damping, one value or one per coordinate (default the "
            "description's)")
    obstacles: list[dict] = option(
        [], doc="static obstacles the contact points touch, each {type: plane, point [m], "
                "normal}, {type: box, center [m], half_extents [m], rpy [rad]}, {type: "
                "sphere, center, radius}, {type: capsule, center, rpy, radius, half_length} "
                "or {type: mesh, center, rpy, vertices, faces, resolution} "
                "(sim_rigid.description.load_obstacles)")
    contact_stiffness: float = option(1.0e4, unit="N/m", lower=0.0,
                                      doc="normal stiffness kn of each contact point")
    contact_damping: float = option(1.0e3, unit="N s/m^2", lower=0.0,
                                    doc="normal damping: the force kd d ḋ grows with the "
                                        "penetration d (continuous at first contact)")
    contact_scale: float = option(
        1.0, lower=1e-6,
        doc="multiplies every contact force (each contact point's area weight): the "
            "continuation of the paper's Assemble task scales them 0.01, 0.1, 1 in stages")
    friction: float = option(0.5, lower=0.0, doc="Coulomb friction coefficient μ")
    friction_stiffness: float = option(
        1.0e3, unit="N s/m", lower=0.0,
        doc="tangential viscous stiffness kt below sliding: friction -kt v_t up to μ f_n")
    friction_sharpness: float = option(
        0.0, lower=0.0,
        doc="0: the hard stick-slip switch; p >= 2: the smooth friction -kt v_t (1 + r^p)^(-1/p), "
            "r = kt |v_t| / (μ f_n), for Newton's method where the switch makes it stall")
    actuation: str = option("torque", choices=ACTUATIONS,
                            doc="the action: joint torques, or position targets of PD servos")
    servo_stiffness: float = option(100.0, unit="N m/rad or N/m", lower=0.0,
                                    doc="PD servo gain on the position error (actuation: "
                                        "position)")
    servo_damping: float = option(5.0, unit="N m s/rad or N s/m", lower=0.0,
                                  doc="PD servo gain on the joint rate (actuation: position)")
    newton_tolerance: float = option(
        1e-10, lower=1e-15, upper=1e-3,
        doc="Newton converges when its update of the joint rates is at most this fraction "
            "of (1 + their largest magnitude)")
    newton_iterations: int = option(25, lower=1, upper=1000,
                                    doc="Newton iterations per implicit solve before the step "
                                        "fails with its residual")
    kernels: str = option("numba", choices=KERNELS,
                          doc="compiled dynamics kernels or the NumPy reference they equal")
    view: str = option("front", choices=VIEWS, doc="render projection")
    view_window: list[float] | None = option(
        None, unit="m", doc="render window [u_min, u_max, v_min, v_max] in the projection "
                            "plane (framed automatically)")
    base_dir: str | None = option(None, doc="set by the run: the experiment file's folder, "
                                            "where a relative robot path starts (default the "
                                            "working directory)")
