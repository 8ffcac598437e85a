"""Vine keypoints from video: segment, trace the centerline from base to tip, resample n evenly
spaced points along it and map pixels to metres.

Pipeline per frame (:func:`extract_keypoints`):

1. Segmentation (:class:`Segmentation`): an HSV or RGB colour box, or the difference against
   a background image; a morphological open then close removes specks and fills holes.
2. The connected component touching a disc around the base pixel is kept (the largest if
   several do), so other blobs of the vine's colour are ignored.
3. Centerline (:func:`trace_centerline`): geodesic distance from the base inside the
   component (Dijkstra on the 8-connected pixel graph); the centroid of each band of equal
   geodesic distance lies on the centerline (a band crossing a tube is a parallelogram whose
   centroid is on the tube's axis), which gives sub-pixel accuracy without skeleton spurs.
   The tip is where the mask ends along the last tangent, minus the tube's half-width
   (round tips), or minus a fixed trim.
4. Pixels to metres with a :class:`Calibration` (a homography from four or more reference
   points, or a scale and origin); keypoints are spaced evenly in *metres* along the robot.

Frames where the vine is not found yield NaN rows (``on_missing="nan"``, listed in
:attr:`Keypoints.missing_frames` and in :meth:`Keypoints.report`) or stop extraction with a
:class:`VineNotFoundError` naming the frames (``on_missing="raise"``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra

from .video import read_frames

__all__ = [
    "KeypointError",
    "VineNotFoundError",
    "Calibration",
    "Segmentation",
    "Keypoints",
    "trace_centerline",
    "resample_polyline",
    "extract_keypoints",
    "save_keypoints",
    "load_keypoints",
    "check_point_counts",
]


class KeypointError(ValueError):
    """Keypoint data or settings are inconsistent (shapes, counts, files, options)."""


class VineNotFoundError(KeypointError):
    """The vine was not found in one or more frames.

    Attributes:
        frames: the frame indices where it was not found.
        reasons: frame index -> why.
    """

    def __init__(self, reasons: dict[int, str]):
        self.reasons = dict(reasons)
        self.frames = sorted(self.reasons)
        listed = "; ".join(f"frame {i}: {self.reasons[i]}" for i in self.frames[:10])
        more = f" (and {len(self.frames) - 10} more)" if len(self.frames) > 10 else ""
        super().__init__(
            f"the vine was not found in {len(self.frames)} frame(s): {listed}{more}. Check the "
            "segmentation thresholds and base pixel, or pass on_missing='nan' to continue with "
            "NaN rows for these frames")


# --------------------------------------------------------------------------------------------
# calibration


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A planar map from image pixels (x right, y down) to world metres (x, y).

    Attributes:
        homography: 3×3 matrix H with ``[X, Y, 1]ᵀ ∝ H [u, v, 1]ᵀ``.
    """

    homography: np.ndarray

    def __post_init__(self):
        h = np.asarray(self.homography, dtype=np.float64)
        if h.shape != (3, 3) or not np.all(np.isfinite(h)) or abs(np.linalg.det(h)) < 1e-300:
            raise KeypointError(f"a calibration needs a finite invertible 3×3 homography, got "
                                f"shape {h.shape}")
        object.__setattr__(self, "homography", h / h[2, 2] if h[2, 2] != 0 else h)

    @classmethod
    def from_reference_points(cls, pixel_points, world_points) -> Calibration:
        """Homography from four (exact) or more (least squares) reference points.

        Args:
            pixel_points: reference points in the image [px], shape (k >= 4, 2).
            world_points: the same points on the motion plane [m], shape (k, 2).
        """
        px = np.asarray(pixel_points, dtype=np.float64)
        world = np.asarray(world_points, dtype=np.float64)
        if px.ndim != 2 or px.shape[1] != 2 or px.shape != world.shape or len(px) < 4:
            raise KeypointError(f"reference points need matching shapes (k >= 4, 2); got pixels "
                                f"{px.shape} and world {world.shape}")
        if not (np.all(np.isfinite(px)) and np.all(np.isfinite(world))):
            raise KeypointError("reference points hold NaN or infinite coordinates")
        # plain least squares (method 0): exact for four points, averaging for more
        h, _ = cv2.findHomography(px, world, 0)
        if (h is None or not np.all(np.isfinite(h))
                or abs(np.linalg.det(h)) < 1e-12 * np.abs(h).max() ** 3):
            raise KeypointError("the reference points are degenerate (three on one line?); pick "
                                "four points spread over the motion plane")
        return cls(h)

    @classmethod
    def from_scale(cls, metres_per_pixel: float, origin_px: Sequence[float], *,
                   flip_y: bool = True) -> Calibration:
        """A scaled, shifted map: world = (pixel − origin) × scale, y up when ``flip_y``.

        Args:
            metres_per_pixel: size of one pixel on the motion plane [m].
            origin_px: the pixel that maps to the world origin, (x, y).
            flip_y: image y points down; flip it so world y points up.
        """
        s = float(metres_per_pixel)
        if not (np.isfinite(s) and s > 0):
            raise KeypointError(f"metres_per_pixel must be a positive number, got "
                                f"{metres_per_pixel}")
        ox, oy = (float(v) for v in origin_px)
        sy = -s if flip_y else s
        return cls(np.array([[s, 0.0, -s * ox], [0.0, sy, -sy * oy], [0.0, 0.0, 1.0]]))

    @staticmethod
    def _apply(h: np.ndarray, points) -> np.ndarray:
        p = np.asarray(points, dtype=np.float64)
        if p.shape[-1:] != (2,):
            raise KeypointError(f"points must have shape (..., 2), got {p.shape}")
        flat = p.reshape(-1, 2)
        hom = flat @ h[:, :2].T + h[:, 2]
        return (hom[:, :2] / hom[:, 2:3]).reshape(p.shape)

    def to_world(self, pixel_points) -> np.ndarray:
        """Pixels (..., 2) to metres (..., 2)."""
        return self._apply(self.homography, pixel_points)

    def to_pixels(self, world_points) -> np.ndarray:
        """Metres (..., 2) to pixels (..., 2)."""
        return self._apply(np.linalg.inv(self.homography), world_points)

    def pixels_per_metre(self, world_point: Sequence[float]) -> float:
        """Local image scale at a world point [px/m] (geometric mean of the two axes)."""
        eps = 1e-4
        w = np.asarray(world_point, dtype=np.float64)
        jac = np.stack([(self.to_pixels(w + d) - self.to_pixels(w - d)) / (2 * eps)
                        for d in (np.array([eps, 0.0]), np.array([0.0, eps]))], axis=1)
        return float(np.sqrt(abs(np.linalg.det(jac))))


