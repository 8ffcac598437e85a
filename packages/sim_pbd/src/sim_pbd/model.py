"""The static description of an articulated rigid robot: links, joints, gravity.

Links are rigid bodies in maximal coordinates. A link's body frame has its origin at the
link's centre of mass and the orientation of its URDF link frame, so the inertia tensor is
the URDF's rotated into the link frame. Fixed joints are merged into their parent link before
a model is built (masses, centres of mass and inertias combined), so every joint here moves.

The world is link index -1: a joint whose parent is -1 attaches its child to the world
frame (a fixed base). With ``floating_base`` the root link has no joint to the world.

Arrays are float64 NumPy arrays; quaternions are (w, x, y, z). Construction checks every
field (shapes, finite values, physical masses and inertias, unit axes and quaternions, tree
order, limits) and raises :class:`ModelError` naming the field, the link or joint, and the fix.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from codesign.fields import float_array, index_array, unique_names
from codesign.inertia import inertia_problem

from .options import PBDOptions

__all__ = ["JOINT_TYPES", "ModelError", "PARAMETERS", "PBDModel"]

JOINT_TYPES = ("revolute", "prismatic")
"""Joint type names, indexed by ``PBDModel.joint_type`` (URDF ``continuous`` is a revolute
joint without limits)."""

PARAMETERS = ("link_mass", "link_inertia", "joint_parent_x", "joint_child_x", "joint_damping",
              "joint_compliance")
"""The model fields a design may replace at step time (:meth:`PBDModel.parameters`); the
step's VJP returns a gradient for each."""

_UNIT_TOLERANCE = 1e-6
"""How far from 1 the norm of a joint axis or quaternion may be (float32 rounding)."""


class ModelError(ValueError):
    """A :class:`PBDModel` field has the wrong shape or an unphysical value."""


