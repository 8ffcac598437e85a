"""Video frames of a vine with OpenCV: bodies, contact points, active contacts, obstacles.

The vine's centreline is drawn light blue, each rigid body dark blue over it, contact points
red, and contact points touching an obstacle magenta and larger; obstacles are green.
"""

from __future__ import annotations

import cv2
import numpy as np

from .kinematics import centerline_vertices
from .model import VineModel
from .obstacles import Circle, Polygon, Wall
from .state import VineState

__all__ = ["render_frame", "default_view"]

_BACKGROUND = (250, 250, 248)
_OBSTACLE = (120, 160, 110)
_BODY = (40, 90, 200)
_CENTERLINE = (150, 185, 235)
_CONTACT = (200, 60, 40)
_ACTIVE = (230, 40, 180)
_BASE = (30, 30, 30)


def default_view(model: VineModel, *, reach: float | None = None) -> tuple[float, ...]:
    """World rectangle (x_min, x_max, y_min, y_max) [m] holding the obstacles and the vine.

    ``reach`` is how far the vine may get from its base [m]; default twice its length.
    """
    reach = 2.0 * model.length if reach is None else reach
    points = [model.base[:2] + reach * np.array([np.cos(a), np.sin(a)])
              for a in model.base[2] + np.array([-0.6, 0.0, 0.6])]
    points += [model.base[:2], *model.initial_configuration()[:, :2]]
    for obstacle in model.obstacles:
        if isinstance(obstacle, Circle):
            points += [obstacle.center - obstacle.radius, obstacle.center + obstacle.radius]
        elif isinstance(obstacle, Polygon):
            points += list(obstacle.vertices)
        elif isinstance(obstacle, Wall):
            points += [obstacle.start, obstacle.end]
    points = np.asarray(points)
    low, high = points.min(axis=0), points.max(axis=0)
    margin = 0.08 * max(float(np.max(high - low)), 1e-3)
    return (low[0] - margin, high[0] + margin, low[1] - margin, high[1] + margin)


def render_frame(model: VineModel, state: VineState, *, width: int = 640, height: int = 480,
                 view=None, contact_tolerance: float = 1e-3) -> np.ndarray:
    """Draw ``state``'s vine: uint8 RGB image, shape (height, width, 3).

    ``view`` is the world rectangle ``(x_min, x_max, y_min, y_max)`` [m], default
    :func:`default_view`. Contact points closer than ``contact_tolerance`` [m] to an
    obstacle are drawn as active.
    """
    if width < 16 or height < 16:
        raise ValueError(f"frame size must be at least 16×16 pixels, got {width}×{height}")
    x0, x1, y0, y1 = default_view(model) if view is None else view
    scale = min(width / (x1 - x0), height / (y1 - y0))
    cx, cy = 0.5 * (x0 + x1), 0.5 * (y0 + y1)

    def pixels(points):
        points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        u = width / 2 + (points[:, 0] - cx) * scale
        v = height / 2 - (points[:, 1] - cy) * scale
        return np.round(np.stack([u, v], axis=1) * 16).astype(np.int32)  # 4 fractional bits

    image = np.full((height, width, 3), _BACKGROUND, dtype=np.uint8)
    draw = dict(lineType=cv2.LINE_AA, shift=4)
    for obstacle in model.obstacles:
        if isinstance(obstacle, Circle):
            center = pixels(obstacle.center)[0]
            cv2.circle(image, tuple(int(c) for c in center), int(obstacle.radius * scale * 16),
                       _OBSTACLE, -1, **draw)
        elif isinstance(obstacle, Polygon):
            cv2.fillPoly(image, [pixels(obstacle.vertices)], _OBSTACLE, **draw)
        elif isinstance(obstacle, Wall):
            a, b = pixels(obstacle.start)[0], pixels(obstacle.end)[0]
            cv2.line(image, tuple(map(int, a)), tuple(map(int, b)), _OBSTACLE,
                     max(1, int(round(obstacle.thickness * scale))), **draw)
    q = np.asarray(state.body_q, dtype=np.float64)
    d = model.half_length
    tangent = np.stack([np.cos(q[:, 2]), np.sin(q[:, 2])], axis=1)
    thickness = max(2, int(round(0.01 * min(width, height))))
    vertices = centerline_vertices(model, q)
    cv2.polylines(image, [pixels(vertices)], False, _CENTERLINE, thickness, **draw)
    for start, end in zip(pixels(q[:, :2] - d * tangent), pixels(q[:, :2] + d * tangent),
                          strict=True):
        cv2.line(image, tuple(map(int, start)), tuple(map(int, end)), _BODY,
                 max(1, thickness // 2), **draw)
    base = pixels(vertices[0])[0]
    cv2.circle(image, tuple(map(int, base)), 16 * (thickness + 2), _BASE, -1, **draw)
    points = model.contact_positions(q)
    active = np.any(model.obstacle_distances(q)[0] < contact_tolerance, axis=1)
    radius = 16 * max(1, thickness // 3)
    for point, is_active in zip(pixels(points), active, strict=True):
        color = _ACTIVE if is_active else _CONTACT
        cv2.circle(image, tuple(map(int, point)), radius * (3 if is_active else 1), color, -1,
                   **draw)
    return image
