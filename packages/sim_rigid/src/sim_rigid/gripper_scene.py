"""The free-form gripper scene (Xu et al. 2021, Section IV-C and appendix, "Free-form
Gripper"): a parallel gripper of two free-form cube fingers (:mod:`sim_rigid.freeform`)
grasps a diamond-like object from the floor, lifts it and shakes it along a predefined,
fixed motion.

- :func:`diamond_mesh`: the object, a gem standing on its table (a flat regular polygon on
  the floor), its crown widening to the girdle, its pavilion narrowing to the culet, a
  point on top; a closed, outward triangle mesh;
- :func:`gripper_description` (``robot: {gripper: {...}}``): the palm on a slide along x
  (``shake``) and one along z (``lift``) above the floor, the two fingers on slides along
  y that close towards each other (``left_slide``, ``right_slide``: positive closes), and
  the diamond on a free joint (``diamond``) standing on the floor between the fingers, with
  its mesh as a contact shape and its table and girdle corners as contact points against
  the floor;
- :class:`GraspLiftShake` (the controller ``grasp_lift_shake``): the paper's predefined
  control sequence as an open-loop table of position targets: close the fingers, lift the
  palm, shake it.
"""

from __future__ import annotations

import numpy as np

from codesign.controllers import OpenLoopController

from .components import check_sizes
from .freeform import FreeformGripper, design, freeform_gripper
from .mesh_properties import mass_properties

__all__ = ["GRIPPER_JOINTS", "GraspLiftShake", "diamond_mesh", "gripper_description",
           "gripper_morphology", "grasp_schedule"]

GRIPPER_JOINTS = ("shake", "lift", "left_slide", "right_slide")
"""The actuated joints of :func:`gripper_description`, in the action's order."""

_DIAMOND_KEYS = ("radius", "table_radius", "crown", "pavilion", "sides", "density",
                 "position", "yaw", "resolution")
_GRIPPER_KEYS = ("fingers", "diamond", "grasp_height", "damping", "finger_damping")


