"""Video frames of an articulated robot with OpenCV: links, joints, end-effector trace.

URDF meshes are not loaded: each link is drawn as a polyline through the joint origins it
carries (its parent joint's and its children's), ending at its centre of mass when it
carries one joint only. The view is an orthographic projection along a world axis
(:data:`sim_pbd.options.VIEWS`).
"""

from __future__ import annotations

import cv2
import numpy as np

from .kinematics import joint_origins
from .model import PBDModel
from .state import PBDState

__all__ = ["PROJECTIONS", "default_view", "end_effector_path", "link_polylines", "render_frame",
           "render_frames"]

PROJECTIONS = {"front": np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]),
               "side": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
               "top": np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])}
"""Per view of :data:`sim_pbd.options.VIEWS`, the world directions drawn right and up, (2, 3):
front looks along -x, side along +y, top along -z."""

_BACKGROUND = (250, 250, 248)
_LINK = (40, 90, 200)
_JOINT = (30, 30, 30)
_TRACE = (220, 120, 40)


def link_polylines(model: PBDModel, state: PBDState, params: dict) -> list[np.ndarray]:
    """Per link, the world points [m] it is drawn through, (k, 3) each: the origins of the
    joints it carries, then its centre of mass when that makes fewer than two."""
    points: list[list[np.ndarray]] = [[] for _ in range(model.link_count)]
    _, joints = joint_origins(model, state, params)
    for j, (parent, child) in enumerate(zip(model.joint_parent, model.joint_child, strict=True)):
        points[child].append(joints[j])
        if parent >= 0:
            points[parent].append(joints[j])
    for link, link_points in enumerate(points):
        if len(link_points) < 2:
            link_points.append(state.link_x[link])
    return [np.asarray(p) for p in points]


def default_view(model: PBDModel, state: PBDState, params: dict, *,
                 view: str = "front") -> tuple[float, float, float, float]:
    """Window (u_min, u_max, v_min, v_max) [m] of ``view`` centred on the first joint, wide
    enough for every pose: the robot's reach (the summed lengths of its links' polylines)
    plus a margin."""
    polylines = link_polylines(model, state, params)
    reach = sum(float(np.sum(np.linalg.norm(np.diff(p, axis=0), axis=1))) for p in polylines)
    reach = 1.1 * reach if reach > 0 else 1.0
    u, v = PROJECTIONS[view] @ joint_origins(model, state, params)[1][0]
    return (u - reach, u + reach, v - reach, v + reach)


def render_frame(model: PBDModel, state: PBDState, *, width: int = 640, height: int = 480,
                 params: dict | None = None, view: str = "front", window=None,
                 trace: np.ndarray | None = None) -> np.ndarray:
    """Draw ``state``'s robot: uint8 RGB image, shape (height, width, 3).

    ``params`` holds the joint frames (a design's; default :meth:`PBDModel.parameters`);
    ``view`` is a key of :data:`PROJECTIONS`; ``window`` the rectangle (u_min, u_max,
    v_min, v_max) [m] it shows, default :func:`default_view`; ``trace`` earlier end-effector
    positions [m], (k, 3), drawn as a line.
    """
    if width < 16 or height < 16:
        raise ValueError(f"frame size must be at least 16×16 pixels, got {width}×{height}")
    if view not in PROJECTIONS:
        raise ValueError(f"unknown view {view!r}: use one of {sorted(PROJECTIONS)}")
    params = model.parameters() if params is None else params
    u0, u1, v0, v1 = default_view(model, state, params, view=view) if window is None else window
    scale = min(width / (u1 - u0), height / (v1 - v0))
    center = np.array([0.5 * (u0 + u1), 0.5 * (v0 + v1)])

    def pixels(points):
        uv = (np.asarray(points, dtype=np.float64).reshape(-1, 3) @ PROJECTIONS[view].T
              - center) * scale
        xy = np.stack([width / 2 + uv[:, 0], height / 2 - uv[:, 1]], axis=1)
        return np.round(xy * 16).astype(np.int32)  # 4 fractional bits

    image = np.full((height, width, 3), _BACKGROUND, dtype=np.uint8)
    draw = dict(lineType=cv2.LINE_AA, shift=4)
    thickness = max(2, int(round(0.012 * min(width, height))))
    if trace is not None and len(trace) > 1:
        cv2.polylines(image, [pixels(trace)], False, _TRACE, max(1, thickness // 2), **draw)
    for points in link_polylines(model, state, params):
        cv2.polylines(image, [pixels(points)], False, _LINK, thickness, **draw)
    for point in pixels(joint_origins(model, state, params)[1]):
        cv2.circle(image, tuple(map(int, point)), 16 * (thickness // 2 + 2), _JOINT, -1, **draw)
    return image


def end_effector_path(model: PBDModel, states, params: dict) -> np.ndarray:
    """The end of the last link's polyline (:func:`link_polylines`: its last joint origin or
    its centre of mass) in each of ``states``, world positions [m], (k, 3)."""
    return np.array([link_polylines(model, state, params)[-1][-1] for state in states])


def render_frames(model: PBDModel, states, *, width: int = 640, height: int = 480,
                  params: dict | None = None, view: str = "front", window=None) -> list:
    """:func:`render_frame` of each of ``states`` (a motion, in order) with the end
    effector's path up to that state drawn as its trace; one ``window`` for all (default
    :func:`default_view` of the first state), so the camera holds still."""
    params = model.parameters() if params is None else params
    states = list(states)
    if window is None and states:
        window = default_view(model, states[0], params, view=view)
    path = end_effector_path(model, states, params)
    return [render_frame(model, state, width=width, height=height, params=params, view=view,
                         window=window, trace=path[: k + 1])
            for k, state in enumerate(states)]
