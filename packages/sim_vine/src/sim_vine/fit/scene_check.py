"""A scene's obstacles checked against a recorded vine before a fit.

Two mistakes in a scene (a wrong obstacle position, a wrong scale) make a fit chase a model
that cannot follow the recording, and both show in the recorded path itself:

- an obstacle that holds the base, or that the recorded centreline passes through (a thin
  wall drawn across the base, an obstacle shifted onto the vine's path): an error naming the
  obstacle and the frames;
- an obstacle the recorded vine touches along a stretch shorter than the spacing of the
  chain's contact points (away from the tip), so that the simulated bodies can cut across it
  between two points (the model only pushes at the contact points): a warning naming the
  obstacle, the stretch and the spacing, with the fix (``contact: along`` or more bodies).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..model import VineModel
from ..obstacles import Circle, Wall, signed_distance
from ..vision.keypoints import Keypoints

__all__ = ["OBSTACLE_TOLERANCE_MM", "OBSTACLE_TOLERANCE_PX", "SceneCheck", "SceneMismatchError",
           "check_scene", "contact_spacing", "obstacle_tolerance"]

SAMPLE_SPACING = 1e-3
"""Spacing [m] of the points checked along each recorded centreline."""


OBSTACLE_TOLERANCE_MM = 2.0
"""The least default tolerance [mm] of the check."""
OBSTACLE_TOLERANCE_PX = 2.0
"""The default tolerance in pixels of the recording, where that is more: keypoints are
found to about a pixel."""


class SceneMismatchError(ValueError):
    """The scene's obstacles contradict the recorded vine."""


def obstacle_tolerance(given_mm: float | None, metres_per_pixel: float | None
                       ) -> tuple[float, tuple[str, ...]]:
    """The check's tolerance [m] and a note saying so when it is not ``given_mm`` (none
    when it is, or is the default in millimetres).

    Args:
        given_mm: the user's tolerance [mm], or ``None`` for the default:
            :data:`OBSTACLE_TOLERANCE_MM`, or :data:`OBSTACLE_TOLERANCE_PX` pixels where
            that is more.
        metres_per_pixel: the recording's pixel size [m/px]; ``None`` for keypoints in
            metres.

    Raises:
        SceneMismatchError: ``given_mm`` is not a positive number.
    """
    if given_mm is not None:
        if isinstance(given_mm, bool) or not isinstance(given_mm, int | float) or not (
                given_mm > 0 and np.isfinite(given_mm)):
            raise SceneMismatchError(f"obstacle_tolerance_mm must be a positive number of "
                                     f"millimetres, got {given_mm!r}")
        return 1e-3 * float(given_mm), ()
    pixels = 0.0 if metres_per_pixel is None else OBSTACLE_TOLERANCE_PX * metres_per_pixel
    if pixels <= 1e-3 * OBSTACLE_TOLERANCE_MM:
        return 1e-3 * OBSTACLE_TOLERANCE_MM, ()
    return pixels, (f"scene check tolerance {1e3 * pixels:.3g} mm: {OBSTACLE_TOLERANCE_PX:g} "
                    f"pixels of {1e3 * metres_per_pixel:.3g} mm (set obstacle_tolerance_mm to "
                    "change it)",)


@dataclasses.dataclass(frozen=True)
class SceneCheck:
    """Warnings about the scene against a recording (errors raise instead).

    Attributes:
        warnings: one line per obstacle the chain can cut through.
    """

    warnings: tuple[str, ...] = ()


def _describe(index: int, obstacle) -> str:
    if isinstance(obstacle, Circle):
        return f"obstacle {index} (circle at {obstacle.center.tolist()}, r {obstacle.radius:g} m)"
    if isinstance(obstacle, Wall):
        return (f"obstacle {index} (wall {obstacle.start.tolist()} → {obstacle.end.tolist()}, "
                f"{obstacle.thickness:g} m thick)")
    return f"obstacle {index} (polygon with vertices {obstacle.vertices.round(4).tolist()})"


def contact_spacing(model: VineModel, keypoints: Keypoints) -> float:
    """The largest gap [m] between consecutive contact points of the chain (the base
    included), at the model's initial pose stretched to the recording's longest vine (the
    prismatic joints spread growth over the chain)."""
    positions = model.contact_positions(model.initial_configuration())
    chain = np.vstack([np.asarray(model.base[:2], dtype=np.float64), positions])
    gap = float(np.max(np.linalg.norm(np.diff(chain, axis=0), axis=1)))
    seen = keypoints.points[np.all(np.isfinite(keypoints.points), axis=(1, 2))]
    recorded = float(np.max(np.sum(np.linalg.norm(np.diff(seen, axis=1), axis=2), axis=1)))
    return gap * max(1.0, recorded / model.length)


