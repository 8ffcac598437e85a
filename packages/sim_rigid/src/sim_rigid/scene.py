"""Options to simulator: :func:`build_model` turns :class:`~sim_rigid.options.RigidOptions`
into a :class:`~sim_rigid.model.RigidModel`, :func:`make_simulator` (the plugin's factory)
into a :class:`~sim_rigid.simulator.RigidSimulator`, or with ``design_space: cage`` into a
:class:`~sim_rigid.cage_design.CageSimulator` over it, whose design is the finger's (or the
fingers') cage parameters θ.

``robot`` is a description (a dict, :mod:`sim_rigid.description`), a YAML file of one
(relative to the experiment file's folder, ``base_dir``), the name of a robot shipped in
``sim_rigid/robots/<name>.yaml`` (``arm4``), or ``{finger: {phalanges: 4, ...}}``: a finger
assembled from the cage-based components at their rest shape (:func:`finger_description`),
with, optionally, more ``links`` and ``joints`` beside it (a carriage the finger rides on,
an object it handles: :func:`robot_description`), or ``{fingers: [...]}``: several such
fingers, each named by its ``prefix``, or ``{gripper: {...}}``: the free-form gripper scene
(:func:`sim_rigid.gripper_scene.gripper_description`: two cube fingers, a diamond).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from codesign.fields import view_window
from codesign.options import options_factory
from codesign.paths import named_file

from . import freeform
from .cage_design import CageSimulator
from .description import DescriptionError, load_description, load_obstacles
from .gripper_scene import gripper_description, gripper_morphology
from .model import RigidModel
from .morphology import (
    FingerMorphology,
    HandMorphology,
    assemble_finger,
    description,
    hand_design,
    hand_design_jacobian,
)
from .options import RigidOptions
from .simulator import RigidSimulator

__all__ = ["ROBOT_DIRECTORY", "SceneError", "build_model", "cage_morphology",
           "finger_description", "finger_morphology", "hand_morphology", "make_simulator",
           "robot_description", "robot_path"]

ROBOT_DIRECTORY = Path(__file__).parent / "robots"
"""Folder of the bundled robot descriptions, ``<name>.yaml`` each."""


class SceneError(ValueError):
    """Options that name no robot or do not fit the robot loaded."""


def robot_path(robot: str, *, base_dir: str | Path | None = None) -> Path:
    """The description file ``robot`` names: a path relative to ``base_dir`` (default the
    working directory) or absolute, else a bundled robot's name (``arm4``)."""
    bundled = {path.stem: path for path in ROBOT_DIRECTORY.glob("*.yaml")}
    return named_file("robot", robot, base_dir=base_dir, bundled=bundled, error=SceneError)


_FINGER_JOINT_KEYS = ("damping", "initial", "gear", "parent", "prefix")
"""Keys of ``robot.finger`` for its joints, weld and names; the others are the shape's."""


def finger_morphology(spec: dict, *, where: str = "robot.finger") -> FingerMorphology:
    """The assembled finger of ``robot: {finger: spec}``: :func:`sim_rigid.morphology.
    assemble_finger` with the keys of ``spec`` that are its keywords (all but
    ``damping``, ``initial``, ``gear``, ``parent`` and ``prefix``, see
    :func:`finger_description`); errors name the spec as ``where``."""
    if not isinstance(spec, dict):
        raise SceneError(f"{where} must be a mapping such as {{phalanges: 4}}, got "
                         f"{spec!r}")
    shape = {key: value for key, value in spec.items() if key not in _FINGER_JOINT_KEYS}
    try:
        return assemble_finger(**shape)
    except TypeError as exc:
        raise SceneError(f"{where}: {exc}; it takes assemble_finger's keywords "
                         f"(phalanges, base_length, phalanx_length, tip_length, width, "
                         f"height, density, cage_margin, divisions, mount, free_heights) and "
                         f"damping, initial, gear, parent, prefix") from exc
    except ValueError as exc:
        raise SceneError(f"{where}: {exc}") from exc


