"""Robots from URDF: :func:`load_urdf` reads links, joints, inertias and limits into a
:class:`~sim_pbd.model.PBDModel`.

What is read: ``<link>`` inertials (origin xyz/rpy, mass, inertia, rotated into the link
frame), ``<joint>`` (``revolute``, ``continuous``, ``prismatic``, ``fixed``) origins, axes
(normalized), limits and ``<dynamics>`` damping and friction. Fixed joints are merged into
their parent link: masses, centres of mass and inertias (parallel-axis theorem) combined, the
child joints of a merged link re-expressed in the parent's frame; movable joints left out of
``joints`` are frozen at their initial position and merged the same way. Everything else
(``<visual>``, ``<collision>`` meshes, ``<gazebo>``, ``<transmission>``, sensors) is ignored:
a Gazebo ``<gravity>0</gravity>`` is a plugin setting, and gravity acts on every link.

The XML is read with the standard library's expat parser, refusing any ``<!DOCTYPE>`` before
it can declare an entity, so entity expansion ("billion laughs") and external entities never
happen. Chosen by measurement (the package README's table): on Baxter's URDF (52 kB) it
parses in 0.86 ms, against 3.3 ms for yourdfpy and 0.33 ms for lxml, with no dependency;
the whole load takes 3.7 ms.

Every problem raises :class:`URDFError` naming the element (and its line) and the fix.
"""

from __future__ import annotations

import heapq
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from pyexpat import ErrorString, ExpatError, ParserCreate

import numpy as np

from codesign.inertia import inertia_problem
from codesign.options import suggest

from .model import JOINT_TYPES, PBDModel
from .options import PBDOptions

__all__ = ["URDFError", "load_urdf"]

_DEFAULT = PBDOptions()
"""The declared default of every option, the defaults of :func:`load_urdf`."""

_MOVABLE = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic"}
"""URDF joint types that move, and the model's joint type of each."""
_UNSUPPORTED = ("floating", "planar")


class URDFError(ValueError):
    """A URDF that cannot be read or describes no valid robot."""


# -- safe XML ---------------------------------------------------------------------------------


def _parse_xml(data: str | bytes, source: str) -> tuple[ET.Element, dict[ET.Element, int]]:
    """The document's root element and the line of every element.

    A ``<!DOCTYPE>`` is refused as soon as it starts: without one no entity can be declared,
    so no expansion (``billion laughs``) or external entity fetch can happen.
    """
    parser = ParserCreate()
    builder = ET.TreeBuilder()
    lines: dict[ET.Element, int] = {}

    def start(tag, attributes):
        lines[builder.start(tag, attributes)] = parser.CurrentLineNumber

    def refuse_doctype(*_):
        raise URDFError(f"{source}:{parser.CurrentLineNumber}: <!DOCTYPE> is refused: it can "
                        f"declare entities that expand without bound; a URDF needs none, "
                        f"remove it")

    parser.StartElementHandler = start
    parser.EndElementHandler = builder.end
    parser.StartDoctypeDeclHandler = refuse_doctype
    try:
        parser.Parse(data, True)
    except ExpatError as exc:
        raise URDFError(f"{source}:{exc.lineno}: malformed XML (column {exc.offset}): "
                        f"{ErrorString(exc.code)}") from None
    return builder.close(), lines


# -- rotations --------------------------------------------------------------------------------


def _rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes x, y, z) as a rotation matrix, Rz(y) Ry(p) Rx(r)."""
    (cr, cp, cy), (sr, sp, sy) = np.cos(rpy), np.sin(rpy)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _axis_angle_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation by ``angle`` [rad] about the unit ``axis`` (Rodrigues)."""
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


