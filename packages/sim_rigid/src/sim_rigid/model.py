"""The static description of an articulated rigid robot in reduced coordinates.

Featherstone's numbering: link i hangs from joint i, whose parent is link ``joint_parent[i]``
(-1 for the world) with ``joint_parent[i] < i``, so the links are in tree order. A joint's
frame sits at ``joint_origin`` in its parent link's frame, turned by ``joint_rotation``;
the joint moves its link's frame relative to that joint frame:

- ``revolute``: one coordinate, a rotation [rad] about ``joint_axis`` (unit, joint frame);
- ``prismatic``: one coordinate, a translation [m] along ``joint_axis``;
- ``fixed``: no coordinate;
- ``free``: six coordinates, the translation x, y, z [m] of the link's frame in the joint
  frame, then Z-Y-X Euler angles [rad] (the link turned by Rz Ry Rx); singular where the
  middle angle is ±π/2 (:func:`sim_rigid.safety.check_state` refuses it).

Each link's centre of mass sits at ``link_com`` in its frame, with ``link_inertia`` about the
centre of mass in the link's frame. The coordinates of all joints, joint by joint, form the
robot's ``joint_q`` (d,); the 1-DOF joints' coordinates are the actuated ones, except
those of joints marked unactuated (``joint_actuated``: a hinge that only contact moves), each
driven through its ``joint_gear``.

Construction checks every field (shapes, finite values, physical masses and inertias, unit
axes, rotation matrices, tree order) and raises :class:`ModelError` naming the field, the
link or joint, and the fix.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from codesign.fields import float_array, index_array, unique_names
from codesign.inertia import inertia_problem

from .options import RigidOptions
from .sdf import shape_distance

__all__ = ["JOINT_COORDINATES", "JOINT_TYPES", "ModelError", "OBSTACLE_TYPES", "PARAMETERS",
           "RigidModel"]

JOINT_TYPES = ("revolute", "prismatic", "fixed", "free")
"""Joint type names, indexed by ``RigidModel.joint_type``."""

JOINT_COORDINATES = (1, 1, 0, 6)
"""Coordinates of each joint type of :data:`JOINT_TYPES`."""

OBSTACLE_TYPES = ("plane", "box", "sphere", "capsule", "mesh")
"""Contact shapes (signed distance fields, :mod:`sim_rigid.sdf`), indexed by
``RigidModel.obstacle_type``: a plane through ``obstacle_center`` whose normal is the third
column of ``obstacle_rotation`` (the solid side below it); a box, sphere, capsule (along
its frame's z) or mesh grid centred at ``obstacle_center``, turned by ``obstacle_rotation``,
within ``obstacle_half_extents`` (the half sizes of its bounding box)."""

PARAMETERS = ("link_mass", "link_com", "link_inertia", "joint_origin", "joint_axis",
              "joint_damping", "contact_point", "contact_stiffness", "contact_damping",
              "friction", "friction_stiffness", "contact_area")
"""The model fields a design may replace at step time (:meth:`RigidModel.parameters`); the
step's VJP returns a gradient for each. A design's ``joint_axis`` is a direction of any
nonzero length: the dynamics normalize it (:func:`sim_rigid.dynamics.unit_axes`)."""

_DEFAULT = RigidOptions()
_OWN_SHAPE_TOLERANCE = 1e-4
"""How deep [m] a contact point may sit inside its own link's shape (a point sampled on a
mesh surface reads a small negative distance from the grid's interpolation)."""
_UNIT_TOLERANCE = 1e-6
"""How far from 1 the norm of a joint axis may be, and from orthonormal a rotation."""


class ModelError(ValueError):
    """A :class:`RigidModel` field has the wrong shape or an unphysical value."""


def _not_rotations(rotation: np.ndarray) -> np.ndarray:
    """Indices of the matrices among ``rotation`` (k, 3, 3) that are not rotations
    (orthonormal to :data:`_UNIT_TOLERANCE`, determinant +1)."""
    error = np.abs(rotation @ rotation.transpose(0, 2, 1) - np.eye(3)).max(axis=(1, 2),
                                                                          initial=0.0)
    return np.flatnonzero((error > _UNIT_TOLERANCE) | (np.linalg.det(rotation) < 0.0))


@dataclasses.dataclass(frozen=True, eq=False)
class RigidModel:
    """n links, each hanging from its joint (same index), d coordinates.

    Attributes:
        link_names: (n,) names.
        link_mass: masses [kg], (n,).
        link_com: centres of mass in the link frames [m], (n, 3).
        link_inertia: inertia tensors about the centres of mass in the link frames [kg m²],
            (n, 3, 3).
        joint_names: (n,) names; joint i moves link i.
        joint_type: index into :data:`JOINT_TYPES`, (n,) int64.
        joint_parent: parent link index, -1 for the world, ``joint_parent[i] < i``, (n,).
        joint_origin: joint frame origins in the parent link's frame (the world's for -1)
            [m], (n, 3): the link lengths.
        joint_rotation: joint frame orientations in the parent's frame, rotation matrices,
            (n, 3, 3).
        joint_axis: unit axes of revolute and prismatic joints in the joint frame (unused
            for fixed and free joints), (n, 3).
        joint_damping: viscous damping per coordinate [N m s/rad or N s/m], (d,).
        joint_rest: coordinates of the initial state [rad or m], (d,).
        joint_actuated: whether each joint takes an action (default every revolute and
            prismatic joint; fixed and free joints never do), (n,) bool.
        joint_gear: torque [N m] or force [N] per unit of action of each actuated joint under
            torque actuation (default 1: the action is the torque), (n,); > 0.
        gravity: [m/s²], (3,).
        contact_link: the link each contact point is fixed on, (c,) int64.
        contact_point: contact points in their links' frames [m], (c, 3).
        obstacle_type: index into :data:`OBSTACLE_TYPES`, (o,) int64.
        obstacle_center: a point of each plane, each box's centre [m], (o, 3).
        obstacle_rotation: obstacle orientations in the world, rotation matrices, (o, 3, 3).
        obstacle_half_extents: half sizes [m] of each shape's bounding box in its frame
            (unused for planes; a sphere's (r, r, r), a capsule's (r, r, l + r), a mesh's
            grid), (o, 3).
        obstacle_link: the link each obstacle is fixed on, its centre and rotation in that
            link's frame; -1 (the default) a static obstacle in the world, (o,) int64.
            A contact point meets every obstacle not on its own link.
        obstacle_grid: the signed distances [m] of every mesh obstacle's grid, flattened
            (C order) one after the other, (G,).
        obstacle_grid_shape: grid nodes (n_x, n_y, n_z) of each mesh obstacle, zeros for
            other shapes, (o, 3) int64.
        obstacle_grid_start: where each mesh obstacle's samples start in ``obstacle_grid``,
            (o,) int64.
        contact_area: area weight of each contact point [m² or 1] scaling its force
            (default 1), (c,).
        friction_sharpness: 0 for the hard stick-slip switch, else the exponent p >= 2 of
            the smooth friction law (:mod:`sim_rigid.contact`).
        contact_stiffness: normal stiffness kn [N/m] per contact point.
        contact_damping: normal damping [N s/m²]: the force kd d ḋ grows with the
            penetration d, so it is continuous at first contact (the paper's law).
        friction: Coulomb coefficient μ.
        friction_stiffness: tangential viscous stiffness kt [N s/m] below sliding: the
            friction force is -kt v_t until it reaches μ f_n.
    """

    link_names: tuple[str, ...]
    link_mass: np.ndarray
    link_com: np.ndarray
    link_inertia: np.ndarray
    joint_names: tuple[str, ...]
    joint_type: np.ndarray
    joint_parent: np.ndarray
    joint_origin: np.ndarray
    joint_rotation: np.ndarray
    joint_axis: np.ndarray
    joint_damping: np.ndarray
    joint_rest: np.ndarray
    gravity: np.ndarray
    contact_link: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    contact_point: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    obstacle_type: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    obstacle_center: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    obstacle_rotation: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros((0, 3, 3)))
    obstacle_half_extents: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros((0, 3)))
    contact_stiffness: float = _DEFAULT.contact_stiffness
    contact_damping: float = _DEFAULT.contact_damping
    friction: float = _DEFAULT.friction
    friction_stiffness: float = _DEFAULT.friction_stiffness
    obstacle_link: np.ndarray | None = None
    obstacle_grid: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    obstacle_grid_shape: np.ndarray | None = None
    obstacle_grid_start: np.ndarray | None = None
    contact_area: np.ndarray | None = None
    friction_sharpness: float = _DEFAULT.friction_sharpness
    joint_actuated: np.ndarray | None = None
    joint_gear: np.ndarray | None = None

    def __post_init__(self):
        set_field = functools.partial(object.__setattr__, self)
        set_field("link_names", unique_names("link_names", self.link_names, error=ModelError))
        set_field("joint_names", unique_names("joint_names", self.joint_names, error=ModelError))
        n = len(self.link_names)
        if len(self.joint_names) != n:
            raise ModelError(f"{n} links need {n} joints (link i hangs from joint i), got "
                             f"{len(self.joint_names)}")
        c, o = len(np.asarray(self.contact_link)), len(np.asarray(self.obstacle_type))
        # shape fields left out (or empty, as dataclasses.replace carries them over from a
        # model without obstacles or points) default per entry: static, no grid, unit area
        single = np.isin(np.asarray(self.joint_type), [JOINT_TYPES.index("revolute"),
                                                       JOINT_TYPES.index("prismatic")])
        for name, default in (("joint_actuated", single), ("joint_gear", np.ones(n)),
                              ("obstacle_link", np.full(o, -1, np.int64)),
                              ("obstacle_grid_shape", np.zeros((o, 3), np.int64)),
                              ("obstacle_grid_start", np.zeros(o, np.int64)),
                              ("contact_area", np.ones(c))):
            if getattr(self, name) is None or np.size(getattr(self, name)) == 0:
                set_field(name, default)
        for name, count in (("joint_type", n), ("joint_parent", n), ("contact_link", c),
                            ("obstacle_type", o), ("obstacle_link", o),
                            ("obstacle_grid_start", o)):
            set_field(name, index_array(name, getattr(self, name), count, error=ModelError))
        bad = np.flatnonzero((self.joint_type < 0) | (self.joint_type >= len(JOINT_TYPES)))
        if bad.size:
            raise ModelError(f"joint_type of joint {self.joint_names[bad[0]]!r} is "
                             f"{self.joint_type[bad[0]]}: an index into {JOINT_TYPES}")
        d = self.coordinate_count
        shapes = {"link_mass": (n,), "link_com": (n, 3), "link_inertia": (n, 3, 3),
                  "joint_origin": (n, 3), "joint_rotation": (n, 3, 3), "joint_axis": (n, 3),
                  "joint_damping": (d,), "joint_rest": (d,), "gravity": (3,),
                  "contact_point": (c, 3), "obstacle_center": (o, 3),
                  "obstacle_rotation": (o, 3, 3), "obstacle_half_extents": (o, 3),
                  "contact_area": (c,), "obstacle_grid": (np.size(self.obstacle_grid),),
                  "joint_gear": (n,)}
        for name, shape in shapes.items():
            set_field(name, float_array(name, getattr(self, name), shape, error=ModelError))
        self._check_tree()
        self._check_links()
        self._check_joints()
        self._check_contacts()
        self._check_shapes()

    def _check_tree(self):
        for i, (name, parent) in enumerate(zip(self.joint_names, self.joint_parent,
                                               strict=True)):
            if not -1 <= parent < i:
                raise ModelError(f"joint {name!r} (index {i}) has parent link {parent}: links "
                                 f"must be in tree order, -1 <= joint_parent[i] < i")

    def _check_links(self):
        light = np.flatnonzero(~(self.link_mass > 0.0))
        if light.size:
            i = light[0]
            raise ModelError(f"link_mass of link {self.link_names[i]!r} is {self.link_mass[i]} "
                             f"kg: masses must be > 0")
        problem = inertia_problem(self.link_inertia)
        if problem is not None:
            raise ModelError(f"link_inertia of link {self.link_names[problem[0]]!r}: "
                             f"{problem[1]}")

    def _check_joints(self):
        moving = self.joint_type <= JOINT_TYPES.index("prismatic")
        actuated = np.asarray(self.joint_actuated)
        if actuated.shape != (self.link_count,) or actuated.dtype != np.bool_:
            raise ModelError(f"joint_actuated must be one bool per joint ({self.link_count}), "
                             f"got {actuated!r}")
        bad = np.flatnonzero(actuated & ~moving)
        if bad.size:
            raise ModelError(f"joint {self.joint_names[bad[0]]!r} is "
                             f"{JOINT_TYPES[self.joint_type[bad[0]]]} and cannot be actuated: "
                             f"only revolute and prismatic joints take an action")
        object.__setattr__(self, "joint_actuated", actuated.copy())
        bad = np.flatnonzero(~(self.joint_gear > 0.0))
        if bad.size:
            raise ModelError(f"joint_gear of joint {self.joint_names[bad[0]]!r} is "
                             f"{self.joint_gear[bad[0]]}: it must be > 0 (mark a joint that "
                             f"takes no action unactuated instead)")
        norms = np.linalg.norm(self.joint_axis, axis=1)
        bad = np.flatnonzero(moving & (np.abs(norms - 1.0) > _UNIT_TOLERANCE))
        if bad.size:
            raise ModelError(f"joint_axis of joint {self.joint_names[bad[0]]!r} has norm "
                             f"{norms[bad[0]]}: it must be a unit vector (normalize it)")
        bad = _not_rotations(self.joint_rotation)
        if bad.size:
            raise ModelError(f"joint_rotation of joint {self.joint_names[bad[0]]!r} is not a "
                             f"rotation matrix (orthonormal, determinant +1)")
        problem = RigidOptions.spec("damping").problem(self.joint_damping)
        if problem is not None:
            raise ModelError(f"joint_damping: {problem}")

    def _check_contacts(self):
        bad = np.flatnonzero((self.contact_link < 0) | (self.contact_link >= self.link_count))
        if bad.size:
            raise ModelError(f"contact_link[{bad[0]}] is {self.contact_link[bad[0]]}: a link "
                             f"index in [0, {self.link_count})")
        bad = np.flatnonzero((self.obstacle_type < 0)
                             | (self.obstacle_type >= len(OBSTACLE_TYPES)))
        if bad.size:
            raise ModelError(f"obstacle_type[{bad[0]}] is {self.obstacle_type[bad[0]]}: an "
                             f"index into {OBSTACLE_TYPES}")
        bad = _not_rotations(self.obstacle_rotation)
        if bad.size:
            raise ModelError(f"obstacle_rotation[{bad[0]}] is not a rotation matrix")
        boxes = self.obstacle_type == OBSTACLE_TYPES.index("box")
        bad = np.flatnonzero(boxes & ~np.all(self.obstacle_half_extents > 0.0, axis=1))
        if bad.size:
            raise ModelError(f"obstacle {bad[0]} is a box with half extents "
                             f"{self.obstacle_half_extents[bad[0]].tolist()} m: each must "
                             f"be > 0")
        for name in ("contact_stiffness", "contact_damping", "friction", "friction_stiffness"):
            value = getattr(self, name)
            problem = RigidOptions.spec(name).problem(value)
            if problem is not None:
                raise ModelError(f"{name}: {problem}")
            object.__setattr__(self, name, float(value))

    def _check_shapes(self):
        grid_shape = np.asarray(self.obstacle_grid_shape)
        if grid_shape.shape != (len(self.obstacle_type), 3) or grid_shape.dtype.kind not in "iu":
            raise ModelError(f"obstacle_grid_shape must be an integer array of shape "
                             f"({len(self.obstacle_type)}, 3), got {grid_shape.shape}")
        object.__setattr__(self, "obstacle_grid_shape", grid_shape.astype(np.int64))
        bad = np.flatnonzero((self.obstacle_link < -1) | (self.obstacle_link >= self.link_count))
        if bad.size:
            raise ModelError(f"obstacle_link[{bad[0]}] is {self.obstacle_link[bad[0]]}: -1 "
                             f"(the world) or a link index in [0, {self.link_count})")
        for o, kind in enumerate(self.obstacle_type):
            problem = _shape_problem(OBSTACLE_TYPES[kind], self.obstacle_half_extents[o],
                                     self.obstacle_grid_shape[o], self.obstacle_grid_start[o],
                                     self.obstacle_grid.size)
            if problem is not None:
                raise ModelError(f"obstacle {o} ({OBSTACLE_TYPES[kind]}): {problem}")
        bad = np.flatnonzero(~(self.contact_area > 0.0))
        if bad.size:
            raise ModelError(f"contact_area[{bad[0]}] is {self.contact_area[bad[0]]}: areas "
                             f"must be > 0 (drop the point instead)")
        self._check_points_outside_own_shapes()
        sharpness = self.friction_sharpness
        if not (sharpness == 0.0 or sharpness >= 2.0):
            raise ModelError(f"friction_sharpness is {sharpness}: 0 (the hard stick-slip "
                             f"switch) or an exponent >= 2 (smooth; larger is closer to "
                             f"the switch)")
        object.__setattr__(self, "friction_sharpness", float(sharpness))

    def _check_points_outside_own_shapes(self):
        for index, link in enumerate(self.contact_link):
            for o in np.flatnonzero(self.obstacle_link == link):
                local = self.obstacle_rotation[o].T @ (self.contact_point[index]
                                                       - self.obstacle_center[o])
                distance, _, _ = shape_distance(int(self.obstacle_type[o]),
                                                self.obstacle_half_extents[o],
                                                self.obstacle_sdf_grid(int(o)), local)
                if distance < -_OWN_SHAPE_TOLERANCE:
                    raise ModelError(
                        f"contact point {index} of link {self.link_names[link]!r} lies "
                        f"{-distance:.3g} m inside its own link's obstacle {o} "
                        f"({OBSTACLE_TYPES[self.obstacle_type[o]]}): put contact points on "
                        f"or outside their link's surface (a point never touches its own "
                        f"link's shapes, so it would sense nothing where it sits)")

    def obstacle_sdf_grid(self, obstacle: int) -> np.ndarray:
        """The signed distances [m] of a mesh obstacle's grid, (n_x, n_y, n_z) (an empty
        (0, 0, 0) array for other shapes)."""
        shape = tuple(int(n) for n in self.obstacle_grid_shape[obstacle])
        start = int(self.obstacle_grid_start[obstacle])
        return self.obstacle_grid[start:start + int(np.prod(shape))].reshape(shape)

    @property
    def link_count(self) -> int:
        """n, the number of links (= joints)."""
        return len(self.link_names)

    @property
    def joint_coordinates(self) -> np.ndarray:
        """Coordinates per joint, (n,) int64 (:data:`JOINT_COORDINATES`)."""
        return np.asarray(JOINT_COORDINATES, dtype=np.int64)[self.joint_type]

    @property
    def joint_first(self) -> np.ndarray:
        """Index of each joint's first coordinate in ``joint_q``, (n,) int64."""
        counts = self.joint_coordinates
        return np.cumsum(counts) - counts

    @property
    def coordinate_count(self) -> int:
        """d, the number of coordinates (and of rates)."""
        return int(self.joint_coordinates.sum())

    @property
    def actuated(self) -> np.ndarray:
        """Indices of the actuated coordinates (those of the revolute and prismatic joints
        not marked unactuated, in joint order), (a,) int64; the action holds one value
        each."""
        return self.joint_first[self.joint_actuated]

    @property
    def actuated_gear(self) -> np.ndarray:
        """Torque [N m] or force [N] per unit of action of each actuated coordinate under
        torque actuation, (a,)."""
        return self.joint_gear[self.joint_actuated]

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        """One name per coordinate: a 1-DOF joint's name, a free joint's ``name.x`` ...
        ``name.rx``, (d,)."""
        names = []
        for name, kind in zip(self.joint_names, self.joint_type, strict=True):
            if JOINT_TYPES[kind] == "free":
                names.extend(f"{name}.{axis}" for axis in ("x", "y", "z", "rz", "ry", "rx"))
            elif JOINT_TYPES[kind] != "fixed":
                names.append(name)
        return tuple(names)

    def parameters(self) -> dict[str, np.ndarray]:
        """The model's values of :data:`PARAMETERS`, by field name (the contact
        coefficients as arrays of shape ())."""
        return {name: np.asarray(getattr(self, name), dtype=np.float64) for name in PARAMETERS}


def _shape_problem(kind: str, half, grid_shape, grid_start, grid_size) -> str | None:
    """What is wrong with one shape's sizes and grid, or None."""
    if kind == "plane":
        return None
    if not np.all(half > 0.0):
        return f"half extents {half.tolist()} m: each must be > 0"
    if kind in ("sphere", "capsule") and half[0] != half[1]:
        return f"half extents {half.tolist()} m: the first two are the radius, equal"
    if kind == "sphere" and half[2] != half[0]:
        return f"half extents {half.tolist()} m: a sphere's are (r, r, r)"
    if kind == "capsule" and not half[2] > half[0]:
        return (f"half extents {half.tolist()} m: a capsule's are (r, r, l + r) with a "
                f"half length l > 0 (use a sphere for l = 0)")
    if kind == "mesh":
        if not np.all(grid_shape >= 2):
            return f"grid of {grid_shape.tolist()} nodes: at least 2 per axis"
        if not 0 <= grid_start <= grid_size - int(np.prod(grid_shape)):
            return (f"grid samples [{grid_start}, {grid_start + int(np.prod(grid_shape))}) "
                    f"lie outside obstacle_grid ({grid_size} values)")
    return None