def finger_description(spec: dict) -> dict:
    """The description of ``robot: {finger: spec}``: :func:`sim_rigid.morphology.
    assemble_finger`'s keywords (``phalanges``, ``base_length``, ``phalanx_length``,
    ``tip_length``, ``width``, ``height`` [m], ``density`` [kg/m³], ``mount`` [m], ...) at
    the rest shape (:func:`finger_morphology`), plus ``damping`` [N m s/rad], ``initial``
    [rad] and ``gear`` [N m per unit of action] of its joints, ``parent``, the link its
    base is welded to at ``mount`` (default the world), and ``prefix``, put before every
    link and joint name (``left_`` gives ``left_base``, ``left_tip_joint``: several fingers
    in one robot)."""
    finger = finger_morphology(spec)
    joints = {key: spec[key] for key in ("damping", "initial") if key in spec}
    robot = description(finger, finger.parameter_defaults, **joints)
    robot["joints"][0]["parent"] = spec.get("parent", "world")  # morphology builds it first
    if spec.get("gear") is not None:
        for joint in robot["joints"]:
            if joint["type"] == "revolute":
                joint["gear"] = spec["gear"]
    prefix = spec.get("prefix", "")
    if not isinstance(prefix, str):
        raise SceneError(f"robot.finger prefix must be a string put before the finger's link "
                         f"and joint names (e.g. left_), got {prefix!r}")
    own = set(finger.link_names)
    for link in robot["links"]:
        link["name"] = prefix + link["name"]
    for joint in robot["joints"]:
        joint["name"], joint["child"] = prefix + joint["name"], prefix + joint["child"]
        if joint["parent"] in own and joint is not robot["joints"][0]:
            joint["parent"] = prefix + joint["parent"]
    return robot


def robot_description(robot: dict) -> dict:
    """The description of an inline ``robot`` option: ``robot`` itself, or for ``{finger:
    {...}, links: [...], joints: [...]}`` the finger's (:func:`finger_description`) with the
    other links and joints added (they may hang from the finger's links, and the finger
    from them through its ``parent``); ``fingers: [{prefix: left_, ...}, ...]`` in place of
    ``finger`` puts several fingers in the robot, each named by its ``prefix``; ``{gripper:
    {...}}`` is the free-form gripper scene (:func:`sim_rigid.gripper_scene.
    gripper_description`)."""
    if "gripper" in robot:
        if set(robot) != {"gripper"}:
            raise SceneError(f"robot: {{gripper: {{...}}}} is a whole scene; remove the keys "
                             f"{sorted(set(robot) - {'gripper'})} beside it")
        try:
            return gripper_description(robot["gripper"])
        except ValueError as exc:
            raise SceneError(str(exc)) from exc
    if "finger" not in robot and "fingers" not in robot:
        return robot
    if "finger" in robot and "fingers" in robot:
        raise SceneError("robot has both finger and fingers; give one finger as finger: "
                         "{...} or several as fingers: [{prefix: left_, ...}, ...]")
    unknown = sorted(set(robot) - {"finger", "fingers", "links", "joints"})
    if unknown:
        raise SceneError(f"robot: unknown keys {unknown} beside finger or fingers; allowed: "
                         f"finger or fingers, links, joints (the fingers' gravity is the gravity "
                         f"option's)")
    specs = [robot["finger"]] if "finger" in robot else _finger_list(robot["fingers"])
    fingers = [finger_description(spec) for spec in specs]
    extra = {key: robot.get(key, []) for key in ("links", "joints")}
    for key, entries in extra.items():
        if not isinstance(entries, list):
            raise SceneError(f"robot.{key} beside a finger must be a list of {key} "
                             f"(sim_rigid.description), got {entries!r}")
    return {key: [entry for finger in fingers for entry in finger[key]] + extra[key]
            for key in ("links", "joints")}


def _per_coordinate(name: str, value, model: RigidModel) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim == 0:
        array = np.full(model.coordinate_count, float(array))
    if array.shape != (model.coordinate_count,):
        raise SceneError(f"{name} has {array.size} values; give one per coordinate "
                         f"({model.coordinate_count}: {list(model.coordinate_names)})")
    return array


