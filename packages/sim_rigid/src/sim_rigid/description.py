"""Robot descriptions: links and joints as a dict (or a YAML file of one) into a
:class:`~sim_rigid.model.RigidModel`.

.. code-block:: yaml

    gravity: [0.0, 0.0, -9.81]        # optional [m/s²]
    links:
      - {name: upper, mass: 1.0, com: [0.15, 0, 0], inertia: [1e-4, 7.5e-3, 7.5e-3]}
    joints:
      - {name: shoulder, type: revolute, parent: world, child: upper,
         origin: [0, 0, 0], rpy: [0, 0, 0], axis: [0, 1, 0], damping: 0.1, initial: 0.3}

Links: ``mass`` [kg], ``com`` [m] (default the frame origin), ``inertia`` about the centre of
mass in the link frame [kg m²]: three principal moments, six values (ixx, iyy, izz, ixy, ixz,
iyz) or a 3x3 matrix, ``contacts`` (optional) the contact points in the link frame [m], a
list of [x, y, z]. Joints: ``type`` one of :data:`~sim_rigid.model.JOINT_TYPES`,
``parent`` a link name or ``world``, ``child`` a link name, ``origin`` [m] and ``rpy`` [rad]
(URDF's roll-pitch-yaw, R = Rz(yaw) Ry(pitch) Rx(roll)) of the joint frame in the parent's
frame, ``axis`` (revolute, prismatic; normalized), ``damping`` and ``initial`` one value per
coordinate (a list of six for a free joint, or one value for all six). Every link is the child
of exactly one joint; the joints must form a tree rooted at the world. Links are reordered
into tree order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from .model import JOINT_COORDINATES, JOINT_TYPES, OBSTACLE_TYPES, ModelError, RigidModel

__all__ = ["DescriptionError", "load_description", "load_obstacles", "rpy_matrix"]

_LINK_KEYS = {"name", "mass", "com", "inertia", "contacts"}
_JOINT_KEYS = {"name", "type", "parent", "child", "origin", "rpy", "axis", "damping", "initial"}


class DescriptionError(ValueError):
    """A robot description that does not describe a tree of links and joints."""


def rpy_matrix(rpy) -> np.ndarray:
    """Rotation matrix (3, 3) of roll, pitch, yaw [rad]: Rz(yaw) Ry(pitch) Rx(roll)."""
    roll, pitch, yaw = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = (np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch),
                              np.cos(yaw), np.sin(yaw))
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _vector(where: str, value, size: int) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64) if value is not None else None
    if array is None or array.shape != (size,):
        raise DescriptionError(f"{where} must be a list of {size} numbers, got {value!r}")
    return array


def _inertia(where: str, value) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.shape == (3,):
        return np.diag(array)
    if array.shape == (6,):
        xx, yy, zz, xy, xz, yz = array
        return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    if array.shape == (3, 3):
        return array
    raise DescriptionError(f"{where} must be 3 principal moments, 6 values (ixx, iyy, izz, "
                           f"ixy, ixz, iyz) or a 3x3 matrix [kg m²], got {value!r}")


def _per_coordinate(where: str, value, count: int, default: float) -> list[float]:
    if value is None:
        return [default] * count
    array = np.asarray(value, dtype=np.float64)
    if array.ndim == 0:
        array = np.full(count, float(array))
    if array.shape != (count,):
        raise DescriptionError(f"{where} needs {count} value(s), one per coordinate, got "
                               f"{value!r}")
    return array.tolist()


def _entries(description: dict, key: str, allowed: set[str]) -> list[dict]:
    entries = description.get(key)
    if not isinstance(entries, list) or not entries:
        raise DescriptionError(f"the description needs a non-empty list '{key}'")
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise DescriptionError(f"{key}[{k}] must be a mapping with a 'name'")
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise DescriptionError(f"{key}[{k}] ({entry['name']!r}) has unknown keys "
                                   f"{unknown}; allowed: {sorted(allowed)}")
    return entries


def _tree_order(links: dict[str, dict], joints: list[dict]) -> list[dict]:
    """The joints ordered parent before child, after checking every link hangs from exactly
    one joint, every parent exists and no joints close a cycle."""
    by_child: dict[str, dict] = {}
    for k, joint in enumerate(joints):
        for end in ("parent", "child"):
            name = joint.get(end)
            if not (name in links or (end == "parent" and name == "world")):
                raise DescriptionError(
                    f"joints[{k}] ({joint['name']!r}): {end} {name!r} is not a link"
                    f"{' or world' if end == 'parent' else ''}; links: {sorted(links)}")
        if joint["child"] in by_child:
            raise DescriptionError(f"link {joint['child']!r} is the child of two joints, "
                                   f"{by_child[joint['child']]['name']!r} and "
                                   f"{joint['name']!r}: a link hangs from one joint")
        by_child[joint["child"]] = joint
    orphans = sorted(set(links) - set(by_child))
    if orphans:
        raise DescriptionError(f"links {orphans} are the child of no joint; attach each to "
                               f"the world or a link (a fixed joint for a static one)")
    ordered, placed = [], {"world"}
    pending = list(joints)
    while pending:
        ready = [joint for joint in pending if joint["parent"] in placed]
        if not ready:
            cycle = sorted(joint["name"] for joint in pending)
            raise DescriptionError(f"joints {cycle} form a cycle (no path from the world to "
                                   f"their links); the joints must form a tree")
        for joint in ready:
            ordered.append(joint)
            placed.add(joint["child"])
            pending.remove(joint)
    return ordered


def load_description(source, *, gravity=None) -> RigidModel:
    """The model described by ``source``: a dict as in the module docstring, or the path of
    a YAML file holding one. ``gravity`` [m/s²] (3,) overrides the description's (default
    [0, 0, -9.81]). Raises :class:`DescriptionError` naming the entry at fault."""
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_file():
            raise DescriptionError(f"robot description {str(path)!r} is not a file")
        try:
            source = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise DescriptionError(f"robot description {str(path)!r} is not valid YAML: "
                                   f"{exc}") from exc
    if not isinstance(source, dict):
        raise DescriptionError(f"a robot description is a mapping with 'links' and 'joints', "
                               f"got {type(source).__name__}")
    unknown = sorted(set(source) - {"links", "joints", "gravity"})
    if unknown:
        raise DescriptionError(f"unknown description keys {unknown}; allowed: gravity, "
                               f"joints, links")
    links = {}
    for k, link in enumerate(_entries(source, "links", _LINK_KEYS)):
        if link["name"] in links or link["name"] == "world":
            raise DescriptionError(f"links[{k}]: the name {link['name']!r} is taken")
        links[link["name"]] = link
    joints = _tree_order(links, _entries(source, "joints", _JOINT_KEYS))
    index = {joint["child"]: i for i, joint in enumerate(joints)}
    kinds, damping, rest = [], [], []
    for joint in joints:
        kind = joint.get("type")
        if kind not in JOINT_TYPES:
            raise DescriptionError(f"joint {joint['name']!r}: type {kind!r} is not one of "
                                   f"{JOINT_TYPES}")
        kinds.append(JOINT_TYPES.index(kind))
        count = JOINT_COORDINATES[kinds[-1]]
        damping += _per_coordinate(f"joint {joint['name']!r} damping", joint.get("damping"),
                                   count, 0.0)
        rest += _per_coordinate(f"joint {joint['name']!r} initial", joint.get("initial"),
                                count, 0.0)
    axes = []
    for joint, kind in zip(joints, kinds, strict=True):
        axis = _vector(f"joint {joint['name']!r} axis", joint.get("axis", [0.0, 0.0, 1.0]), 3)
        norm = np.linalg.norm(axis)
        if norm == 0.0 and JOINT_COORDINATES[kind] == 1:
            raise DescriptionError(f"joint {joint['name']!r} has a zero axis")
        axes.append(axis / norm if norm > 0 else np.array([0.0, 0.0, 1.0]))
    ordered_links = [links[joint["child"]] for joint in joints]
    contact_link, contact_point = [], []
    for i, link in enumerate(ordered_links):
        points = link.get("contacts", [])
        if not isinstance(points, list):
            raise DescriptionError(f"link {link['name']!r} contacts must be a list of "
                                   f"[x, y, z] points [m], got {points!r}")
        for k, point in enumerate(points):
            contact_point.append(_vector(f"link {link['name']!r} contacts[{k}]", point, 3))
            contact_link.append(i)
    try:
        return RigidModel(
            link_names=[link["name"] for link in ordered_links],
            link_mass=[float(link.get("mass", 0.0)) for link in ordered_links],
            link_com=[_vector(f"link {link['name']!r} com", link.get("com", [0.0] * 3), 3)
                      for link in ordered_links],
            link_inertia=[_inertia(f"link {link['name']!r} inertia", link.get("inertia"))
                          for link in ordered_links],
            joint_names=[joint["name"] for joint in joints],
            joint_type=kinds,
            joint_parent=[-1 if joint["parent"] == "world" else index[joint["parent"]]
                          for joint in joints],
            joint_origin=[_vector(f"joint {joint['name']!r} origin",
                                  joint.get("origin", [0.0] * 3), 3) for joint in joints],
            joint_rotation=[rpy_matrix(_vector(f"joint {joint['name']!r} rpy",
                                               joint.get("rpy", [0.0] * 3), 3))
                            for joint in joints],
            joint_axis=axes, joint_damping=damping, joint_rest=rest,
            contact_link=np.array(contact_link, dtype=np.int64),
            contact_point=np.array(contact_point, dtype=np.float64).reshape(-1, 3),
            gravity=source.get("gravity", [0.0, 0.0, -9.81]) if gravity is None else gravity)
    except ModelError as exc:
        raise DescriptionError(str(exc)) from exc


def load_obstacles(obstacles) -> dict[str, np.ndarray]:
    """The model fields of static obstacles (``obstacle_type``, ``obstacle_center``,
    ``obstacle_rotation``, ``obstacle_half_extents``) from a list of ``{type: plane, point
    [m] (default the origin), normal (default +z)}`` and ``{type: box, center [m],
    half_extents [m], rpy [rad] (default none)}``; raises :class:`DescriptionError` naming
    the entry at fault."""
    if not isinstance(obstacles, list | tuple):
        raise DescriptionError(f"obstacles must be a list, got {obstacles!r}")
    kinds, centers, rotations, halves = [], [], [], []
    allowed = {"plane": {"type", "point", "normal"},
               "box": {"type", "center", "half_extents", "rpy"}}
    for k, obstacle in enumerate(obstacles):
        kind = obstacle.get("type") if isinstance(obstacle, dict) else None
        if kind not in allowed:
            raise DescriptionError(f"obstacles[{k}] must be a mapping with type one of "
                                   f"{sorted(allowed)}, got {obstacle!r}")
        unknown = sorted(set(obstacle) - allowed[kind])
        if unknown:
            raise DescriptionError(f"obstacles[{k}] ({kind}) has unknown keys {unknown}; "
                                   f"allowed: {sorted(allowed[kind])}")
        kinds.append(OBSTACLE_TYPES.index(kind))
        if kind == "plane":
            normal = _vector(f"obstacles[{k}] normal", obstacle.get("normal", [0, 0, 1]), 3)
            length = np.linalg.norm(normal)
            if length == 0.0:
                raise DescriptionError(f"obstacles[{k}] (plane) has a zero normal")
            centers.append(_vector(f"obstacles[{k}] point", obstacle.get("point", [0] * 3), 3))
            rotations.append(_frame_with_z(normal / length))
            halves.append(np.zeros(3))
        else:
            centers.append(_vector(f"obstacles[{k}] center", obstacle.get("center"), 3))
            rotations.append(rpy_matrix(_vector(f"obstacles[{k}] rpy",
                                                obstacle.get("rpy", [0] * 3), 3)))
            half = _vector(f"obstacles[{k}] half_extents", obstacle.get("half_extents"), 3)
            if not np.all(half > 0.0):
                raise DescriptionError(f"obstacles[{k}] (box) half_extents {half.tolist()} "
                                       f"m: each must be > 0")
            halves.append(half)
    return {"obstacle_type": np.array(kinds, dtype=np.int64),
            "obstacle_center": np.array(centers, dtype=np.float64).reshape(-1, 3),
            "obstacle_rotation": np.array(rotations, dtype=np.float64).reshape(-1, 3, 3),
            "obstacle_half_extents": np.array(halves, dtype=np.float64).reshape(-1, 3)}


def _frame_with_z(normal: np.ndarray) -> np.ndarray:
    """A rotation matrix whose third column is the unit ``normal``."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    first = np.cross(helper, normal)
    first /= np.linalg.norm(first)
    return np.column_stack([first, np.cross(normal, first), normal])