# --------------------------------------------------------------------------------------------
# segmentation


@dataclasses.dataclass(frozen=True)
class Segmentation:
    """How vine pixels are told from the rest.

    Attributes:
        method: ``"hsv"`` or ``"rgb"`` (a colour box ``lower <= pixel <= upper``, per channel;
            for HSV, OpenCV ranges H 0-179, S and V 0-255, and ``lower[0] > upper[0]`` wraps
            the hue around red), or ``"background"`` (pixels differing from ``background``
            by more than ``threshold`` in some channel).
        lower, upper: colour box corners (3 values each) for the colour methods.
        background: BGR background image (uint8, same size as the frames) or a path to one.
        threshold: background difference threshold (0-255).
        open_px: opening kernel size [px] that removes specks (0: none).
        close_px: closing kernel size [px] that fills holes (0: none).
    """

    method: str = "hsv"
    lower: Sequence[int] = (35, 80, 40)
    upper: Sequence[int] = (85, 255, 255)
    background: np.ndarray | str | None = None
    threshold: int = 40
    open_px: int = 3
    close_px: int = 3

    def __post_init__(self):
        if self.method not in ("hsv", "rgb", "background"):
            raise KeypointError(f"unknown segmentation method {self.method!r}; use 'hsv', 'rgb' "
                                "or 'background'")
        if self.method == "background":
            if self.background is None:
                raise KeypointError("background segmentation needs background=<image or path>")
            background = self.background
            if isinstance(background, str | Path):
                image = cv2.imread(str(background), cv2.IMREAD_COLOR)
                if image is None:
                    raise KeypointError(f"cannot read the background image {str(background)!r}")
                background = image
            background = np.asarray(background)
            if background.dtype != np.uint8 or background.ndim != 3 or background.shape[2] != 3:
                raise KeypointError(f"the background must be a BGR uint8 image, got "
                                    f"{background.dtype} {background.shape}")
            object.__setattr__(self, "background", background)
        else:
            for name in ("lower", "upper"):
                value = np.asarray(getattr(self, name))
                if value.shape != (3,) or np.any(value < 0) or np.any(value > 255):
                    raise KeypointError(f"segmentation {name} must be 3 values in 0-255, got "
                                        f"{getattr(self, name)!r}")
        if self.open_px < 0 or self.close_px < 0:
            raise KeypointError("open_px and close_px must be >= 0")

    def mask(self, image: np.ndarray) -> np.ndarray:
        """Vine mask of a BGR frame: uint8 0/255, shape (height, width)."""
        if self.method == "background":
            if image.shape != self.background.shape:
                raise KeypointError(f"frame size {image.shape} differs from the background "
                                    f"{self.background.shape}")
            diff = cv2.absdiff(image, self.background).max(axis=2)
            mask = np.where(diff > self.threshold, 255, 0).astype(np.uint8)
        else:
            pixels = cv2.cvtColor(image, cv2.COLOR_BGR2HSV if self.method == "hsv"
                                  else cv2.COLOR_BGR2RGB)
            lower, upper = np.asarray(self.lower), np.asarray(self.upper)
            if self.method == "hsv" and lower[0] > upper[0]:
                mask = (cv2.inRange(pixels, lower, np.array([179, *upper[1:]]))
                        | cv2.inRange(pixels, np.array([0, *lower[1:]]), upper))
            else:
                mask = cv2.inRange(pixels, lower, upper)
        if self.open_px > 1:
            mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, _disc(self.open_px))
        if self.close_px > 1:
            mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, _disc(self.close_px))
        return mask