def build_model(options: RigidOptions) -> RigidModel:
    """The model of ``options``: the description loaded with the options' gravity, its
    initial positions and damping replaced where the options give them, the options'
    obstacles and contact coefficients added."""
    o = options
    if isinstance(o.robot, dict):
        source = robot_description(o.robot)
    else:
        source = robot_path(o.robot, base_dir=o.base_dir)
    try:
        model = load_description(source, gravity=o.gravity)
    except DescriptionError as exc:
        raise SceneError(f"robot {o.robot if isinstance(o.robot, str) else '(inline)'}: "
                         f"{exc}") from exc
    try:
        changes = load_obstacles(o.obstacles, base=model)
    except DescriptionError as exc:
        raise SceneError(str(exc)) from exc
    changes.update(contact_stiffness=o.contact_stiffness, contact_damping=o.contact_damping,
                   friction=o.friction, friction_stiffness=o.friction_stiffness,
                   friction_sharpness=o.friction_sharpness,
                   # the area weight multiplies the whole contact force (normal and
                   # friction), so scaling it scales the forces and keeps them differentiable
                   contact_area=np.asarray(model.contact_area) * o.contact_scale)
    if o.damping is not None:
        changes["joint_damping"] = _per_coordinate("damping", o.damping, model)
    if isinstance(o.initial_positions, dict):
        rest = np.array(model.joint_rest)
        names = model.coordinate_names
        for name, value in o.initial_positions.items():
            if name not in names:
                raise SceneError(f"initial_positions names {name!r}, not a coordinate; "
                                 f"coordinates: {list(names)}")
            rest[names.index(name)] = float(value)
        changes["joint_rest"] = rest
    else:
        changes["joint_rest"] = _per_coordinate("initial_positions", o.initial_positions,
                                                model)
    return dataclasses.replace(model, **changes)


def _finger_list(specs) -> list:
    """``robot.fingers`` checked: a non-empty list."""
    if not isinstance(specs, list) or not specs:
        raise SceneError(f"robot.fingers must be a non-empty list of fingers, each "
                         f"{{prefix: left_, phalanges: 2, ...}}, got {specs!r}")
    return specs


def hand_morphology(specs) -> HandMorphology:
    """The fingers of ``robot: {fingers: specs}`` (each :func:`finger_morphology`) named by
    their prefixes; a SceneError for a spec that is no finger or prefixes that repeat."""
    fingers = tuple(finger_morphology(spec, where=f"robot.fingers[{k}]")
                    for k, spec in enumerate(_finger_list(specs)))
    try:
        return HandMorphology(fingers, tuple(spec.get("prefix", "") for spec in specs))
    except ValueError as exc:
        raise SceneError(f"robot.fingers: {exc}") from exc


def cage_morphology(robot) -> FingerMorphology | HandMorphology | freeform.FreeformGripper:
    """The morphology whose cage parameters ``design_space: cage`` optimizes: the finger of
    ``robot: {finger: {...}}`` (:func:`finger_morphology`), the fingers of ``robot:
    {fingers: [...]}`` (:func:`hand_morphology`) or the free-form fingers of ``robot:
    {gripper: {...}}``; a SceneError for any other robot."""
    if isinstance(robot, dict) and "gripper" in robot:
        try:
            return gripper_morphology(robot["gripper"])
        except ValueError as exc:
            raise SceneError(str(exc)) from exc
    if isinstance(robot, dict) and "fingers" in robot and "finger" not in robot:
        return hand_morphology(robot["fingers"])
    if not (isinstance(robot, dict) and "finger" in robot):
        shown = robot if isinstance(robot, str) else "(an inline description)"
        raise SceneError(f"design_space: cage optimizes the cage parameters of a finger built "
                         f"from the cage-based components, but robot is {shown}; give robot: "
                         f"{{finger: {{phalanges: 4, ...}}}} or {{fingers: [{{prefix: left_, "
                         f"...}}, ...]}} (with links and joints beside them if the scene has "
                         f"more), robot: {{gripper: {{...}}}}, or design_space: simulation")
    return finger_morphology(robot["finger"])


@options_factory(RigidOptions)
def make_simulator(options: RigidOptions) -> RigidSimulator | CageSimulator:
    """Build a :class:`~sim_rigid.simulator.RigidSimulator` from the options of
    :class:`~sim_rigid.options.RigidOptions` (as keywords), seen through its fingers' cage
    parameters (:class:`~sim_rigid.cage_design.CageSimulator`) for ``design_space: cage``."""
    o = options
    finger = cage_morphology(o.robot) if o.design_space == "cage" else None
    simulator = RigidSimulator(build_model(o), actuation=o.actuation,
                               servo_stiffness=o.servo_stiffness,
                               servo_damping=o.servo_damping,
                               newton_tolerance=o.newton_tolerance,
                               newton_iterations=o.newton_iterations, kernels=o.kernels,
                               view=o.view,
                               window=view_window(o.view_window, error=SceneError))
    if isinstance(finger, freeform.FreeformGripper):
        return CageSimulator(simulator, finger, design=freeform.design,
                             design_jacobian=freeform.design_jacobian,
                             parameters=freeform.handle_parameters(finger))
    if isinstance(finger, HandMorphology):
        return CageSimulator(simulator, finger, design=hand_design,
                             design_jacobian=hand_design_jacobian)
    return simulator if finger is None else CageSimulator(simulator, finger)
