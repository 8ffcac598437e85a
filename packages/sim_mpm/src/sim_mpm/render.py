"""Video frames of MPM scenes with NumPy and Pillow only.

Particles are drawn as small disks: in 2D straight onto the image (y up), in 3D after an
orthographic projection (azimuth about the vertical y axis, then elevation), nearest
particle winning each pixel and farther particles shaded darker. Planes and terrain are
drawn as gray lines underneath; cables as lines through their routes. Box walls are drawn
as the domain [0, L]^d (dark outline: the walls' outer faces) and the walls' inner faces,
``margin`` cells in, where particles stop: in 2D the wall layer between them is shaded, in
3D the inner box's edges are lighter lines.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from PIL import Image, ImageDraw

from codesign.backend import to_host

from .boundaries import BoxWalls, HeightField, Plane

__all__ = ["COLOR_MODES", "render_frame", "project_points"]

COLOR_MODES = ("group", "actuation", "material")

# A qualitative palette (group colors) and the two ends of the material color ramp.
_PALETTE = np.array([
    [31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189],
    [140, 86, 75], [227, 119, 194], [127, 127, 127], [188, 189, 34], [23, 190, 207],
], dtype=np.float64)
_SOFT, _STIFF = np.array([80.0, 170.0, 240.0]), np.array([200.0, 40.0, 40.0])
_NEUTRAL, _CONTRACT, _EXPAND = (np.array([150.0, 150.0, 150.0]), np.array([220.0, 40.0, 40.0]),
                                np.array([40.0, 90.0, 220.0]))
_BACKGROUND, _LINE = (250, 250, 250), (110, 110, 110)
_WALL, _INNER_EDGE = (222, 222, 222), (185, 185, 185)  # 2D wall layer, 3D inner box edges


def project_points(points: np.ndarray, *, dim: int, domain_size: float, width: int, height: int,
                   azimuth: float = 30.0, elevation: float = 20.0) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (n, 2) (column, row; float) and depth (n,) (larger is nearer).

    2D: the domain square [0, L]² fills the image's shorter side, centered, y up.
    3D: orthographic view of the domain cube from ``azimuth`` / ``elevation`` [deg].
    """
    points = np.asarray(points, dtype=np.float64).reshape(-1, dim)
    center = np.full(dim, 0.5 * domain_size)
    local = points - center
    if dim == 2:
        screen, depth, extent = local, np.zeros(len(points)), domain_size
    else:
        a, e = np.radians(azimuth), np.radians(elevation)
        rot_y = np.array([[np.cos(a), 0, -np.sin(a)], [0, 1, 0], [np.sin(a), 0, np.cos(a)]])
        rot_x = np.array([[1, 0, 0], [0, np.cos(e), -np.sin(e)], [0, np.sin(e), np.cos(e)]])
        view = local @ rot_y.T @ rot_x.T
        screen, depth, extent = view[:, :2], view[:, 2], 1.75 * domain_size
    scale = min(width, height) / extent
    pixels = np.stack([0.5 * width + scale * screen[:, 0],
                       0.5 * height - scale * screen[:, 1]], axis=1)
    return pixels, depth


def _particle_colors(model, color_by, action, youngs_modulus) -> np.ndarray:
    n = model.particle_count
    if color_by == "group":
        return _PALETTE[np.asarray(model.particle_group) % len(_PALETTE)]
    if color_by == "material":
        E = np.asarray(model.youngs_modulus if youngs_modulus is None else youngs_modulus,
                       dtype=np.float64)
        span = float(E.max() - E.min())
        t = (E - E.min()) / span if span > 0 else np.full(n, 0.5)
        return _SOFT + t[:, None] * (_STIFF - _SOFT)
    colors = np.tile(_NEUTRAL, (n, 1))
    index = np.asarray(model.actuator_index)
    active = index >= 0
    if action is None or model.stress_actuator_count == 0:  # actuators half-way to red
        signals = np.full(model.stress_actuator_count, 0.5)
    else:
        signals = np.clip(np.asarray(action, np.float64)[: model.stress_actuator_count], -1, 1)
    u = signals[index[active]][:, None]
    target = np.where(u >= 0, _CONTRACT, _EXPAND)
    colors[active] = _NEUTRAL + np.abs(u) * (target - _NEUTRAL)
    return colors


def _disk(radius: int) -> np.ndarray:
    r = np.arange(-radius, radius + 1)
    du, dv = np.meshgrid(r, r, indexing="ij")
    keep = du**2 + dv**2 <= radius**2 + radius
    return np.stack([du[keep], dv[keep]], axis=1)


def _draw_boundaries(draw, model, project, size: tuple[int, int]) -> None:
    L, dim = model.domain_size, model.dim
    for boundary in model.boundaries:
        if isinstance(boundary, BoxWalls):
            _draw_walls(draw, boundary.margin * model.dx, L, dim, project, size)
        elif isinstance(boundary, Plane):
            point = boundary.point
            tangents = np.linalg.svd(boundary.normal[None, :])[2][1:]  # the plane's basis
            steps = np.linspace(-2 * L, 2 * L, 81)[:, None]
            if dim == 2:
                _polyline_in_domain(draw, point + steps * tangents[0], L, project)
            else:  # a grid of lines along each tangent
                for a in range(2):
                    for offset in np.linspace(-L, L, 9):
                        _polyline_in_domain(draw, point + offset * tangents[1 - a]
                                            + steps * tangents[a], L, project)
        elif isinstance(boundary, HeightField):
            h = boundary.heights
            if h.ndim == 1:
                x = boundary.origin[0] + boundary.spacing * np.arange(h.size)
                _polyline_in_domain(draw, np.stack([x, h], axis=1), L, project)
            else:
                xs = boundary.origin[0] + boundary.spacing * np.arange(h.shape[0])
                zs = boundary.origin[1] + boundary.spacing * np.arange(h.shape[1])
                for j, z in enumerate(zs):
                    _polyline_in_domain(draw, np.stack([xs, h[:, j], np.full_like(xs, z)], 1),
                                        L, project)
                for i, x in enumerate(xs):
                    _polyline_in_domain(draw, np.stack([np.full_like(zs, x), h[i], zs], 1),
                                        L, project)