def _disc(size: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (int(size), int(size)))


# --------------------------------------------------------------------------------------------
# centerline


def _base_component(mask: np.ndarray, base_px, base_radius_px: float, min_area_px: int):
    """The largest component touching the base disc; (component mask, reason if none)."""
    count, labels, stats, _ = cv2.connectedComponentsWithStats((mask > 0).astype(np.uint8), 8)
    h, w = mask.shape
    yy, xx = np.ogrid[:h, :w]
    near = (xx - base_px[0]) ** 2 + (yy - base_px[1]) ** 2 <= base_radius_px ** 2
    candidates = np.unique(labels[near & (labels > 0)])
    if candidates.size == 0:
        return None, (f"no vine pixels within {base_radius_px:g} px of the base "
                      f"({base_px[0]:g}, {base_px[1]:g})")
    best = candidates[np.argmax(stats[candidates, cv2.CC_STAT_AREA])]
    if stats[best, cv2.CC_STAT_AREA] < min_area_px:
        return None, (f"the vine blob at the base has {stats[best, cv2.CC_STAT_AREA]} px, fewer "
                      f"than min_area_px={min_area_px}")
    return labels == best, None


def _geodesic_distance(component: np.ndarray,
                       start: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (k, 2) as (x, y) and their 8-connected geodesic distance from start."""
    ys, xs = np.nonzero(component)
    index = -np.ones(component.shape, np.int64)
    index[ys, xs] = np.arange(len(xs))
    rows, cols, lengths = [], [], []
    h, w = component.shape
    for dy, dx, length in ((0, 1, 1.0), (1, 0, 1.0), (1, 1, np.sqrt(2.0)), (1, -1, np.sqrt(2.0))):
        ny, nx = ys + dy, xs + dx
        ok = (ny < h) & (nx >= 0) & (nx < w)
        ok[ok] = index[ny[ok], nx[ok]] >= 0
        rows.append(index[ys[ok], xs[ok]])
        cols.append(index[ny[ok], nx[ok]])
        lengths.append(np.full(int(ok.sum()), length))
    graph = coo_matrix((np.concatenate(lengths), (np.concatenate(rows), np.concatenate(cols))),
                       shape=(len(xs), len(xs))).tocsr()
    distance = dijkstra(graph, directed=False, indices=int(index[start[1], start[0]]))
    return np.stack([xs, ys], axis=1).astype(np.float64), distance


def trace_centerline(
    mask: np.ndarray,
    base_px: Sequence[float],
    *,
    base_radius_px: float = 10.0,
    base_direction: Sequence[float] | None = None,
    min_area_px: int = 20,
    tip_trim_px: float | None = None,
) -> tuple[np.ndarray | None, str | None]:
    """Trace the vine's centerline from the base pixel to the tip.

    Args:
        mask: vine mask, nonzero on the vine, shape (height, width).
        base_px: where the vine leaves its base, (x, y) [px].
        base_radius_px: the vine component must come this close to the base.
        base_direction: optional (dx, dy) the vine leaves the base along; pixels behind the
            base (a mount of the same colour) are ignored.
        min_area_px: a smaller component counts as not found.
        tip_trim_px: distance from the mask's end back to the tip point [px]; ``None``
            uses the measured half-width (round tips, as inflated vines and drawn lines have).

    Returns:
        (centerline, None) with vertices (m, 2) in pixels from the base to the tip, or
        (None, reason) when the vine is not found.
    """
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise KeypointError(f"a mask must be 2-D (height, width), got shape {mask.shape}")
    base = np.asarray(base_px, dtype=np.float64)
    if base.shape != (2,) or not np.all(np.isfinite(base)):
        raise KeypointError(f"base_px must be two finite pixel coordinates, got {base_px!r}")
    mask = mask > 0
    if base_direction is not None:
        d = np.asarray(base_direction, dtype=np.float64)
        d = d / np.linalg.norm(d)
        yy, xx = np.mgrid[: mask.shape[0], : mask.shape[1]]
        mask = mask & ((xx - base[0]) * d[0] + (yy - base[1]) * d[1] >= 0)
    component, reason = _base_component(mask, base, base_radius_px, min_area_px)
    if component is None:
        return None, reason
    ys, xs = np.nonzero(component)
    nearest = np.argmin((xs - base[0]) ** 2 + (ys - base[1]) ** 2)
    pixels, distance = _geodesic_distance(component, (int(xs[nearest]), int(ys[nearest])))
    reach = np.isfinite(distance)
    pixels, distance = pixels[reach], distance[reach]

    inside = cv2.distanceTransform(component.astype(np.uint8), cv2.DIST_L2, 5)
    # the distance transform at the axis counts to the centre of the first background
    # pixel; half a pixel less is the half-width of the tube
    half_width = max(1.0, float(np.percentile(inside[component], 98)) - 0.5)
    length = float(distance.max())
    if length < 3.0 * half_width:
        return None, (f"the vine blob is too short ({length:.1f} px) for its width "
                      f"({2 * half_width:.1f} px); is it a speck rather than the vine?")

    # band centroids lie on the tube's axis; the bands near the base (which may include pixels
    # behind it) and in the round tip are left out and replaced by the base and tip points
    bin_width = max(1.0, half_width)
    edges = np.arange(1.5 * half_width, length - 1.5 * half_width + 1e-9, bin_width)
    centroids = []
    band = np.digitize(distance, edges)
    sums_x = np.bincount(band, pixels[:, 0], len(edges) + 1)
    sums_y = np.bincount(band, pixels[:, 1], len(edges) + 1)
    counts = np.bincount(band, minlength=len(edges) + 1)
    for b in range(1, len(edges)):
        if counts[b]:
            centroids.append((sums_x[b] / counts[b], sums_y[b] / counts[b]))
    body = np.asarray(centroids, dtype=np.float64).reshape(-1, 2)
    if len(body) < 2:
        body = np.vstack([base, pixels[np.argmax(distance)]])

    # tip: where the mask ends along the last tangent, then back by the trim
    tail = body[max(0, len(body) - 1 - int(np.ceil(3.0 * half_width / bin_width))):]
    anchor = body[-1]
    tangent = tail[-1] - tail[0] if len(tail) > 1 else anchor - base
    tangent = tangent / max(np.linalg.norm(tangent), 1e-12)
    near_tip = distance > length - 4.0 * half_width
    offsets = pixels[near_tip] - anchor
    lateral = np.abs(offsets @ np.array([-tangent[1], tangent[0]]))
    ahead = offsets @ tangent
    ahead = ahead[lateral <= 0.5 * half_width]
    # a pixel centre lies on average half a pixel inside the edge the camera saw
    extent = (ahead.max() if ahead.size else 0.0) + 0.5
    trim = half_width if tip_trim_px is None else float(tip_trim_px)
    tip = anchor + max(extent - trim, 0.0) * tangent
    return np.vstack([base, body, tip]), None


def resample_polyline(vertices, count: int) -> np.ndarray:
    """``count`` points evenly spaced by arclength along a polyline, both ends included.

    Args:
        vertices: polyline vertices, shape (m >= 2, d).
        count: number of points, >= 2.

    Returns:
        Points, shape (count, d).
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    if vertices.ndim != 2 or len(vertices) < 2:
        raise KeypointError(f"a polyline needs at least two vertices, shape (m, d); got "
                            f"{vertices.shape}")
    if int(count) < 2:
        raise KeypointError(f"resampling needs count >= 2 points, got {count}")
    seg = np.linalg.norm(np.diff(vertices, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    targets = np.linspace(0.0, s[-1], int(count))
    return np.stack([np.interp(targets, s, vertices[:, k]) for k in range(vertices.shape[1])],
                    axis=1)


# --------------------------------------------------------------------------------------------
# keypoint recordings


@dataclasses.dataclass(frozen=True)
class Keypoints:
    """Keypoints of one recording.

    Attributes:
        times: frame timestamps [s], shape (frames,), increasing.
        points: keypoints from base to tip [m], shape (frames, points, 2); rows of NaN mark
            frames where the vine was not found.
        reasons: frame index -> why the vine was not found there (empty when complete).
    """

    times: np.ndarray
    points: np.ndarray
    reasons: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        times = np.asarray(self.times, dtype=np.float64)
        points = np.asarray(self.points, dtype=np.float64)
        if times.ndim != 1 or points.ndim != 3 or points.shape[2] != 2:
            raise KeypointError(f"keypoints need times (frames,) and points (frames, points, 2); "
                                f"got {times.shape} and {points.shape}")
        if points.shape[0] != times.shape[0]:
            raise KeypointError(f"{points.shape[0]} keypoint frames but {times.shape[0]} "
                                "timestamps")
        if points.shape[1] < 2:
            raise KeypointError(f"keypoints need at least 2 points per frame, got "
                                f"{points.shape[1]}")
        if not np.all(np.isfinite(times)) or np.any(np.diff(times) <= 0):
            raise KeypointError("keypoint timestamps must be finite and strictly increasing")
        partial = np.isnan(points).any(axis=(1, 2)) & ~np.isnan(points).all(axis=(1, 2))
        if np.any(partial) or np.any(np.isinf(points)):
            raise KeypointError(f"frames {np.nonzero(partial)[0].tolist()} are partly NaN or "
                                "infinite; a frame is either complete or all NaN (missing)")
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "points", points)
        object.__setattr__(self, "reasons", {int(k): str(v) for k, v in self.reasons.items()})

    @property
    def frame_count(self) -> int:
        """Number of frames."""
        return self.points.shape[0]

    @property
    def point_count(self) -> int:
        """Keypoints per frame."""
        return self.points.shape[1]

    @property
    def missing_frames(self) -> list[int]:
        """Indices of frames without keypoints (all-NaN rows)."""
        return np.nonzero(np.isnan(self.points).all(axis=(1, 2)))[0].tolist()

    def report(self) -> str:
        """A short account: frames, points, and which frames are missing and why."""
        missing = self.missing_frames
        lines = [f"{self.frame_count} frames, {self.point_count} keypoints per frame, "
                 f"{len(missing)} frame(s) without the vine"]
        lines += [f"  frame {i} (t = {self.times[i]:.4f} s): {self.reasons.get(i, 'missing')}"
                  for i in missing]
        return "\n".join(lines)


def save_keypoints(keypoints: Keypoints, path: str | Path) -> Path:
    """Save to ``.npz`` (arrays ``times``, ``points``) or ``.csv`` (``time,x0,y0,x1,y1,...``)."""
    path = Path(path)
    if path.suffix == ".npz":
        np.savez(path, times=keypoints.times, points=keypoints.points)
    elif path.suffix == ".csv":
        n = keypoints.point_count
        header = "time," + ",".join(f"x{i},y{i}" for i in range(n))
        flat = keypoints.points.reshape(keypoints.frame_count, -1)
        table = np.column_stack([keypoints.times, flat])
        np.savetxt(path, table, delimiter=",", header=header, comments="", fmt="%.9g")
    else:
        raise KeypointError(f"keypoint files end in .npz or .csv, got {str(path)!r}")
    return path


def load_keypoints(path: str | Path, *, points: int | None = None) -> Keypoints:
    """Load keypoints saved by :func:`save_keypoints`, checking shapes.

    Args:
        path: a ``.npz`` or ``.csv`` file.
        points: expected keypoints per frame; a different count raises KeypointError.
    """
    path = Path(path)
    if not path.is_file():
        raise KeypointError(f"no keypoint file at {str(path)!r}")
    try:
        if path.suffix == ".npz":
            with np.load(path) as data:
                missing = {"times", "points"} - set(data.files)
                if missing:
                    raise KeypointError(f"{str(path)!r} lacks array(s) {sorted(missing)}; expected "
                                        "'times' (frames,) and 'points' (frames, points, 2)")
                result = Keypoints(data["times"], data["points"])
        elif path.suffix == ".csv":
            with open(path) as handle:
                header = handle.readline().strip().split(",")
            n = (len(header) - 1) // 2
            expected = ["time"] + [f"{a}{i}" for i in range(n) for a in "xy"]
            if header != expected or n < 2:
                raise KeypointError(f"{str(path)!r} has header {header[:5]}...; expected "
                                    "'time,x0,y0,x1,y1,...' with at least two points")
            table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
            if table.shape[1] != len(header):
                raise KeypointError(f"{str(path)!r}: rows have {table.shape[1]} columns but the "
                                    f"header names {len(header)}")
            result = Keypoints(table[:, 0], table[:, 1:].reshape(len(table), n, 2))
        else:
            raise KeypointError(f"keypoint files end in .npz or .csv, got {str(path)!r}")
    except (OSError, ValueError) as exc:
        if isinstance(exc, KeypointError):
            raise KeypointError(f"{str(path)!r}: {exc}") from None
        raise KeypointError(f"cannot read keypoints from {str(path)!r}: {exc}") from exc
    if points is not None and result.point_count != points:
        raise KeypointError(f"{str(path)!r} has {result.point_count} keypoints per frame but "
                            f"{points} are expected; extract again with points={points} or "
                            "change the fit's keypoint count")
    return result


def check_point_counts(recordings: Sequence[Keypoints]) -> int:
    """Check that all recordings have the same number of keypoints per frame; return it."""
    if not recordings:
        raise KeypointError("no keypoint recordings given")
    counts = [r.point_count for r in recordings]
    bad = [i for i, c in enumerate(counts) if c != counts[0]]
    if bad:
        raise KeypointError(
            f"keypoint counts differ: recording(s) {bad} have "
            f"{[counts[i] for i in bad]} points per frame but {counts[0]} are expected; "
            "extract every recording with the same number of points")
    return counts[0]


def extract_keypoints(
    source,
    *,
    segmentation: Segmentation,
    base_px: Sequence[float],
    calibration: Calibration,
    points: int,
    fps: float | None = None,
    start_time: float = 0.0,
    base_radius_px: float = 10.0,
    base_direction: Sequence[float] | None = None,
    min_area_px: int = 20,
    tip_trim_px: float | None = None,
    on_missing: str = "nan",
) -> Keypoints:
    """Keypoints of every frame of a video or image sequence.

    Args:
        source: video file, image folder or glob (see :func:`sim_vine.vision.video.read_frames`), or
            an iterable of BGR images (then ``fps`` is required).
        segmentation: how vine pixels are found.
        base_px: the base pixel (x, y); see :func:`trace_centerline` for the other options.
        calibration: pixels to metres.
        points: keypoints per frame, evenly spaced in metres along the vine, base and tip
            included.
        fps, start_time: frame rate [1/s] and first timestamp [s].
        on_missing: ``"nan"`` fills frames without the vine with NaN rows and lists them in
            the result's ``reasons``; ``"raise"`` raises VineNotFoundError after reading all
            frames, naming every such frame.

    Returns:
        Keypoints with ``points`` of shape (frames, points, 2) in metres.
    """
    if on_missing not in ("nan", "raise"):
        raise KeypointError(f"on_missing must be 'nan' or 'raise', got {on_missing!r}")
    if int(points) < 2:
        raise KeypointError(f"points must be >= 2, got {points}")
    if isinstance(source, str | Path):
        frames = ((f.time, f.image) for f in read_frames(source, fps=fps, start_time=start_time))
    else:
        if fps is None:
            raise KeypointError("pass fps=<frames per second> with in-memory frames")
        frames = ((start_time + i / fps, image) for i, image in enumerate(source))
    times, rows, reasons = [], [], {}
    for index, (time, image) in enumerate(frames):
        centerline, reason = trace_centerline(
            segmentation.mask(image), base_px, base_radius_px=base_radius_px,
            base_direction=base_direction, min_area_px=min_area_px, tip_trim_px=tip_trim_px)
        times.append(time)
        if centerline is None:
            reasons[index] = reason
            rows.append(np.full((int(points), 2), np.nan))
        else:
            rows.append(resample_polyline(calibration.to_world(centerline), int(points)))
    if not times:
        raise KeypointError("the source has no frames")
    if reasons and on_missing == "raise":
        raise VineNotFoundError(reasons)
    return Keypoints(np.asarray(times), np.asarray(rows), reasons)
