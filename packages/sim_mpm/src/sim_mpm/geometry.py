"""Particle sampling: boxes, spheres, PNG images and STL meshes on a common lattice.

Every shape answers one question, ``label(points) -> (n,) int`` (−1 outside, otherwise a
label ≥ 0), and knows its bounding box (and so its dimension). :func:`sample_shapes` fills
the union of shapes by testing the points of one regular lattice (spacing ``s`` [m], points
at ``(i + ½) s``), so shapes that touch or overlap share particles instead of doubling them,
and optionally jitters the kept points (seeded). All functions are pure and return new NumPy arrays.

- :class:`Box`: an axis-aligned box (rectangle in 2D).
- :class:`Sphere`: a ball (disk in 2D).
- :class:`ImageShape`: a PNG whose pixels become particles; a color → label map marks
  actuator groups; transparent or near-white pixels are empty.
- :class:`MeshShape`: a closed STL triangle mesh (ASCII or binary), filled by the
  generalized winding number (robust to small holes and inconsistent facet order).
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "GeometryError",
    "Box",
    "Sphere",
    "ImageShape",
    "MeshShape",
    "load_image",
    "load_stl",
    "winding_number",
    "lattice_points",
    "sample_shapes",
    "parse_color",
]


class GeometryError(ValueError):
    """A shape description or a geometry file is invalid; the message says how to fix it."""


def _vector(value, name: str, dim: int | None = None) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    if array.size == 0 or not np.all(np.isfinite(array)):
        raise GeometryError(f"{name} must be a list of finite numbers, got {value!r}")
    if dim is not None and array.size != dim:
        raise GeometryError(f"{name} must have {dim} entries, got {array.size} ({value!r})")
    if array.size not in (2, 3):
        raise GeometryError(f"{name} must have 2 (2D) or 3 (3D) entries, got {array.size}")
    return array


# -- shapes -----------------------------------------------------------------------------------


class _Shape:
    """What every shape derives from its bounding box: its dimension."""

    @property
    def dim(self) -> int:
        """Spatial dimension, 2 or 3."""
        return self.bounds()[0].size


@dataclasses.dataclass(frozen=True)
class Box(_Shape):
    """Axis-aligned box ``lower ≤ x < upper`` [m], shape (dim,) each; label 0 inside."""

    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self):
        lower = _vector(self.lower, "box lower corner")
        upper = _vector(self.upper, "box upper corner", lower.size)
        if np.any(upper <= lower):
            raise GeometryError(
                f"box upper corner {upper.tolist()} must exceed lower corner {lower.tolist()} "
                "on every axis; give a positive size")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    @classmethod
    def from_size(cls, origin, size) -> Box:
        """The box with lower corner ``origin`` and edge lengths ``size`` [m]."""
        origin = _vector(origin, "box origin")
        return cls(origin, origin + _vector(size, "box size", origin.size))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of the bounding box [m]."""
        return self.lower, self.upper

    def label(self, points: np.ndarray) -> np.ndarray:
        """0 for points inside, −1 outside; points shape (n, dim)."""
        inside = np.all((points >= self.lower) & (points < self.upper), axis=1)
        return np.where(inside, 0, -1)


