"""Video frames of an articulated rigid robot with OpenCV: each link drawn from its joint to
the joints it carries (or to its centre of mass at a chain's end), joints as dots, contact
points as small dots (red while touching), obstacles as outlines (a box's edges, a plane's
trace), in an orthographic projection along a world axis
(:data:`sim_rigid.options.VIEWS`)."""

from __future__ import annotations

import cv2
import numpy as np

from .contact import signed_distance
from .dynamics import link_frames
from .model import OBSTACLE_TYPES, RigidModel
from .state import RigidState

__all__ = ["PROJECTIONS", "contact_points", "default_view", "link_segments",
           "obstacle_segments", "render_frame"]

PROJECTIONS = {"front": np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]),
               "side": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
               "top": np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])}
"""Per view, the world directions drawn right and up, (2, 3)."""

_BACKGROUND = (250, 250, 248)
_LINK = (40, 90, 200)
_JOINT = (30, 30, 30)
_CONTACT = (120, 120, 120)
_TOUCHING = (220, 40, 40)
_OBSTACLE = (90, 90, 90)
_PLANE_REACH = 100.0  # [m] each side of a plane's point: past any window


def link_segments(model: RigidModel, params: dict, joint_q) -> np.ndarray:
    """World segments [m] the links are drawn as, (k, 2, 3): from each link's frame origin
    (its joint) to each child joint's origin, and to its centre of mass when it has no
    child."""
    rotation, origin = link_frames(model, params, joint_q)
    segments = []
    has_child = np.zeros(model.link_count, dtype=bool)
    for i, parent in enumerate(model.joint_parent):
        if parent >= 0:
            has_child[parent] = True
            segments.append((origin[parent], origin[i]))
    for i in np.flatnonzero(~has_child):
        com = params.get("link_com", model.link_com)[i]  # the design's, else the model's
        segments.append((origin[i], origin[i] + rotation[i] @ com))
    return np.array(segments).reshape(-1, 2, 3)


def contact_points(model: RigidModel, params: dict, joint_q) -> tuple[np.ndarray, np.ndarray]:
    """World positions [m] of the contact points (c, 3) and whether each penetrates an
    obstacle (c,) bool, at coordinates ``joint_q``."""
    rotation, origin = link_frames(model, params, joint_q)
    link = model.contact_link
    points = origin[link] + np.einsum("cij,cj->ci", rotation[link], params["contact_point"])
    touching = np.array([any(signed_distance(model, o, x, frame=None if other < 0 else
                                             (rotation[other], origin[other]))[0] < 0.0
                             for o, other in enumerate(model.obstacle_link) if other != own)
                         for x, own in zip(points, link, strict=True)], dtype=bool)
    return points.reshape(-1, 3), touching


def obstacle_segments(model: RigidModel, frames=None) -> np.ndarray:
    """World segments [m] the obstacles are drawn as, (k, 2, 3): a plane's two lines through
    its point along its in-plane axes, any other shape's bounding box (twelve edges), those
    on links placed by ``frames`` (the link rotations (n, 3, 3) and origins (n, 3) of
    :func:`sim_rigid.dynamics.link_frames`; needed when the model has such shapes)."""
    segments = []
    for kind, center, rotation, half, link in zip(
            model.obstacle_type, model.obstacle_center, model.obstacle_rotation,
            model.obstacle_half_extents, model.obstacle_link, strict=True):
        if link >= 0:
            center = frames[1][link] + frames[0][link] @ center
            rotation = frames[0][link] @ rotation
        if OBSTACLE_TYPES[kind] == "plane":
            for axis in (0, 1):
                reach = _PLANE_REACH * rotation[:, axis]
                segments.append((center - reach, center + reach))
            continue
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1)
                            for sz in (-1, 1)], dtype=np.float64)
        world = center + (corners * half) @ rotation.T
        for a in range(8):
            for b in range(a + 1, 8):
                if np.sum(corners[a] != corners[b]) == 1:  # corners one edge apart
                    segments.append((world[a], world[b]))
    return np.array(segments, dtype=np.float64).reshape(-1, 2, 3)


def default_view(model: RigidModel, params: dict, joint_q, *,
                 view: str = "front") -> tuple[float, float, float, float]:
    """Window (u_min, u_max, v_min, v_max) [m] of ``view`` centred on the first link's joint,
    wide enough for any pose: the summed segment lengths plus a margin."""
    segments = link_segments(model, params, joint_q)
    reach = 1.1 * float(np.sum(np.linalg.norm(segments[:, 1] - segments[:, 0], axis=1)))
    reach = reach if reach > 0 else 1.0
    u, v = PROJECTIONS[view] @ segments[0, 0]
    return (u - reach, u + reach, v - reach, v + reach)


def render_frame(model: RigidModel, state: RigidState, *, params: dict, width: int = 640,
                 height: int = 480, view: str = "front", window=None) -> np.ndarray:
    """One frame, uint8 (height, width, 3): the links at ``state.joint_q`` with the model's
    :data:`~sim_rigid.model.PARAMETERS` ``params`` seen in ``view`` through ``window``
    (u_min, u_max, v_min, v_max) [m] (default :func:`default_view`)."""
    window = default_view(model, params, state.joint_q, view=view) if window is None else window
    u_min, u_max, v_min, v_max = window
    scale = min(width / (u_max - u_min), height / (v_max - v_min))
    centre = np.array([(u_min + u_max) / 2, (v_min + v_max) / 2])

    def pixel(point):
        u, v = (PROJECTIONS[view] @ point - centre) * scale
        return int(round(width / 2 + u)), int(round(height / 2 - v))

    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[:] = _BACKGROUND
    thickness = max(2, width // 160)
    for start, end in obstacle_segments(model, link_frames(model, params, state.joint_q)):
        cv2.line(frame, pixel(start), pixel(end), _OBSTACLE, 1, cv2.LINE_AA)
    for start, end in link_segments(model, params, state.joint_q):
        cv2.line(frame, pixel(start), pixel(end), _LINK, thickness, cv2.LINE_AA)
        cv2.circle(frame, pixel(start), thickness + 1, _JOINT, -1, cv2.LINE_AA)
    for point, touching in zip(*contact_points(model, params, state.joint_q), strict=True):
        cv2.circle(frame, pixel(point), max(1, thickness - 1),
                   _TOUCHING if touching else _CONTACT, -1, cv2.LINE_AA)
    return frame