def _matrix_quaternion(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (Shepperd's method: the
    largest of the four squared components is taken first, so no division by a small one)."""
    r = rotation
    squares = 1.0 + np.array([r[0, 0] + r[1, 1] + r[2, 2], r[0, 0] - r[1, 1] - r[2, 2],
                              -r[0, 0] + r[1, 1] - r[2, 2], -r[0, 0] - r[1, 1] + r[2, 2]])
    k = int(np.argmax(squares))
    products = np.array([  # 4 * q_k * q_i for every i, read off the matrix
        [squares[0], r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]],
        [r[2, 1] - r[1, 2], squares[1], r[0, 1] + r[1, 0], r[0, 2] + r[2, 0]],
        [r[0, 2] - r[2, 0], r[0, 1] + r[1, 0], squares[2], r[1, 2] + r[2, 1]],
        [r[1, 0] - r[0, 1], r[0, 2] + r[2, 0], r[1, 2] + r[2, 1], squares[3]]])[k]
    quaternion = products / (2.0 * np.sqrt(squares[k]))
    return quaternion if quaternion[0] >= 0.0 else -quaternion


def _transform(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    transform = np.eye(4)
    transform[:3, :3], transform[:3, 3] = rotation, translation
    return transform


# -- reading elements -------------------------------------------------------------------------


class _Reader:
    """Reads attributes of one document, naming the element and its line in every error."""

    def __init__(self, source: str, lines: dict[ET.Element, int]):
        self.source, self.lines = source, lines

    def error(self, element: ET.Element, what: str, message: str) -> URDFError:
        return URDFError(f"{self.source}:{self.lines.get(element, '?')}: {what}: {message}")

    def name(self, element: ET.Element) -> str:
        name = element.get("name")
        if not name:
            raise self.error(element, f"<{element.tag}>", "has no name attribute; add one")
        return name

    def numbers(self, element: ET.Element, attribute: str, what: str, count: int,
                default: Sequence[float] | None = None) -> np.ndarray:
        text = element.get(attribute)
        if text is None:
            if default is None:
                raise self.error(element, what, f"<{element.tag}> needs the attribute "
                                                f"{attribute!r}")
            return np.array(default, dtype=np.float64)
        try:
            values = [float(word) for word in text.split()]
        except ValueError:
            values = []
        if len(values) != count or not all(map(math.isfinite, values)):
            raise self.error(element, what, f"<{element.tag} {attribute}={text!r}> must be "
                                            f"{count} finite number{'s' * (count > 1)}")
        return np.array(values)

    def number(self, element: ET.Element, attribute: str, what: str,
               default: float | None = None) -> float:
        return float(self.numbers(element, attribute, what, 1,
                                  None if default is None else [default])[0])

    def origin(self, parent: ET.Element, what: str) -> np.ndarray:
        """The ``<origin>`` of ``parent`` as a 4×4 transform (identity when absent)."""
        origin = parent.find("origin")
        if origin is None:
            return np.eye(4)
        return _transform(_rpy_matrix(self.numbers(origin, "rpy", what, 3, (0.0, 0.0, 0.0))),
                          self.numbers(origin, "xyz", what, 3, (0.0, 0.0, 0.0)))


class _Link:
    """A URDF link: mass [kg], centre of mass [m] and inertia about it [kg m²] in the link
    frame (zero mass and inertia without ``<inertial>``)."""

    def __init__(self, element: ET.Element, reader: _Reader):
        self.element = element
        self.name = reader.name(element)
        what = f"link {self.name!r}"
        inertial = element.find("inertial")
        self.mass, self.com, self.inertia = 0.0, np.zeros(3), np.zeros((3, 3))
        if inertial is None:
            return
        mass, inertia = inertial.find("mass"), inertial.find("inertia")
        if mass is None or inertia is None:
            raise reader.error(inertial, what, "<inertial> needs a <mass> and an <inertia>; "
                                               "omit <inertial> for a massless link")
        self.mass = reader.number(mass, "value", what)
        if self.mass <= 0.0:
            raise reader.error(mass, what, f"mass {self.mass} kg must be > 0 (omit <inertial> "
                                           f"for a massless link)")
        xx, xy, xz, yy, yz, zz = (reader.number(inertia, key, what) for key in
                                  ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
        frame = reader.origin(inertial, what)
        rotation = frame[:3, :3]
        self.com = frame[:3, 3]
        self.inertia = rotation @ np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]) \
            @ rotation.T
        problem = inertia_problem(self.inertia[None])
        if problem is not None:
            raise reader.error(inertia, what, problem[1])


class _Joint:
    """A URDF joint: type, parent and child link names, origin (4×4), unit axis, limits,
    damping and friction."""

    def __init__(self, element: ET.Element, reader: _Reader, links: Mapping[str, _Link]):
        self.element = element
        self.name = reader.name(element)
        what = f"joint {self.name!r}"
        self.type = element.get("type")
        if self.type in _UNSUPPORTED:
            raise reader.error(element, what, f"type {self.type!r} is not supported; for a "
                                              f"free-flying robot use floating_base=True")
        if self.type not in (*_MOVABLE, "fixed"):
            raise reader.error(element, what, f"unknown joint type {self.type!r}; known: "
                                              f"revolute, continuous, prismatic, fixed")
        if element.find("mimic") is not None:
            raise reader.error(element, what, "<mimic> joints are not supported; remove "
                                              "<mimic> to let the joint move on its own")
        self.parent, self.child = (self._link(element, role, reader, what, links)
                                   for role in ("parent", "child"))
        self.origin = reader.origin(element, what)
        self.axis, self.lower, self.upper = np.array([1.0, 0.0, 0.0]), -np.inf, np.inf
        self.damping = self.friction = 0.0
        if self.type == "fixed":
            return
        axis = element.find("axis")
        if axis is not None:
            self.axis = reader.numbers(axis, "xyz", what, 3)
            norm = np.linalg.norm(self.axis)
            if norm < 1e-12:
                raise reader.error(axis, what, "the axis is zero; give it a direction")
            self.axis = self.axis / norm
        limit = element.find("limit")
        if self.type != "continuous":
            if limit is None:
                raise reader.error(element, what, f"a {self.type} joint needs <limit lower= "
                                                  f"upper= effort= velocity=>; or make it "
                                                  f"continuous")
            # URDF's defaults: an absent lower or upper limit is 0
            self.lower = reader.number(limit, "lower", what, 0.0)
            self.upper = reader.number(limit, "upper", what, 0.0)
            if self.lower > self.upper:
                raise reader.error(limit, what, f"lower limit {self.lower} > upper limit "
                                                f"{self.upper}; swap them")
        dynamics = element.find("dynamics")
        if dynamics is not None:
            self.damping = reader.number(dynamics, "damping", what, 0.0)
            self.friction = reader.number(dynamics, "friction", what, 0.0)
            if self.damping < 0.0 or self.friction < 0.0:
                raise reader.error(dynamics, what, f"damping {self.damping} and friction "
                                                   f"{self.friction} must be >= 0")

    @staticmethod
    def _link(element, role, reader, what, links) -> str:
        tag = element.find(role)
        name = None if tag is None else tag.get("link")
        if not name:
            raise reader.error(element, what, f"needs <{role} link=...>")
        if name not in links:
            raise reader.error(tag, what, f"{role} link {name!r} is not a <link> of the "
                                          f"robot{suggest(name, list(links))}")
        return name

    def motion(self, position: float) -> np.ndarray:
        """The child frame in the parent frame at joint ``position`` [rad or m], 4×4."""
        if self.type == "fixed":
            return self.origin
        if self.type == "prismatic":
            return self.origin @ _transform(np.eye(3), position * self.axis)
        return self.origin @ _transform(_axis_angle_matrix(self.axis, position), np.zeros(3))


# -- the robot's tree -------------------------------------------------------------------------


def _read_robot(data: str | bytes, source: str) -> tuple[dict[str, _Link], list[_Joint],
                                                          _Reader]:
    root, lines = _parse_xml(data, source)
    reader = _Reader(source, lines)
    if root.tag != "robot":
        raise reader.error(root, "document", f"the root element is <{root.tag}>; a URDF's is "
                                             f"<robot>")
    links: dict[str, _Link] = {}
    for element in root.findall("link"):
        link = _Link(element, reader)
        if link.name in links:
            raise reader.error(element, f"link {link.name!r}", "a second link of this name; "
                                                              "link names must be unique")
        links[link.name] = link
    if not links:
        raise reader.error(root, "robot", "has no <link>")
    joints: list[_Joint] = []
    for element in root.findall("joint"):  # direct children: not <transmission>'s <joint>s
        joint = _Joint(element, reader, links)
        if any(other.name == joint.name for other in joints):
            raise reader.error(element, f"joint {joint.name!r}", "a second joint of this "
                                                                "name; joint names must be "
                                                                "unique")
        joints.append(joint)
    return links, joints, reader


def _parent_joints(links: Mapping[str, _Link], joints: Sequence[_Joint], reader: _Reader
                   ) -> tuple[str, dict[str, _Joint]]:
    """The root link's name and each other link's parent joint; errors for a link with two
    parents, a cycle, or several trees."""
    parent_joint: dict[str, _Joint] = {}
    for joint in joints:
        if joint.child in parent_joint:
            raise reader.error(joint.element, f"joint {joint.name!r}",
                               f"link {joint.child!r} already has the parent joint "
                               f"{parent_joint[joint.child].name!r}; a link has one parent")
        parent_joint[joint.child] = joint
    roots = [name for name in links if name not in parent_joint]
    if len(roots) > 1:
        raise reader.error(links[roots[1]].element, "robot",
                           f"links {roots} have no parent joint: a URDF is one tree; join "
                           f"them with joints")
    # every link has one parent, so a link the root does not reach lies on a cycle
    reached, below = set(roots), {name: [] for name in links}
    for joint in joints:
        below[joint.parent].append(joint.child)
    stack = list(roots)
    while stack:
        for child in below[stack.pop()]:
            reached.add(child)
            stack.append(child)
    unreached = [name for name in links if name not in reached]
    if unreached:
        cycle, link = [], unreached[0]
        while parent_joint[link].name not in cycle:
            cycle.append(parent_joint[link].name)
            link = parent_joint[link].parent
        raise reader.error(parent_joint[link].element, f"joint {parent_joint[link].name!r}",
                           f"the joints {cycle[cycle.index(parent_joint[link].name):]} form a "
                           f"cycle; a URDF is a tree")
    return roots[0], parent_joint


def _kept_joints(joints: Sequence[_Joint], names: Sequence[str] | None) -> list[_Joint]:
    """The movable joints the model keeps, in URDF order."""
    movable = [joint for joint in joints if joint.type in _MOVABLE]
    if names is None:
        return movable
    names = list(names)
    by_name = {joint.name: joint for joint in joints}
    for name in names:
        if name not in by_name:
            raise URDFError(f"joints: {name!r} is not a joint of the robot"
                            f"{suggest(name, list(by_name))}")
        if by_name[name].type == "fixed":
            raise URDFError(f"joints: {name!r} is a fixed joint and cannot move; name movable "
                            f"joints only")
        if names.count(name) > 1:
            raise URDFError(f"joints: {name!r} is named twice; name each joint once")
    if not names:
        raise URDFError("joints is empty; name at least one movable joint, or pass None for "
                        "every movable joint")
    return [joint for joint in movable if joint.name in names]


def _tree_order(joints: Sequence[_Joint], body_of: Mapping[str, str], root_body: str
                ) -> list[_Joint]:
    """``joints`` ordered so that each comes after the joint moving its parent body, ties in
    URDF order."""
    index = {joint.name: i for i, joint in enumerate(joints)}
    waiting: dict[str, list[_Joint]] = {}
    for joint in joints:
        waiting.setdefault(body_of[joint.parent], []).append(joint)
    ready = [(index[joint.name], joint.name) for joint in waiting.pop(root_body, [])]
    heapq.heapify(ready)
    by_name = {joint.name: joint for joint in joints}
    ordered = []
    while ready:
        joint = by_name[heapq.heappop(ready)[1]]
        ordered.append(joint)
        for child in waiting.pop(joint.child, []):
            heapq.heappush(ready, (index[child.name], child.name))
    return ordered


def _merge(parts: Sequence[tuple[_Link, np.ndarray]]) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass [kg], centre of mass [m] and inertia about it [kg m²] of rigidly joined links,
    each given with its frame in the common frame (4×4)."""
    mass = sum(link.mass for link, _ in parts)
    if mass == 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    centres = [frame[:3, :3] @ link.com + frame[:3, 3] for link, frame in parts]
    com = sum(link.mass * centre for (link, _), centre in zip(parts, centres, strict=True)) / mass
    inertia = np.zeros((3, 3))
    for (link, frame), centre in zip(parts, centres, strict=True):
        offset = centre - com  # parallel-axis theorem
        inertia += frame[:3, :3] @ link.inertia @ frame[:3, :3].T + link.mass * (
            offset @ offset * np.eye(3) - np.outer(offset, offset))
    return mass, com, inertia


def load_urdf(source: str | os.PathLike, *, base_link: str | None = None,
              floating_base: bool = _DEFAULT.floating_base,
              joints: Sequence[str] | None = _DEFAULT.joints,
              initial_positions: Mapping[str, float] | Sequence[float] | None = None,
              gravity: Sequence[float] = tuple(_DEFAULT.gravity),
              compliance: float = _DEFAULT.compliance) -> PBDModel:
    """The :class:`PBDModel` of a URDF file or document.

    Args:
        source: a URDF file's path, or the URDF text itself (a string starting with ``<``).
        base_link: the link fixed to the world (or, with ``floating_base``, the free root);
            its frame is the world frame. Default the URDF's root link. Every joint between
            the root and it must be fixed (or left out of ``joints``).
        floating_base: the base link (index 0) moves freely, with no joint to the world.
        joints: the movable joints to keep, a chain (each below the one before), e.g.
            Baxter's left arm; the other movable joints are frozen at their initial position
            and merged like fixed joints. Default every movable joint (any tree).
        initial_positions: joint positions [rad or m] at t = 0 (the model's ``joint_rest``)
            and of the frozen joints, by joint name, or one per kept joint in model order;
            unnamed joints are at 0.
        gravity: [m/s²], (3,), in the world frame.
        compliance: XPBD compliance of every joint's constraints (0 is rigid).

    Returns:
        The model: one link per kept joint's child (after merging), plus the root with
        ``floating_base``; joints in URDF order, each after the joint moving its parent.

    Raises:
        URDFError: malformed or hostile XML, unknown or unsupported joint types, missing
            links, non-positive masses, unphysical inertias, cycles, links with two parents,
            a ``joints`` subset that is not a chain, or a massless moving link.
    """
    if isinstance(source, str) and source.lstrip().startswith("<"):
        data, label = source, "<URDF text>"
    else:
        path = Path(source)
        if not path.is_file():
            raise URDFError(f"no URDF file at {str(path.resolve())!r}")
        data, label = path.read_bytes(), str(path)
    links, urdf_joints, reader = _read_robot(data, label)
    root, parent_joint = _parent_joints(links, urdf_joints, reader)
    base = root if base_link is None else base_link
    if base not in links:
        raise URDFError(f"base_link {base!r} is not a link of the robot"
                        f"{suggest(base, list(links))}")
    kept = _kept_joints(urdf_joints, joints)
    kept_names = {joint.name for joint in kept}
    for _, joint in _path_up(base, parent_joint):
        if joint.name in kept_names:
            raise URDFError(f"base_link {base!r} lies below the kept joint {joint.name!r}; "
                            f"choose a base above it or leave {joint.name!r} out of joints")
    # each link belongs to the body of the nearest kept joint above it, or to the base's
    top_down = _top_down(root, urdf_joints)
    body_of = {root: base}
    for link in top_down:
        joint = parent_joint[link]
        body_of[link] = link if joint.name in kept_names else body_of[joint.parent]
    if joints is not None:
        _check_chain(kept, body_of)
    ordered = _tree_order(kept, body_of, base)
    positions = _positions(initial_positions, urdf_joints, ordered)
    frame_in_root = {root: np.eye(4)}  # every link's frame in the root link's, 4×4
    for link in top_down:
        joint = parent_joint[link]
        frame_in_root[link] = frame_in_root[joint.parent] @ joint.motion(positions[joint.name])

    bodies = ([base] if floating_base else []) + [joint.child for joint in ordered]
    body_frame = {body: np.linalg.inv(frame_in_root[body]) for body in [base, *bodies]}
    mass, com, inertia = {}, {}, {}
    for body in body_frame:
        parts = [(links[name], body_frame[body] @ frame_in_root[name])
                 for name in links if body_of[name] == body]
        mass[body], com[body], inertia[body] = _merge(parts)
        if body in bodies and mass[body] == 0.0:
            raise reader.error(links[body].element, f"link {body!r}",
                               f"moves but has no mass (with the links merged into it: "
                               f"{[link.name for link, _ in parts]}); give it an <inertial>")
    index = {body: i for i, body in enumerate(bodies)}

    def joint_frame(joint: _Joint) -> tuple[np.ndarray, np.ndarray]:
        parent = body_of[joint.parent]
        frame = body_frame[parent] @ frame_in_root[joint.parent] @ joint.origin
        world = parent == base and not floating_base
        return frame[:3, 3] - (0.0 if world else com[parent]), _matrix_quaternion(frame[:3, :3])

    parent_x, parent_q = zip(*map(joint_frame, ordered), strict=True) if ordered else ((), ())
    m = len(ordered)
    return PBDModel(
        link_names=tuple(bodies),
        link_mass=np.array([mass[body] for body in bodies]),
        link_inertia=np.array([inertia[body] for body in bodies]).reshape(-1, 3, 3),
        joint_names=tuple(joint.name for joint in ordered),
        joint_type=np.array([JOINT_TYPES.index(_MOVABLE[joint.type]) for joint in ordered],
                            dtype=np.int64),
        joint_parent=np.array([index.get(body_of[joint.parent], -1) for joint in ordered],
                              dtype=np.int64),
        joint_child=np.array([index[joint.child] for joint in ordered], dtype=np.int64),
        joint_parent_x=np.array(parent_x).reshape(m, 3),
        joint_parent_q=np.array(parent_q).reshape(m, 4),
        joint_child_x=np.array([-com[joint.child] for joint in ordered]).reshape(m, 3),
        joint_child_q=np.tile([1.0, 0.0, 0.0, 0.0], (m, 1)),
        joint_axis=np.array([joint.axis for joint in ordered]).reshape(m, 3),
        joint_lower=np.array([joint.lower for joint in ordered]),
        joint_upper=np.array([joint.upper for joint in ordered]),
        joint_damping=np.array([joint.damping for joint in ordered]),
        joint_friction=np.array([joint.friction for joint in ordered]),
        joint_compliance=np.full(m, float(compliance)),
        joint_rest=np.array([positions[joint.name] for joint in ordered]),
        gravity=np.asarray(gravity, dtype=np.float64),
        floating_base=floating_base)


def _top_down(root: str, joints: Sequence[_Joint]) -> list[str]:
    """Every link but the root, each after its parent."""
    below: dict[str, list[str]] = {}
    for joint in joints:
        below.setdefault(joint.parent, []).append(joint.child)
    ordered, stack = [], [root]
    while stack:
        children = below.get(stack.pop(), [])
        ordered += children
        stack += children
    return ordered


def _path_up(link: str, parent_joint: Mapping[str, _Joint]) -> list[tuple[str, _Joint]]:
    """(link, its parent joint) from ``link`` up to the root."""
    path = []
    while link in parent_joint:
        path.append((link, parent_joint[link]))
        link = parent_joint[link].parent
    return path


def _check_chain(kept: Sequence[_Joint], body_of: Mapping[str, str]) -> None:
    """A ``joints`` subset must be a chain: one kept joint hanging from each body (every body
    is the base's or a kept joint's child, so the kept joints then form one path)."""
    hanging: dict[str, str] = {}
    for joint in kept:
        parent = body_of[joint.parent]
        if parent in hanging:
            raise URDFError(f"joints: {hanging[parent]!r} and {joint.name!r} both hang from "
                            f"link {parent!r}: the joints kept must be a chain, each below the "
                            f"one before; pass joints=None to keep every movable joint (a "
                            f"tree)")
        hanging[parent] = joint.name


def _positions(initial: Mapping[str, float] | Sequence[float] | None,
               joints: Sequence[_Joint], kept: Sequence[_Joint]) -> dict[str, float]:
    """Every joint's initial position [rad or m] by name (0 unless given); a sequence gives
    the ``kept`` joints' in order."""
    positions = {joint.name: 0.0 for joint in joints}
    if initial is None:
        return positions
    movable = [joint.name for joint in joints if joint.type in _MOVABLE]
    if isinstance(initial, Mapping):
        given = dict(initial)
        for name in given:
            if name not in movable:
                raise URDFError(f"initial_positions: {name!r} is not a movable joint of the "
                                f"robot{suggest(name, movable)}")
    else:
        values = list(initial)
        if len(values) != len(kept):
            raise URDFError(f"initial_positions has {len(values)} values; give one per kept "
                            f"joint ({len(kept)}: {[joint.name for joint in kept]}) or a "
                            f"mapping by joint name")
        given = dict(zip((joint.name for joint in kept), values, strict=True))
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | float | np.number) \
                or not np.isfinite(value):
            raise URDFError(f"initial_positions: {name!r} is {value!r}; give a finite number "
                            f"(rad or m)")
        positions[name] = float(value)
    return positions