@dataclasses.dataclass(frozen=True)
class Sphere(_Shape):
    """Ball (disk in 2D) of ``radius`` [m] around ``center`` (dim,); label 0 inside."""

    center: np.ndarray
    radius: float

    def __post_init__(self):
        object.__setattr__(self, "center", _vector(self.center, "sphere center"))
        if not (np.isfinite(self.radius) and self.radius > 0):
            raise GeometryError(f"sphere radius must be a positive number, got {self.radius!r}")
        object.__setattr__(self, "radius", float(self.radius))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of the bounding box [m]."""
        return self.center - self.radius, self.center + self.radius

    def label(self, points: np.ndarray) -> np.ndarray:
        """0 for points inside, −1 outside; points shape (n, dim)."""
        inside = np.sum((points - self.center) ** 2, axis=1) < self.radius**2
        return np.where(inside, 0, -1)


def parse_color(color) -> tuple[int, int, int]:
    """An RGB triple from ``"#rrggbb"``, ``"rrggbb"`` or a sequence of three 0–255 integers."""
    if isinstance(color, str):
        text = color.strip().lstrip("#")
        if len(text) != 6:
            raise GeometryError(f"color {color!r} must be written '#rrggbb'")
        try:
            return tuple(int(text[i : i + 2], 16) for i in (0, 2, 4))
        except ValueError:
            raise GeometryError(f"color {color!r} is not hexadecimal '#rrggbb'") from None
    values = list(color) if isinstance(color, Sequence) else []
    if len(values) != 3 or not all(isinstance(v, int | np.integer) and 0 <= v <= 255
                                   for v in values):
        raise GeometryError(f"color {color!r} must be '#rrggbb' or three integers in 0..255")
    return tuple(int(v) for v in values)


def load_image(path: str | os.PathLike) -> np.ndarray:
    """Read a PNG (or any Pillow-readable image) as RGBA uint8, shape (rows, cols, 4)."""
    from PIL import Image, UnidentifiedImageError

    if not os.path.isfile(path):
        raise GeometryError(f"image file {os.fspath(path)!r} does not exist; check the path")
    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGBA"), dtype=np.uint8).copy()
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise GeometryError(
            f"cannot read image {os.fspath(path)!r} ({exc}); save it as a PNG") from exc


def _image_labels(rgba: np.ndarray, colors: Mapping, default_label: int | None,
                  tolerance: int, white_threshold: int) -> np.ndarray:
    """Per-pixel labels (rows, cols): −1 empty, else the label of the nearest listed color."""
    rgb = rgba[..., :3].astype(np.int64)
    empty = (rgba[..., 3] < 128) | np.all(rgb >= white_threshold, axis=-1)
    labels = np.full(rgb.shape[:2], -1, dtype=np.int64)
    best = np.full(rgb.shape[:2], np.inf)
    for color, label in colors.items():
        distance = np.max(np.abs(rgb - np.asarray(parse_color(color))), axis=-1)
        hit = (distance <= tolerance) & (distance < best) & ~empty
        labels[hit], best[hit] = int(label), distance[hit]
    unmatched = ~empty & (labels < 0)
    if np.any(unmatched):
        if default_label is None:
            rows, cols = np.nonzero(unmatched)
            sample = tuple(int(c) for c in rgb[rows[0], cols[0]])
            raise GeometryError(
                f"{int(unmatched.sum())} pixel(s) have colors not in the color map, e.g. "
                f"RGB {sample} at row {rows[0]}, column {cols[0]}; add the color to `colors` "
                "or set `default_group`")
        labels[unmatched] = int(default_label)
    return labels


@dataclasses.dataclass(frozen=True)
class ImageShape(_Shape):
    """A 2D shape drawn in an image: each non-empty pixel is a ``pixel_size`` [m] square.

    Attributes:
        labels: per-pixel labels, shape (rows, cols), row 0 at the top; −1 is empty.
        origin: world position [m] of the image's bottom-left corner, shape (2,).
        pixel_size: edge length of one pixel [m].
    """

    labels: np.ndarray
    origin: np.ndarray
    pixel_size: float

    def __post_init__(self):
        labels = np.asarray(self.labels, dtype=np.int64)
        if labels.ndim != 2 or labels.size == 0:
            raise GeometryError(f"image labels must be a non-empty 2-D array, got {labels.shape}")
        if not np.any(labels >= 0):
            raise GeometryError("the image has no filled pixels: every pixel is transparent or "
                                "near-white; draw the body in a color")
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "origin", _vector(self.origin, "image origin", 2))
        if not (np.isfinite(self.pixel_size) and self.pixel_size > 0):
            raise GeometryError(f"pixel_size must be positive [m], got {self.pixel_size!r}")
        object.__setattr__(self, "pixel_size", float(self.pixel_size))

    @classmethod
    def from_file(cls, path, *, origin=(0.0, 0.0), pixel_size: float,
                  colors: Mapping | None = None, default_group: int | None = 0,
                  tolerance: int = 40, white_threshold: int = 240) -> ImageShape:
        """Load a PNG; ``colors`` maps ``"#rrggbb"`` to a label (nearest color within
        ``tolerance`` per channel wins); other non-empty pixels get ``default_group`` or raise
        when it is ``None``. Pixels with alpha < 128 or every channel ≥ ``white_threshold``
        are empty."""
        labels = _image_labels(load_image(path), colors or {}, default_group, tolerance,
                               white_threshold)
        return cls(labels, origin, pixel_size)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of the bounding box [m]."""
        rows, cols = self.labels.shape
        return self.origin, self.origin + self.pixel_size * np.array([cols, rows], float)

    def label(self, points: np.ndarray) -> np.ndarray:
        """The label of the pixel under each point (−1 outside or empty)."""
        rows, cols = self.labels.shape
        local = (points - self.origin) / self.pixel_size
        col = np.floor(local[:, 0]).astype(np.int64)
        row = rows - 1 - np.floor(local[:, 1]).astype(np.int64)
        inside = (col >= 0) & (col < cols) & (row >= 0) & (row < rows)
        out = np.full(len(points), -1, dtype=np.int64)
        out[inside] = self.labels[row[inside], col[inside]]
        return out