def _draw_walls(draw, margin: float, L: float, dim: int, project, size) -> None:
    """The domain [0, L]^d and the walls' inner faces ``margin`` [m] in (see the module
    docstring) on an image of ``size`` (width, height) pixels."""
    if dim == 2:
        width, height = size
        for lo, hi, fill, outline in ((0.0, L, _WALL, _LINE),
                                      (margin, L - margin, _BACKGROUND, _INNER_EDGE)):
            pixels = project(np.array([[lo, lo], [hi, hi]]))
            # the domain fills the shorter side: keep its edges on the image
            x0, x1 = np.clip(np.sort(pixels[:, 0]), 0, width - 1)
            y0, y1 = np.clip(np.sort(pixels[:, 1]), 0, height - 1)
            draw.rectangle([x0, y0, x1, y1], fill=fill, outline=outline)
        return
    for lo, hi, color in ((margin, L - margin, _INNER_EDGE), (0.0, L, _LINE)):
        corners = np.array(list(itertools.product((lo, hi), repeat=dim)))
        for a, b in itertools.combinations(corners, 2):
            if np.sum(a != b) == 1:
                draw.line([tuple(p) for p in project(np.stack([a, b]))], fill=color)


def _polyline_in_domain(draw, points, L, project) -> None:
    """Draw the segments of a polyline whose both ends lie in the domain."""
    inside = np.all((points >= 0) & (points <= L), axis=1)
    pixels = project(points)
    for i in range(len(points) - 1):
        if inside[i] and inside[i + 1]:
            draw.line([tuple(pixels[i]), tuple(pixels[i + 1])], fill=_LINE, width=2)


def render_frame(model, state, *, width: int = 480, height: int = 360, color_by: str = "group",
                 action=None, youngs_modulus=None, azimuth: float = 30.0,
                 elevation: float = 20.0) -> np.ndarray:
    """One RGB video frame of the particles, shape (height, width, 3), dtype uint8.

    Args:
        model: the :class:`~sim_mpm.model.MPMModel` (grid, groups, actuators, boundaries).
        state: an :class:`~sim_mpm.state.MPMState` (NumPy or CuPy arrays).
        color_by: "group" (particle group), "actuation" (red contracting, blue expanding by
            the stress signal in ``action``), or "material" (Young's modulus, blue soft to
            red stiff).
        action: the action applied in this frame, shape (action_size,), for "actuation".
        youngs_modulus: per-particle E [Pa], shape (n,), for "material" (None: the model's).
        azimuth, elevation: 3D view angles [deg].
    """
    if color_by not in COLOR_MODES:
        raise ValueError(f"unknown color_by {color_by!r}; choose one of {', '.join(COLOR_MODES)}")
    if int(width) < 8 or int(height) < 8:
        raise ValueError(f"frame size must be at least 8x8 pixels, got {width}x{height}")
    width, height, dim = int(width), int(height), model.dim

    view = functools.partial(project_points, dim=dim, domain_size=model.domain_size,
                             width=width, height=height, azimuth=azimuth, elevation=elevation)
    canvas = Image.new("RGB", (width, height), _BACKGROUND)
    _draw_boundaries(ImageDraw.Draw(canvas), model, lambda points: view(points)[0], canvas.size)
    image = np.asarray(canvas).copy()

    x = to_host(state.particle_x).astype(np.float64)
    pixels, depth = view(x)
    colors = _particle_colors(model, color_by, action, youngs_modulus)
    if dim == 3 and np.ptp(depth) > 0:
        shade = 0.65 + 0.35 * (depth - depth.min()) / np.ptp(depth)
        colors = colors * shade[:, None]
    spacing = float(np.mean(model.volume)) ** (1.0 / dim)
    scale = min(width, height) / (model.domain_size * (1.0 if dim == 2 else 1.75))
    stamp = _disk(max(1, int(round(0.6 * spacing * scale))))
    centers = np.floor(pixels).astype(np.int64)
    cols = (centers[:, None, 0] + stamp[None, :, 0]).reshape(-1)
    rows = (centers[:, None, 1] + stamp[None, :, 1]).reshape(-1)
    owner = np.repeat(np.arange(len(x)), len(stamp))
    visible = (cols >= 0) & (cols < width) & (rows >= 0) & (rows < height)
    flat, owner = (rows * width + cols)[visible], owner[visible]
    order = np.lexsort((-depth[owner], flat))  # per pixel, nearest particle first
    flat, owner = flat[order], owner[order]
    first = np.r_[True, flat[1:] != flat[:-1]]
    image.reshape(-1, 3)[flat[first]] = np.clip(colors[owner[first]], 0, 255).astype(np.uint8)

    if model.cables:
        canvas = Image.fromarray(image)
        draw = ImageDraw.Draw(canvas)
        signals = np.zeros(model.cable_count) if action is None else np.clip(
            np.asarray(action, np.float64)[model.stress_actuator_count:], 0.0, 1.0)
        for cable, u in zip(model.cables, signals, strict=True):  # red as it pulls
            draw.line([tuple(p) for p in pixels[np.asarray(cable.route)]],
                      fill=(int(40 + 180 * u), 40, 40), width=2)
        image = np.asarray(canvas).copy()
    return image
