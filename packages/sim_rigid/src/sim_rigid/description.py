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
list of [x, y, z] or of ``{point: [x, y, z], area: a}`` (the force's scale, default 1),
``shapes`` (optional) contact shapes fixed on the link, in the link frame, entries as
:func:`load_obstacles`' (the other links' contact points touch them). Joints: ``type``
one of :data:`~sim_rigid.model.JOINT_TYPES`,
``parent`` a link name or ``world``, ``child`` a link name, ``origin`` [m] and ``rpy`` [rad]
(URDF's roll-pitch-yaw, R = Rz(yaw) Ry(pitch) Rx(roll)) of the joint frame in the parent's
frame, ``axis`` (revolute, prismatic; normalized), ``damping`` and ``initial`` one value per
coordinate (a list of six for a free joint, or one value for all six), and for revolute and
prismatic joints ``actuated`` (default true; false for a joint only contact and gravity move,
such as a hinge, which then takes no action) and ``gear`` (the torque [N m] or force [N] per
unit of action under torque actuation, default 1). Every link is the child
of exactly one joint; the joints must form a tree rooted at the world. Links are reordered
into tree order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from .model import JOINT_COORDINATES, JOINT_TYPES, OBSTACLE_TYPES, ModelError, RigidModel
from .sdf import mesh_grid

__all__ = ["DescriptionError", "load_description", "load_obstacles", "rpy_matrix"]

_LINK_KEYS = {"name", "mass", "com", "inertia", "contacts", "shapes"}
_SHAPE_KEYS = {"plane": {"type", "point", "normal"},
               "box": {"type", "center", "half_extents", "rpy"},
               "sphere": {"type", "center", "radius"},
               "capsule": {"type", "center", "rpy", "radius", "half_length"},
               "mesh": {"type", "center", "rpy", "vertices", "faces", "resolution"}}
_JOINT_KEYS = {"name", "type", "parent", "child", "origin", "rpy", "axis", "damping", "initial",
               "actuated", "gear"}


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
    actuated, gear = _actuation(joints, kinds)
    axes = []
    for joint, kind in zip(joints, kinds, strict=True):
        axis = _vector(f"joint {joint['name']!r} axis", joint.get("axis", [0.0, 0.0, 1.0]), 3)
        norm = np.linalg.norm(axis)
        if norm == 0.0 and JOINT_COORDINATES[kind] == 1:
            raise DescriptionError(f"joint {joint['name']!r} has a zero axis")
        axes.append(axis / norm if norm > 0 else np.array([0.0, 0.0, 1.0]))
    ordered_links = [links[joint["child"]] for joint in joints]
    contact_link, contact_point, contact_area, shapes = [], [], [], []
    for i, link in enumerate(ordered_links):
        points = link.get("contacts", [])
        if not isinstance(points, list):
            raise DescriptionError(f"link {link['name']!r} contacts must be a list of "
                                   f"[x, y, z] points [m], got {points!r}")
        for k, point in enumerate(points):
            where = f"link {link['name']!r} contacts[{k}]"
            if isinstance(point, dict):
                unknown = sorted(set(point) - {"point", "area"})
                if unknown:
                    raise DescriptionError(f"{where} has unknown keys {unknown}; allowed: "
                                           f"['area', 'point']")
                area = point.get("area", 1.0)
                point = point.get("point")
            else:
                area = 1.0
            contact_point.append(_vector(where, point, 3))
            contact_area.append(area)
            contact_link.append(i)
        shapes.extend((i, f"link {link['name']!r} shapes[{k}]", entry)
                      for k, entry in enumerate(_shape_list(f"link {link['name']!r} shapes",
                                                            link.get("shapes", []))))
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
            joint_actuated=actuated, joint_gear=gear,
            contact_link=np.array(contact_link, dtype=np.int64),
            contact_point=np.array(contact_point, dtype=np.float64).reshape(-1, 3),
            contact_area=np.array(contact_area, dtype=np.float64),
            **_shape_fields(shapes),
            gravity=source.get("gravity", [0.0, 0.0, -9.81]) if gravity is None else gravity)
    except ModelError as exc:
        raise DescriptionError(str(exc)) from exc