@dataclasses.dataclass(frozen=True, eq=False)
class PBDModel:
    """n links and m joints (tree order: a joint's parent link comes before its child).

    Attributes:
        link_names: URDF link names, (n,).
        link_mass: masses [kg], (n,).
        link_inertia: inertia tensors about the centre of mass in the body frame [kg m²],
            symmetric positive definite, (n, 3, 3).
        joint_names: URDF joint names in URDF order (each after the joint moving its
            parent), (m,); the action vector holds one torque [N m] (revolute) or force [N]
            (prismatic) per joint in this order.
        joint_type: index into :data:`JOINT_TYPES`, (m,) int64.
        joint_parent: parent link index, -1 for the world, (m,) int64.
        joint_child: child link index, (m,) int64.
        joint_parent_x: joint origin in the parent's body frame [m] (the world frame for
            parent -1), (m, 3).
        joint_parent_q: orientation of the joint frame in the parent's body frame, (m, 4).
        joint_child_x: joint origin in the child's body frame [m], (m, 3).
        joint_child_q: orientation of the joint frame in the child's body frame, (m, 4).
        joint_axis: unit joint axis in the joint frame, (m, 3).
        joint_lower, joint_upper: position limits [rad or m], ±inf when unlimited, (m,).
        joint_damping: viscous damping [N m s/rad or N s/m], (m,).
        joint_friction: Coulomb friction [N m or N], (m,).
        joint_compliance: XPBD compliance of the joint's constraints (inverse stiffness,
            0 = rigid), (m,).
        joint_rest: joint positions of the rest pose the initial state starts from
            [rad or m], (m,).
        gravity: [m/s²], (3,).
        floating_base: the root link (index 0) moves freely (no joint to the world).
    """

    link_names: tuple[str, ...]
    link_mass: np.ndarray
    link_inertia: np.ndarray
    joint_names: tuple[str, ...]
    joint_type: np.ndarray
    joint_parent: np.ndarray
    joint_child: np.ndarray
    joint_parent_x: np.ndarray
    joint_parent_q: np.ndarray
    joint_child_x: np.ndarray
    joint_child_q: np.ndarray
    joint_axis: np.ndarray
    joint_lower: np.ndarray
    joint_upper: np.ndarray
    joint_damping: np.ndarray
    joint_friction: np.ndarray
    joint_compliance: np.ndarray
    joint_rest: np.ndarray
    gravity: np.ndarray
    floating_base: bool = False

    def __post_init__(self):
        set_field = functools.partial(object.__setattr__, self)
        set_field("link_names", unique_names("link_names", self.link_names, error=ModelError))
        set_field("joint_names", unique_names("joint_names", self.joint_names, error=ModelError))
        n, m = self.link_count, self.joint_count
        shapes = {"link_mass": (n,), "link_inertia": (n, 3, 3), "joint_parent_x": (m, 3),
                  "joint_parent_q": (m, 4), "joint_child_x": (m, 3), "joint_child_q": (m, 4),
                  "joint_axis": (m, 3), "joint_lower": (m,), "joint_upper": (m,),
                  "joint_damping": (m,), "joint_friction": (m,), "joint_compliance": (m,),
                  "joint_rest": (m,), "gravity": (3,)}
        for name, shape in shapes.items():
            set_field(name, float_array(name, getattr(self, name), shape, error=ModelError,
                                        finite=name not in ("joint_lower", "joint_upper"),
                                        keep_float=True))
        for name in ("joint_type", "joint_parent", "joint_child"):
            set_field(name, index_array(name, getattr(self, name), m, error=ModelError))
        if not isinstance(self.floating_base, bool | np.bool_):
            raise ModelError(f"floating_base must be true or false, got {self.floating_base!r}")
        set_field("floating_base", bool(self.floating_base))
        self._check_links()
        self._check_tree()
        self._check_joints()

    def _check_links(self):
        light = np.flatnonzero(~(self.link_mass > 0.0))
        if light.size:
            i = light[0]
            raise ModelError(f"link_mass of link {self.link_names[i]!r} is {self.link_mass[i]} "
                             f"kg: masses must be > 0 (give the link an <inertial> mass)")
        problem = inertia_problem(self.link_inertia)
        if problem is not None:
            raise ModelError(f"link_inertia of link {self.link_names[problem[0]]!r}: "
                             f"{problem[1]}")

    def _check_tree(self):
        n, m = self.link_count, self.joint_count
        for j, name in enumerate(self.joint_names):
            if not 0 <= self.joint_type[j] < len(JOINT_TYPES):
                raise ModelError(f"joint_type of joint {name!r} is {self.joint_type[j]}: an "
                                 f"index into {JOINT_TYPES}")
            parent, child = self.joint_parent[j], self.joint_child[j]
            if not (0 <= child < n and -1 <= parent < child):
                raise ModelError(f"joint {name!r} joins link {parent} to link {child}: the "
                                 f"links must be in tree order, -1 <= joint_parent < "
                                 f"joint_child < {n} (a parent before its children)")
            if self.floating_base and parent == -1:
                raise ModelError(f"joint {name!r} attaches link {child} to the world, but a "
                                 f"floating-base model has no joint to the world; set "
                                 f"floating_base=False or reparent the joint")
        children = np.bincount(self.joint_child, minlength=n)
        roots = 1 if self.floating_base else 0
        if n != m + roots or (children[roots:] != 1).any() or children[:roots].any():
            raise ModelError(f"every link but {'the floating root (link 0)' if roots else 'none'}"
                             f" must be the child of exactly one joint; joints per link: "
                             f"{dict(zip(self.link_names, children.tolist(), strict=True))}")

    def _check_joints(self):
        for field, vectors in (("joint_axis", self.joint_axis),
                               ("joint_parent_q", self.joint_parent_q),
                               ("joint_child_q", self.joint_child_q)):
            norms = np.sqrt((vectors * vectors).sum(axis=1))
            bad = np.flatnonzero(np.abs(norms - 1.0) > _UNIT_TOLERANCE)
            if bad.size:
                raise ModelError(f"{field} of joint {self.joint_names[bad[0]]!r} has norm "
                                 f"{norms[bad[0]]}: it must be a unit vector (normalize it)")
        lower, upper = self.joint_lower, self.joint_upper
        bad = np.flatnonzero(~((lower <= upper) & (lower < np.inf) & (upper > -np.inf)))
        if bad.size:
            j = bad[0]
            raise ModelError(f"joint {self.joint_names[j]!r} has limits [{lower[j]}, "
                             f"{upper[j]}]: need joint_lower <= joint_upper (±inf for no "
                             f"limit)")
        if (self.joint_friction < 0).any():
            j = int(np.argmax(self.joint_friction < 0))
            raise ModelError(f"joint_friction of joint {self.joint_names[j]!r} is "
                             f"{self.joint_friction[j]}: friction must be >= 0")
        # the options' declared physical bounds, also for a model built in Python
        for field, option_name in (("joint_damping", "damping"),
                                   ("joint_compliance", "compliance")):
            problem = PBDOptions.spec(option_name).problem(getattr(self, field))
            if problem is not None:
                raise ModelError(f"{field}: {problem}")

    @property
    def link_count(self) -> int:
        """n, the number of dynamic links."""
        return len(self.link_names)

    @property
    def joint_count(self) -> int:
        """m, the number of joints (= the action size)."""
        return len(self.joint_names)

    def parameters(self) -> dict[str, np.ndarray]:
        """The model's values of :data:`PARAMETERS`, by field name."""
        return {name: getattr(self, name) for name in PARAMETERS}