def diamond_mesh(*, radius: float = 0.022, table_radius: float = 0.013, crown: float = 0.025,
                 pavilion: float = 0.025, sides: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (v, 3) [m] and faces (f, 3) of a gem standing on its table: a regular
    ``sides``-gon of circumradius ``table_radius`` [m] at z = -``crown``, the girdle of
    ``radius`` [m] at z = 0, the culet at z = ``pavilion`` [m]; a side of each polygon faces
    +y and -y (the fingers). Faces counter-clockwise seen from outside."""
    check_sizes("diamond", dict(radius=radius, table_radius=table_radius, crown=crown,
                                pavilion=pavilion))
    if int(sides) != sides or sides < 3:
        raise ValueError(f"a diamond needs sides >= 3 (an integer), got {sides!r}")
    n = int(sides)
    angle = 2 * np.pi * (np.arange(n) + 0.5) / n + np.pi / 2   # a side's middle at +y
    ring = np.stack([np.cos(angle), np.sin(angle), np.zeros(n)], axis=1)
    vertices = np.concatenate([table_radius * ring - [0, 0, crown], radius * ring,
                               [[0.0, 0.0, pavilion], [0.0, 0.0, -crown]]])
    culet, centre = 2 * n, 2 * n + 1
    faces = []
    for i in range(n):
        j = (i + 1) % n
        faces += [(centre, j, i),                       # the table, seen from below
                  (i, j, n + j), (i, n + j, n + i),     # the crown
                  (n + i, n + j, culet)]                # the pavilion
    return vertices, np.array(faces, dtype=np.int64)


def gripper_morphology(spec: dict) -> FreeformGripper:
    """The fingers of ``robot: {gripper: spec}``: :func:`sim_rigid.freeform.freeform_gripper`
    with the keywords of ``spec["fingers"]`` (default: its defaults)."""
    fingers = spec.get("fingers", {})
    if not isinstance(fingers, dict):
        raise ValueError(f"robot.gripper.fingers must be a mapping of freeform_gripper's "
                         f"keywords (side, divisions, cage_divisions, cage_margin, "
                         f"normal_travel, density, opening, drop), got {fingers!r}")
    try:
        return freeform_gripper(**fingers)
    except TypeError as exc:
        raise ValueError(f"robot.gripper.fingers: {exc}; it takes side, divisions, "
                         f"cage_divisions, cage_margin, normal_travel, density, opening, "
                         f"drop") from exc


def gripper_description(spec: dict, gripper: FreeformGripper | None = None,
                        params=None) -> dict:
    """The robot of ``robot: {gripper: spec}`` with the fingers at θ ``params`` (default
    the cubes, θ = 0) of ``gripper`` (default :func:`gripper_morphology`). ``spec``:
    ``fingers`` (:func:`~sim_rigid.freeform.freeform_gripper`'s keywords), ``diamond``
    (:func:`diamond_mesh`'s keywords, ``density`` [kg/m³] (default 500), ``position``
    [x, y] [m] of its centre on the floor, ``yaw`` [rad], ``resolution`` of its SDF grid
    (default 24)), ``grasp_height`` [m], the fingers' centres above the girdle (default
    half their side plus 1 mm: the cubes' bottoms just above the girdle, so flat pads
    squeeze the pavilion, which narrows upwards, and lose it when they lift; a pad must
    reach under the girdle to hold it), ``damping`` [N s/m] of the palm's slides (default
    1) and ``finger_damping`` [N s/m] of the fingers' (default 1)."""
    if not isinstance(spec, dict):
        raise ValueError(f"robot.gripper must be a mapping such as {{fingers: {{side: "
                         f"0.04}}, diamond: {{radius: 0.022}}}}, got {spec!r}")
    unknown = sorted(set(spec) - set(_GRIPPER_KEYS))
    gem = dict(spec.get("diamond", {}))
    unknown += [f"diamond.{k}" for k in sorted(set(gem) - set(_DIAMOND_KEYS))]
    if unknown:
        raise ValueError(f"robot.gripper: unknown keys {unknown}; allowed: "
                         f"{list(_GRIPPER_KEYS)}, diamond: {list(_DIAMOND_KEYS)}")
    gripper = gripper if gripper is not None else gripper_morphology(spec)
    params = np.zeros(2 * gripper.handle_count * 3) if params is None else params
    fingers = design(gripper, params)
    density = float(gem.pop("density", 500.0))
    position = np.asarray(gem.pop("position", [0.0, 0.0]), dtype=np.float64)
    yaw = float(gem.pop("yaw", 0.0))
    resolution = int(gem.pop("resolution", 24))
    vertices, faces = diamond_mesh(**gem)
    props = mass_properties(vertices, faces, density)
    crown = float(-vertices[:, 2].min())
    sides = (len(vertices) - 2) // 2
    side = float(np.ptp(gripper.rest_handles[0][:, 2]) / gripper.cage_margin)
    grasp_height = float(spec.get("grasp_height", side / 2 + 0.001))
    palm_height = crown + grasp_height - float(gripper.joint_origin[0, 2])
    links = [
        {"name": "palm_x", "mass": 0.01, "inertia": [1e-6, 1e-6, 1e-6]},
        {"name": "palm", "mass": 0.05, "inertia": [1e-5, 1e-5, 1e-5]},
        {"name": "diamond", "mass": float(props["mass"]), "com": props["com"].tolist(),
         "inertia": props["inertia"].tolist(),
         "contacts": vertices[:2 * sides].tolist(),
         "shapes": [{"type": "mesh", "center": [0.0, 0.0, 0.0], "vertices": vertices.tolist(),
                     "faces": faces.tolist(), "resolution": resolution}]},
    ]
    c = len(gripper.contact_vertices[0])
    for k, name in enumerate(gripper.link_names):
        links.append({"name": name, "mass": float(fingers["link.mass"][k]),
                      "inertia": fingers["link.inertia"][k].tolist(),
                      "contacts": fingers["contact.point"][k * c:(k + 1) * c].tolist()})
    damping = float(spec.get("damping", 1.0))
    finger_damping = float(spec.get("finger_damping", 1.0))
    joints = [
        {"name": "shake", "type": "prismatic", "parent": "world", "child": "palm_x",
         "origin": [0.0, 0.0, palm_height], "axis": [1.0, 0.0, 0.0], "damping": damping},
        {"name": "lift", "type": "prismatic", "parent": "palm_x", "child": "palm",
         "axis": [0.0, 0.0, 1.0], "damping": damping},
        {"name": "left_slide", "type": "prismatic", "parent": "palm", "child": "left_finger",
         "origin": gripper.joint_origin[0].tolist(), "axis": [0.0, -1.0, 0.0],
         "damping": finger_damping},
        {"name": "right_slide", "type": "prismatic", "parent": "palm",
         "child": "right_finger", "origin": gripper.joint_origin[1].tolist(),
         "axis": [0.0, 1.0, 0.0], "damping": finger_damping},
        {"name": "diamond", "type": "free", "parent": "world", "child": "diamond",
         "origin": [float(position[0]), float(position[1]), crown],
         "initial": [0.0, 0.0, 0.0, yaw, 0.0, 0.0], "damping": 0.0},
    ]
    return {"links": links, "joints": joints}


