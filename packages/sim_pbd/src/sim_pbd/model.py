"""The static description of an articulated rigid robot: links, joints, gravity.

Links are rigid bodies in maximal coordinates. A link's body frame has its origin at the
link's centre of mass and the orientation of its URDF link frame, so the inertia tensor is
the URDF's rotated into the link frame. Fixed joints are merged into their parent link before
a model is built (masses, centres of mass and inertias combined), so every joint here moves.

The world is link index -1: a joint whose parent is -1 attaches its child to the world
frame (a fixed base). With ``floating_base`` the root link has no joint to the world.

Arrays are float64 NumPy arrays; quaternions are (w, x, y, z).
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["JOINT_TYPES", "PARAMETERS", "PBDModel"]

JOINT_TYPES = ("revolute", "prismatic")
"""Joint type names, indexed by ``PBDModel.joint_type`` (URDF ``continuous`` is a revolute
joint without limits)."""

PARAMETERS = ("link_mass", "link_inertia", "joint_parent_x", "joint_child_x", "joint_damping",
              "joint_compliance")
"""The model fields a design may replace at step time (:meth:`PBDModel.parameters`); the
step's VJP returns a gradient for each."""


@dataclasses.dataclass(frozen=True, eq=False)
class PBDModel:
    """n links and m joints (tree order: a joint's parent link comes before its child).

    Attributes:
        link_names: URDF link names, (n,).
        link_mass: masses [kg], (n,).
        link_inertia: inertia tensors about the centre of mass in the body frame [kg m²],
            symmetric positive definite, (n, 3, 3).
        joint_names: URDF joint names in URDF order, (m,); the action vector holds one
            torque [N m] (revolute) or force [N] (prismatic) per joint in this order.
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