def _dense(polyline: np.ndarray) -> np.ndarray:
    """Points along a polyline (k, 2) at most :data:`SAMPLE_SPACING` apart."""
    out = [polyline[:1]]
    for a, b in zip(polyline[:-1], polyline[1:], strict=True):
        count = max(1, int(np.ceil(np.linalg.norm(b - a) / SAMPLE_SPACING)))
        out.append(a + np.linspace(0.0, 1.0, count + 1)[1:, None] * (b - a))
    return np.concatenate(out)


def _crosses(distance: np.ndarray, normal: np.ndarray) -> bool:
    """Whether a densely sampled path crosses an obstacle: two successive samples outside it
    (with or without samples inside between them) see it from opposite sides."""
    outside = np.flatnonzero(distance >= 0)
    facing = np.sum(normal[outside[:-1]] * normal[outside[1:]], axis=1)
    return bool(np.any(facing < 0))


def _short_touch(distance: np.ndarray, samples: np.ndarray, touch: float, spacing: float
                 ) -> float | None:
    """The shortest stretch [m] of a path sampled at ``samples`` (k, 2) that runs within
    ``touch`` of an obstacle (``distance`` (k,)) and is shorter than ``spacing``, leaving out
    stretches that end at the tip (a contact point itself); ``None`` if there is none."""
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(samples, axis=0), axis=1))])
    near = np.concatenate([[False], distance < touch, [False]])
    edges = np.flatnonzero(np.diff(near.astype(np.int8)))
    lengths = [arc[end - 1] - arc[start] for start, end in zip(edges[::2], edges[1::2],
                                                                strict=True)
               if end < len(distance)]
    short = [length for length in lengths if length < spacing]
    return min(short) if short else None


def _frames(frames: list[int]) -> str:
    shown = ", ".join(str(f) for f in frames[:8])
    return f"frame{'s' if len(frames) > 1 else ''} {shown}{' …' if len(frames) > 8 else ''}"


def check_scene(model: VineModel, keypoints: Keypoints, *, tolerance: float = 2e-3) -> SceneCheck:
    """Check ``model``'s obstacles against a recording's keypoints [m].

    Args:
        model: the vine model (base, obstacles, contact points).
        keypoints: the recording, base first.
        tolerance: how deep [m] the recorded centreline may dip into an obstacle before it
            counts as passing through it (measurement noise, the vine's own radius).

    Raises:
        SceneMismatchError: an obstacle holds the base or the recorded vine passes through
            it; the message names the obstacle, the frames and the fix.

    Returns:
        A :class:`SceneCheck` with warnings about obstacles the recorded vine touches along
        less than the contact points' spacing (within 3 × ``tolerance``).
    """
    base = np.asarray(model.base[:2], dtype=np.float64)
    seen = [f for f in range(keypoints.frame_count) if np.all(np.isfinite(keypoints.points[f]))]
    samples = [_dense(np.vstack([base, keypoints.points[f]])) for f in seen]
    spacing = contact_spacing(model, keypoints)
    touch = max(3.0 * tolerance, SAMPLE_SPACING)
    warnings = []
    for index, obstacle in enumerate(model.obstacles):
        name = _describe(index, obstacle)
        base_distance = float(signed_distance(obstacle, base[None])[0][0])
        if base_distance < 0:
            raise SceneMismatchError(
                f"{name} holds the vine's base {base.tolist()} ({-1e3 * base_distance:.1f} mm "
                "inside): the vine starts there in every frame; move the obstacle or fix the "
                "scene's base (and the recording's origin)")
        queries = [signed_distance(obstacle, s)[:2] for s in samples]
        depth = [float(-sd.min()) for sd, _ in queries]
        through = [f for f, d, (sd, normal) in zip(seen, depth, queries, strict=True)
                   if d > tolerance or _crosses(sd, normal)]
        if through:
            raise SceneMismatchError(
                f"{name}: the recorded vine passes through it in {_frames(through)} (up to "
                f"{1e3 * max(depth):.1f} mm inside, tolerance {1e3 * tolerance:g} mm); the "
                "obstacle's position or size, or the recording's scale or origin, is wrong")
        runs = [(f, _short_touch(sd, sample, touch, spacing))
                for f, (sd, _), sample in zip(seen, queries, samples, strict=True)]
        touching = [f for f, length in runs if length is not None]
        if touching:
            shortest = min(length for _, length in runs if length is not None)
            warnings.append(
                f"{name}: the recorded vine touches it along only {1e3 * shortest:.1f} mm "
                f"({_frames(touching)}), less than the {1e3 * spacing:.1f} mm between the "
                "chain's contact points, away from the tip: simulated bodies can cut across it "
                "between two contact points; use contact: along (points along every body) "
                "or more bodies")
    return SceneCheck(warnings=tuple(warnings))