def grasp_schedule(times, *, grip: float = 0.016, close_time: float = 0.4,
                   lift: float = 0.05, lift_start: float = 0.5, lift_time: float = 0.5,
                   shake_start: float = 1.0, shake_amplitude=(0.015, 0.01),
                   shake_frequency: float = 2.0) -> np.ndarray:
    """Position targets (len(times), 4) [m] of ``shake``, ``lift``, ``left_slide`` and
    ``right_slide`` at ``times`` [s]: the fingers close by ``grip`` [m] each over
    ``close_time`` [s]; the palm rises by ``lift`` [m] from ``lift_start`` over ``lift_time``
    [s]; from ``shake_start`` it shakes, x and z by ``shake_amplitude`` [m] (2,) at
    ``shake_frequency`` [Hz] (smooth ramps: half cosines)."""
    t = np.asarray(times, dtype=np.float64)

    def ramp(start, duration):
        s = np.clip((t - start) / duration, 0.0, 1.0)
        return 0.5 - 0.5 * np.cos(np.pi * s)

    amplitude = np.asarray(shake_amplitude, dtype=np.float64)
    if amplitude.shape != (2,):
        raise ValueError(f"shake_amplitude is [x, z] in metres, got {shake_amplitude!r}")
    wave = np.where(t > shake_start, np.sin(2 * np.pi * shake_frequency
                                            * (t - shake_start)), 0.0)
    fingers = grip * ramp(0.0, close_time)
    return np.stack([amplitude[0] * wave, lift * ramp(lift_start, lift_time)
                     + amplitude[1] * wave, fingers, fingers], axis=1)


class GraspLiftShake(OpenLoopController):
    """The paper's predefined grasp: an open-loop table (one row per control step, its
    targets at the step's end) of :func:`grasp_schedule`'s position targets, in the
    action's order of the simulator's actuated joints (those of
    :func:`gripper_description`, ``actuation: position``). Keywords past the sizes are
    :func:`grasp_schedule`'s; ``lower``, ``upper`` bound the table when it is optimized
    (``controller.optimize: true``)."""

    def __init__(self, *, simulator, observation_size: int, action_size: int,
                 control_steps: int, control_dt: float, lower: float = -np.inf,
                 upper: float = np.inf, **schedule):
        model = simulator.model
        names = [model.coordinate_names[int(i)] for i in model.actuated]
        if sorted(names) != sorted(GRIPPER_JOINTS):
            raise ValueError(f"grasp_lift_shake drives the joints {list(GRIPPER_JOINTS)} of "
                             f"robot: {{gripper: ...}}, but the robot's actuated joints are "
                             f"{names}")
        if getattr(simulator, "inner", simulator).settings["actuation"] != "position":
            raise ValueError("grasp_lift_shake gives position targets: set actuation: "
                             "position")
        times = control_dt * (np.arange(control_steps) + 1)
        targets = grasp_schedule(times, **schedule)
        table = targets[:, [GRIPPER_JOINTS.index(name) for name in names]]
        super().__init__(observation_size=observation_size, action_size=action_size,
                         control_steps=control_steps, initial=table, lower=lower,
                         upper=upper)