# -- STL meshes -------------------------------------------------------------------------------


_STL_RECORD = np.dtype([("normal", "<f4", 3), ("vertices", "<f4", (3, 3)), ("attr", "<u2")])
"""One triangle of a binary STL file (50 bytes)."""


def _load_ascii_stl(text: str, name: str) -> np.ndarray:
    vertices = []
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if words and words[0] == "vertex":
            if len(words) != 4:
                raise GeometryError(f"STL file {name!r}, line {number}: a vertex needs three "
                                    f"coordinates, got {line.strip()!r}")
            try:
                vertices.append([float(w) for w in words[1:]])
            except ValueError:
                raise GeometryError(f"STL file {name!r}, line {number}: cannot read "
                                    f"coordinates in {line.strip()!r}") from None
    if not vertices:
        raise GeometryError(f"STL file {name!r} holds no 'vertex' lines; is it empty?")
    if len(vertices) % 3:
        raise GeometryError(f"STL file {name!r} has {len(vertices)} vertices, not a multiple "
                            "of 3: a facet is truncated; re-export the mesh")
    return np.asarray(vertices, dtype=np.float64).reshape(-1, 3, 3)


def load_stl(path: str | os.PathLike) -> np.ndarray:
    """Read an ASCII or binary STL file; triangles [file units], shape (m, 3, 3).

    The format is told by size: a binary file is exactly 84 + 50 m bytes for the m
    triangles its header announces; anything else must be ASCII text (``solid … endsolid``).
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise GeometryError(f"STL file {name!r} does not exist; check the path")
    with open(name, "rb") as handle:
        data = handle.read()
    if len(data) >= 84 and len(data) == 84 + 50 * struct.unpack_from("<I", data, 80)[0]:
        triangles = np.frombuffer(data, _STL_RECORD, offset=84)["vertices"].astype(np.float64)
    elif data.lstrip()[:5].lower() == b"solid":
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise GeometryError(f"STL file {name!r} starts like ASCII STL but holds binary "
                                "data of the wrong length: it is truncated or corrupt") from None
        triangles = _load_ascii_stl(text, name)
    else:
        raise GeometryError(
            f"STL file {name!r} is neither ASCII STL (starting with 'solid') nor binary STL "
            f"(84-byte header + 50 bytes per triangle; the file has {len(data)} bytes): it is "
            "truncated or corrupt; re-export the mesh")
    if len(triangles) == 0:
        raise GeometryError(f"STL file {name!r} contains no triangles")
    if not np.all(np.isfinite(triangles)):
        raise GeometryError(f"STL file {name!r} contains NaN or infinite coordinates")
    return triangles


def winding_number(points: np.ndarray, triangles: np.ndarray, *, chunk: int = 4096) -> np.ndarray:
    """Generalized winding number of a triangle soup around each point.

    Sum of signed solid angles Ω (Van Oosterom–Strackee formula) over 4π: about 1 inside a
    closed outward-oriented mesh, 0 outside, and ½-ish near holes. points (n, 3),
    triangles (m, 3, 3); returns (n,).
    """
    points = np.asarray(points, dtype=np.float64)
    out = np.empty(len(points))
    for start in range(0, len(points), chunk):
        p = points[start : start + chunk, None, :]
        a, b, c = (triangles[None, :, i, :] - p for i in range(3))
        la, lb, lc = (np.linalg.norm(v, axis=-1) for v in (a, b, c))
        numerator = np.einsum("...i,...i", a, np.cross(b, c))
        denominator = (la * lb * lc + np.einsum("...i,...i", a, b) * lc
                       + np.einsum("...i,...i", b, c) * la + np.einsum("...i,...i", c, a) * lb)
        out[start : start + chunk] = np.sum(2.0 * np.arctan2(numerator, denominator), axis=1)
    return out / (4.0 * np.pi)


@dataclasses.dataclass(frozen=True)
class MeshShape(_Shape):
    """The solid bounded by a triangle mesh [m]; label 0 where the winding number ≥ ½.

    ``triangles`` shape (m, 3, 3). Build from a file with :meth:`from_file`.
    """

    triangles: np.ndarray

    def __post_init__(self):
        triangles = np.asarray(self.triangles, dtype=np.float64)
        if triangles.ndim != 3 or triangles.shape[1:] != (3, 3) or len(triangles) == 0:
            raise GeometryError(f"mesh triangles must have shape (m, 3, 3), got {triangles.shape}")
        object.__setattr__(self, "triangles", triangles)

    @classmethod
    def from_file(cls, path, *, scale: float = 1.0, origin=(0.0, 0.0, 0.0)) -> MeshShape:
        """Load an STL, multiply by ``scale`` and move its bounding-box minimum to ``origin``."""
        if not (np.isfinite(scale) and scale > 0):
            raise GeometryError(f"mesh scale must be a positive number, got {scale!r}")
        triangles = load_stl(path) * float(scale)
        lowest = triangles.reshape(-1, 3).min(axis=0)
        return cls(triangles - lowest + _vector(origin, "mesh origin", 3))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of the bounding box [m]."""
        flat = self.triangles.reshape(-1, 3)
        return flat.min(axis=0), flat.max(axis=0)

    def label(self, points: np.ndarray) -> np.ndarray:
        """0 inside the mesh, −1 outside; points shape (n, 3)."""
        lower, upper = self.bounds()
        out = np.full(len(points), -1, dtype=np.int64)
        near = np.all((points >= lower) & (points <= upper), axis=1)
        # |w| handles meshes whose facets all point inwards.
        inside = np.abs(winding_number(points[near], self.triangles)) >= 0.5
        out[np.flatnonzero(near)[inside]] = 0
        return out


