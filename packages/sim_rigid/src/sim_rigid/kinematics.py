"""A point fixed on a link, in the world, with its Jacobians: what a task term (a fingertip
reaching targets) reads from a state and differentiates.

The Jacobians come from one forward-mode pass of the compiled forward kinematics
(:func:`sim_rigid._kernels.link_point_dual`, equal to the NumPy reference
:func:`sim_rigid.dynamics.link_frames_dual`) with d + 6 n tangent directions (the
coordinates, then every joint origin's entries, then every joint axis direction's), the same
dual arithmetic the dynamics' tangents use. Joint
axes are directions of any nonzero length, normalized as the dynamics do
(:func:`sim_rigid.dynamics.unit_axes`); None stands for the model's.
"""

from __future__ import annotations

import numpy as np

from . import _kernels, kernels
from .dynamics import dual, node_table, unit_axes
from .model import RigidModel

__all__ = ["link_point", "link_point_jacobians"]


def _check_link(model: RigidModel, link: int, point) -> np.ndarray:
    if not 0 <= int(link) < model.link_count:
        raise ValueError(f"link index {link} is outside the robot's {model.link_count} links "
                         f"{list(model.link_names)}")
    point = np.asarray(point, dtype=np.float64)
    if point.shape != (3,):
        raise ValueError(f"a link point is [x, y, z] in the link's frame, got shape "
                         f"{point.shape}")
    return point


def link_point(model: RigidModel, joint_origin, joint_q, link: int, point, *,
               joint_axis=None) -> np.ndarray:
    """World position [m] (3,) of ``point`` (3,) [m, in link ``link``'s frame] at joint
    origins (n, 3) [m], joint axis directions (n, 3) and coordinates ``joint_q`` (d,)."""
    point = _check_link(model, link, point)
    axis = unit_axes(model.joint_axis if joint_axis is None else joint_axis)
    return _kernels.link_point_dual(
        kernels.node_arrays(model), np.asarray(joint_q, dtype=np.float64)[None],
        np.asarray(joint_origin, dtype=np.float64)[None], axis,
        int(node_table(model).link_node[link]), point)[0]


def link_point_jacobians(model: RigidModel, joint_origin, joint_q, link: int, point, *,
                         joint_axis=None) -> tuple[np.ndarray, ...]:
    """(position (3,) [m], ∂position/∂joint_q (3, d), ∂position/∂joint_origin (3, n, 3),
    ∂position/∂joint_axis (3, n, 3), of the directions) of :func:`link_point`."""
    point = _check_link(model, link, point)
    joint_origin = np.asarray(joint_origin, dtype=np.float64)
    joint_q = np.asarray(joint_q, dtype=np.float64)
    d, n = joint_q.size, joint_origin.shape[0]
    directions = np.eye(d + 6 * n)
    rows = d + 6 * n + 1
    q = dual(joint_q, directions[:, :d], rows)
    origin = dual(joint_origin, directions[:, d:d + 3 * n].reshape(-1, n, 3), rows)
    axis = unit_axes(model.joint_axis if joint_axis is None else joint_axis,
                     directions[:, d + 3 * n:].reshape(-1, n, 3), rows)
    # the point is constant in its link: every row (value and tangents) is R_k p
    position = _kernels.link_point_dual(kernels.node_arrays(model), q, origin, axis,
                                        int(node_table(model).link_node[link]), point)
    return (position[0], position[1:d + 1].T,
            position[d + 1:d + 1 + 3 * n].T.reshape(3, n, 3),
            position[d + 1 + 3 * n:].T.reshape(3, n, 3))