def _actuation(joints: list[dict], kinds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(actuated (n,) bool, gear (n,)) of the joints' ``actuated`` and ``gear`` keys."""
    actuated, gear = [], []
    for joint, kind in zip(joints, kinds, strict=True):
        single = JOINT_COORDINATES[kind] == 1
        given = {key: joint[key] for key in ("actuated", "gear") if key in joint}
        if given and not single:
            raise DescriptionError(f"joint {joint['name']!r} is {JOINT_TYPES[kind]}: "
                                   f"{sorted(given)} apply to revolute and prismatic joints "
                                   f"only (remove them)")
        flag = given.get("actuated", single)
        if not isinstance(flag, bool):
            raise DescriptionError(f"joint {joint['name']!r} actuated must be true or false, "
                                   f"got {flag!r}")
        ratio = given.get("gear", 1.0)
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not ratio > 0:
            raise DescriptionError(f"joint {joint['name']!r} gear must be a number > 0 [N m "
                                   f"or N per unit of action], got {ratio!r}")
        actuated.append(flag)
        gear.append(float(ratio))
    return np.array(actuated, dtype=bool), np.array(gear, dtype=np.float64)


def load_obstacles(obstacles, *, base: RigidModel | None = None) -> dict[str, np.ndarray]:
    """The model fields of the contact shapes (``obstacle_type``, ``obstacle_center``,
    ``obstacle_rotation``, ``obstacle_half_extents``, ``obstacle_link``, ``obstacle_grid``,
    ``obstacle_grid_shape``, ``obstacle_grid_start``): the shapes on ``base``'s links (if
    given) then the static ``obstacles``, a list of

    - ``{type: plane, point [m] (default the origin), normal (default +z)}``,
    - ``{type: box, center [m], half_extents [m], rpy [rad] (default none)}``,
    - ``{type: sphere, center [m], radius [m]}``,
    - ``{type: capsule, center [m], rpy, radius [m], half_length [m]}`` (its segment along
      the turned z axis),
    - ``{type: mesh, center [m], rpy, vertices [[x, y, z], ...] [m], faces [[i, j, k], ...],
      resolution (grid nodes along the longest side, default 16)}``: a closed triangle mesh
      with faces counter-clockwise seen from outside, sampled into a grid SDF
      (:func:`sim_rigid.sdf.mesh_grid`);

    raises :class:`DescriptionError` naming the entry at fault."""
    entries = [] if base is None else _model_shapes(base)
    entries.extend((-1, f"obstacles[{k}]", entry)
                   for k, entry in enumerate(_shape_list("obstacles", obstacles)))
    return _shape_fields(entries)


def _shape_list(where: str, shapes) -> list:
    if not isinstance(shapes, list | tuple):
        raise DescriptionError(f"{where} must be a list, got {shapes!r}")
    return list(shapes)


def _model_shapes(model: RigidModel) -> list:
    """A model's link shapes as already parsed entries of :func:`_shape_fields`."""
    return [(int(link), None, (int(model.obstacle_type[o]), model.obstacle_center[o],
                               model.obstacle_rotation[o], model.obstacle_half_extents[o],
                               model.obstacle_sdf_grid(o)))
            for o, link in enumerate(model.obstacle_link) if link >= 0]


def _shape_fields(entries) -> dict[str, np.ndarray]:
    """Model fields of (link, where, entry) triples: a description's mapping, or a parsed
    (type, center, rotation, half extents, grid) tuple (where None)."""
    kinds, centers, rotations, halves, links, grids, grid_shapes, starts = ([] for _ in range(8))
    size = 0
    for link, where, entry in entries:
        kind, center, rotation, half, grid = entry if where is None else _shape(where, entry)
        kinds.append(kind)
        centers.append(center)
        rotations.append(rotation)
        halves.append(half)
        links.append(link)
        grid_shapes.append(grid.shape if grid.ndim == 3 and grid.size else (0, 0, 0))
        starts.append(size)
        grids.append(grid.ravel())
        size += grid.size
    return {"obstacle_type": np.array(kinds, dtype=np.int64),
            "obstacle_center": np.array(centers, dtype=np.float64).reshape(-1, 3),
            "obstacle_rotation": np.array(rotations, dtype=np.float64).reshape(-1, 3, 3),
            "obstacle_half_extents": np.array(halves, dtype=np.float64).reshape(-1, 3),
            "obstacle_link": np.array(links, dtype=np.int64),
            "obstacle_grid": np.concatenate([np.zeros(0), *grids]),
            "obstacle_grid_shape": np.array(grid_shapes, dtype=np.int64).reshape(-1, 3),
            "obstacle_grid_start": np.array(starts, dtype=np.int64)}


def _positive(where: str, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not number > 0.0:
        raise DescriptionError(f"{where} is {value!r}: it must be a number > 0 [m]")
    return number


def _shape(where: str, shape) -> tuple:
    """(type index, center, rotation, half extents, grid) of one description entry."""
    kind = shape.get("type") if isinstance(shape, dict) else None
    if kind not in _SHAPE_KEYS:
        raise DescriptionError(f"{where} must be a mapping with type one of "
                               f"{sorted(_SHAPE_KEYS)}, got {shape!r}")
    unknown = sorted(set(shape) - _SHAPE_KEYS[kind])
    if unknown:
        raise DescriptionError(f"{where} ({kind}) has unknown keys {unknown}; allowed: "
                               f"{sorted(_SHAPE_KEYS[kind])}")
    no_grid = np.zeros((0, 0, 0))
    if kind == "plane":
        normal = _vector(f"{where} normal", shape.get("normal", [0, 0, 1]), 3)
        length = np.linalg.norm(normal)
        if length == 0.0:
            raise DescriptionError(f"{where} (plane) has a zero normal")
        return (OBSTACLE_TYPES.index(kind), _vector(f"{where} point", shape.get("point",
                                                                                [0] * 3), 3),
                _frame_with_z(normal / length), np.zeros(3), no_grid)
    center = _vector(f"{where} center", shape.get("center"), 3)
    rotation = rpy_matrix(_vector(f"{where} rpy", shape.get("rpy", [0] * 3), 3))
    grid = no_grid
    if kind == "box":
        half = _vector(f"{where} half_extents", shape.get("half_extents"), 3)
        if not np.all(half > 0.0):
            raise DescriptionError(f"{where} (box) half_extents {half.tolist()} "
                                   f"m: each must be > 0")
    elif kind == "sphere":
        half = np.full(3, _positive(f"{where} (sphere) radius", shape.get("radius")))
    elif kind == "capsule":
        radius = _positive(f"{where} (capsule) radius", shape.get("radius"))
        length = _positive(f"{where} (capsule) half_length", shape.get("half_length"))
        half = np.array([radius, radius, radius + length])
    else:
        resolution = shape.get("resolution", 16)
        if not isinstance(resolution, int) or resolution < 2:
            raise DescriptionError(f"{where} (mesh) resolution is {resolution!r}: an "
                                   f"integer >= 2 (grid nodes along the longest side)")
        try:
            vertices = np.asarray(shape.get("vertices"), dtype=np.float64).reshape(-1, 3)
            faces = np.asarray(shape.get("faces"), dtype=np.int64)
            half, grid = mesh_grid(vertices, faces, resolution=resolution)
        except (TypeError, ValueError) as exc:
            raise DescriptionError(f"{where} (mesh): {exc}") from exc
    return OBSTACLE_TYPES.index(kind), center, rotation, half, grid


def _frame_with_z(normal: np.ndarray) -> np.ndarray:
    """A rotation matrix whose third column is the unit ``normal``."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    first = np.cross(helper, normal)
    first /= np.linalg.norm(first)
    return np.column_stack([first, np.cross(normal, first), normal])