# -- sampling ---------------------------------------------------------------------------------


def lattice_points(lower, upper, spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """Points ``(i + ½) spacing`` of the global lattice inside [lower, upper].

    Returns (points [m], shape (n, dim); integer lattice indices, shape (n, dim)).
    """
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    first = np.ceil(lower / spacing - 0.5 - 1e-9).astype(np.int64)
    last = np.floor(upper / spacing - 0.5 + 1e-9).astype(np.int64)
    if np.any(last < first):
        return np.zeros((0, lower.size)), np.zeros((0, lower.size), dtype=np.int64)
    axes = [np.arange(a, b + 1) for a, b in zip(first, last, strict=True)]
    index = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, lower.size)
    return (index + 0.5) * spacing, index


def sample_shapes(shapes: Sequence, *, spacing: float, groups: Sequence[int | None] | None = None,
                  jitter: float = 0.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fill the union of ``shapes`` with particles on one lattice of ``spacing`` [m].

    Args:
        shapes: objects with ``dim``, ``bounds()`` and ``label(points)``, all of one dim.
        spacing: lattice spacing [m]; ``dx / 2`` gives the usual 4 (2D) or 8 (3D)
            particles per grid cell.
        groups: per shape, the group id its particles get, or ``None`` to keep the shape's
            own labels (image colors). Default: shape i gets group i.
        jitter: uniform random offset per particle, as a fraction of ``spacing`` (0 ≤ j < 1).
        seed: seed of the jitter.

    Returns:
        particle positions [m], shape (n, dim); the index of the shape each particle came
        from, shape (n,); particle groups, shape (n,) int64. Where shapes overlap the
        earlier shape keeps the particle.
    """
    if not shapes:
        raise GeometryError("no shapes to sample: give at least one body")
    groups = list(range(len(shapes))) if groups is None else list(groups)
    if len(groups) != len(shapes):
        raise GeometryError(f"{len(groups)} group ids for {len(shapes)} shapes")
    if not (np.isfinite(spacing) and spacing > 0):
        raise GeometryError(f"particle spacing must be a positive length [m], got {spacing!r}")
    if not (0.0 <= jitter < 1.0):
        raise GeometryError(f"jitter must be a fraction of the spacing in [0, 1), got {jitter!r}")
    dims = {shape.dim for shape in shapes}
    if len(dims) != 1:
        raise GeometryError(f"all shapes must have the same dimension, got {sorted(dims)}")
    found = []
    for number, (shape, group) in enumerate(zip(shapes, groups, strict=True)):
        points, index = lattice_points(*shape.bounds(), spacing)
        label = shape.label(points)
        inside = label >= 0
        if not np.any(inside):
            raise GeometryError(
                f"shape {number} ({type(shape).__name__}) holds no lattice point at spacing "
                f"{spacing} m; make it larger or the spacing smaller")
        count = int(inside.sum())
        found.append((points[inside], index[inside], np.full(count, number),
                      label[inside] if group is None else np.full(count, int(group))))
    points, index, shape_index, particle_group = map(np.concatenate, zip(*found, strict=True))
    first = np.sort(np.unique(index, axis=0, return_index=True)[1])  # earlier shapes win
    particle_x = points[first]
    if jitter:
        rng = np.random.default_rng(seed)
        particle_x = particle_x + rng.uniform(-0.5, 0.5, particle_x.shape) * jitter * spacing
    return particle_x, shape_index[first], particle_group[first].astype(np.int64)
