"""Keypoints files a user brings (CSV or NPZ), read with checks that name the problem and the fix.

A keypoints file holds, per frame, the frame time and the vine's centreline points from the
base to the tip, and optionally the tip as its own columns (appended as the last point):

- CSV: a header row ``time,x0,y0,x1,y1,...`` (``frame`` instead of ``time`` numbers frames
  0, 1, 2, … and then needs ``fps``), optional ``tip_x,tip_y`` columns; one row per frame.
- NPZ: ``points`` or ``centreline`` (frames, points, 2), optional ``tip`` (frames, 2) and
  ``times`` (frames,) [s].

Coordinates are in metres (``units: m``), millimetres (``mm``) or pixels (``px``, with a
scale measured in the recording: ``metres_per_pixel`` or two pixels a known ``distance``
apart, such as pegboard holes, and the ``origin_px`` that maps to the world origin).

Checks (each a :class:`KeypointsFileError` with the fix): values whose span looks like
millimetres or pixels where metres are expected (and the reverse), transposed arrays, time
going backwards, frames partly NaN, inf values (listed), a file without usable frames, and a
frame rate that is neither given nor estimable (it is never assumed). Frames missing from
the file (a gap of whole frame intervals in ``time``) and frames that are all NaN become NaN
rows that a fit skips; :attr:`KeypointsFile.notes` lists them.
"""

from __future__ import annotations

import dataclasses
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..vision.keypoints import Calibration, KeypointError, Keypoints

__all__ = ["KeypointsFile", "KeypointsFileError", "UNITS", "check_units", "pixel_scale",
           "pixel_size", "read_keypoints_file"]

UNITS = {"m": 1.0, "mm": 1e-3, "px": None}
"""Coordinate units of a keypoints file and their size in metres (pixels: from the scale)."""

VINE_SPAN_M = (2e-3, 20.0)
"""The largest extent a recorded vine can plausibly have [m]: below, the values are not
metres (they look like kilometres or a wrong scale); above, millimetres or pixels."""

FPS_TOLERANCE = 0.01
"""Largest relative difference between a given ``fps`` and the file's timestamps' rate."""


class KeypointsFileError(KeypointError):
    """A keypoints file cannot be read as a recording; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class KeypointsFile:
    """A keypoints file read into metres.

    Attributes:
        keypoints: times [s] (evenly spaced) and points [m] (frames, points, 2), NaN rows for
            frames missing from the file or all NaN in it.
        fps: the frame rate [Hz]; ``fps_source`` says whether it was ``given`` or
            ``estimated`` from the timestamps.
        notes: what the reader filled in or assumed nothing about, for the report.
        metres_per_pixel: a pixel's size on the motion plane where the first frame's vine
            leaves its base [m/px] (:func:`pixel_size`); ``None`` for a file in metres or
            millimetres.
    """

    keypoints: Keypoints
    fps: float
    fps_source: str
    notes: tuple[str, ...] = ()
    metres_per_pixel: float | None = None


def pixel_size(calibration: Calibration, keypoints: Keypoints) -> float:
    """A pixel's size on the motion plane [m/px] at the first seen frame's base keypoint
    (the local scale of ``calibration``, which varies over the image of a tilted camera)."""
    seen = np.flatnonzero(~np.isnan(keypoints.points).any(axis=(1, 2)))
    return 1.0 / calibration.pixels_per_metre(keypoints.points[seen[0], 0])


def pixel_scale(scale: Mapping[str, Any]) -> float:
    """Metres per pixel from ``{metres_per_pixel: s}`` or ``{pixels: [[u, v], [u, v]],
    distance: d}`` (two image points ``d`` metres apart, e.g. pegboard holes)."""
    keys = set(scale) if isinstance(scale, Mapping) else None
    if keys == {"metres_per_pixel"}:
        value = float(scale["metres_per_pixel"])
    elif keys == {"pixels", "distance"}:
        pixels = np.asarray(scale["pixels"], dtype=np.float64)
        if pixels.shape != (2, 2) or not np.all(np.isfinite(pixels)):
            raise KeypointsFileError(f"scale.pixels must be two image points [[u, v], [u, v]], "
                                     f"got {scale['pixels']!r}")
        apart = float(np.linalg.norm(pixels[1] - pixels[0]))
        if apart < 1.0:
            raise KeypointsFileError("scale.pixels are less than a pixel apart; pick two "
                                     "points far apart in the image (e.g. distant pegboard holes)")
        value = float(scale["distance"]) / apart
    else:
        raise KeypointsFileError(
            f"scale must be {{metres_per_pixel: s}} or {{pixels: [[u, v], [u, v]], distance: "
            f"d m}} (two image points a known distance apart); got {scale!r}")
    if not (np.isfinite(value) and value > 0):
        raise KeypointsFileError(f"the scale gives {value!r} metres per pixel; it must be "
                                 "positive (check scale.distance)")
    return value


def _read_csv(path: Path) -> tuple[np.ndarray | None, np.ndarray, np.ndarray | None, str]:
    with open(path) as handle:
        header = [h.strip() for h in handle.readline().strip().split(",")]
    clock = header[0] if header else ""
    tip = header[-2:] == ["tip_x", "tip_y"]
    names = header[1:len(header) - 2 * tip]
    n = len(names) // 2
    expected = [f"{a}{i}" for i in range(n) for a in "xy"]
    if clock not in ("time", "frame") or names != expected or n + tip < 2:
        raise KeypointsFileError(
            f"{str(path)!r} has header {header[:6]}…; expected 'time,x0,y0,x1,y1,…' (or "
            "'frame,…' with fps given), optionally ending in 'tip_x,tip_y', with at least two "
            "points per frame")
    table = np.genfromtxt(path, delimiter=",", skip_header=1, ndmin=2)
    if table.shape[1] != len(header):
        raise KeypointsFileError(f"{str(path)!r}: rows have {table.shape[1]} columns but the "
                                 f"header names {len(header)}")
    points = table[:, 1:1 + 2 * n].reshape(len(table), n, 2)
    tips = table[:, -2:] if tip else None
    return table[:, 0], points, tips, clock


def _transposed(array: np.ndarray, name: str, frames_hint: int | None) -> str | None:
    """How to fix a points array given as (frames, 2, n) or (2, n, frames), if it is one."""
    if array.ndim == 3 and array.shape[2] != 2:
        if array.shape[1] == 2:
            return f"{name} looks like (frames, 2, points); use {name}.transpose(0, 2, 1)"
        if array.shape[0] == 2:
            return f"{name} looks like (2, points, frames); use {name}.transpose(2, 1, 0)"
    if array.ndim == 2 and array.shape[0] == 2 and array.shape[1] != 2:
        return f"{name} looks like (2, frames); use {name}.T"
    if frames_hint is not None and array.ndim == 3 and array.shape[0] != frames_hint \
            and array.shape[1] == frames_hint:
        return f"{name} looks like (points, frames, 2); use {name}.transpose(1, 0, 2)"
    return None


def _read_npz(path: Path) -> tuple[np.ndarray | None, np.ndarray, np.ndarray | None, str]:
    try:
        with np.load(path) as data:
            arrays = {k: np.asarray(data[k], dtype=np.float64) for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise KeypointsFileError(f"cannot read {str(path)!r} as .npz: {exc}") from None
    name = "points" if "points" in arrays else "centreline" if "centreline" in arrays else None
    if name is None:
        raise KeypointsFileError(f"{str(path)!r} holds {sorted(arrays)}; it needs 'points' (or "
                                 "'centreline') (frames, points, 2), optionally 'tip' "
                                 "(frames, 2) and 'times' (frames,) [s]")
    points, times, tips = arrays[name], arrays.get("times"), arrays.get("tip")
    frames = None if times is None else times.size
    for array, label in ((points, name), (tips, "tip")):
        if array is None:
            continue
        hint = _transposed(array, label, frames)
        if hint:
            raise KeypointsFileError(f"{str(path)!r}: array {label!r} has shape {array.shape}: "
                                     f"{hint} before saving")
    if points.ndim != 3 or points.shape[2] != 2:
        raise KeypointsFileError(f"{str(path)!r}: {name!r} has shape {points.shape}; expected "
                                 "(frames, points, 2)")
    if tips is not None and tips.shape != (points.shape[0], 2):
        raise KeypointsFileError(f"{str(path)!r}: 'tip' has shape {tips.shape}; expected "
                                 f"({points.shape[0]}, 2), one tip per frame")
    if times is not None and times.shape != (points.shape[0],):
        raise KeypointsFileError(f"{str(path)!r}: 'times' has shape {times.shape} but "
                                 f"{name!r} has {points.shape[0]} frames; give one time per "
                                 "frame")
    return times, points, tips, "time" if times is not None else "frame"


def _frame_rate(clock: np.ndarray, kind: str, fps: float | None, where: str
                ) -> tuple[np.ndarray, float, str]:
    """Times [s] and the frame rate, given or estimated; never assumed."""
    if not np.all(np.isfinite(clock)):
        bad = np.flatnonzero(~np.isfinite(clock)).tolist()
        raise KeypointsFileError(f"{where}: the {kind} column is NaN or inf in rows {bad}; "
                                 "every frame needs its time")
    backwards = np.flatnonzero(np.diff(clock) <= 0)
    if backwards.size:
        rows = [f"{i}→{i + 1} ({clock[i]:g} → {clock[i + 1]:g})" for i in backwards[:10]]
        raise KeypointsFileError(
            f"{where}: the {kind} goes backwards or repeats between rows {', '.join(rows)}"
            f"{' …' if backwards.size > 10 else ''}; sort the rows by {kind} and drop duplicate "
            "frames")
    if fps is not None and not (np.isfinite(fps) and fps > 0):
        raise KeypointsFileError(f"fps must be a positive number of frames per second, got "
                                 f"{fps!r}")
    if kind == "frame":
        if fps is None:
            raise KeypointsFileError(f"{where} numbers its frames but has no times: give the "
                                     "frame rate (fps: 30) or a 'time' column in seconds; a rate "
                                     "is never assumed")
        return (clock - clock[0]) / fps, float(fps), "given"
    if len(clock) < 2:
        raise KeypointsFileError(f"{where} has {len(clock)} frame(s); a fit needs two")
    # the shortest gap is one frame interval; a least-squares line through the frames' times
    # against their indices then averages out rounded timestamps
    index = np.round((clock - clock[0]) / float(np.min(np.diff(clock))))
    interval = float(np.polyfit(index, clock, 1)[0]) if index[-1] > 0 else 0.0
    estimated = 1.0 / interval if interval > 0 else float("inf")
    if fps is not None and abs(estimated - fps) > FPS_TOLERANCE * fps:
        raise KeypointsFileError(
            f"{where}: the timestamps are {interval:.6g} s apart ({estimated:.4g} fps) but fps "
            f"is given as {fps:g}; drop fps to use the timestamps, or fix the time column (a "
            "time in milliseconds or frames?)")
    if interval < 1e-4 or interval > 10.0:
        raise KeypointsFileError(
            f"{where}: frames are {interval:.6g} s apart ({estimated:.4g} fps), not a camera's "
            "rate; the time column must be in seconds (ms? use 'frame' numbers with fps)")
    return clock - clock[0], (float(fps) if fps is not None else estimated), \
        ("given" if fps is not None else "estimated")


def _fill_gaps(times: np.ndarray, points: np.ndarray, fps: float, where: str
               ) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
    """Evenly spaced frames: gaps of whole frame intervals become NaN rows; also returns
    the missing frames and each file row's frame index."""
    position = times * fps
    index = np.round(position).astype(np.int64)
    if np.max(np.abs(position - index)) > 0.05:
        worst = int(np.argmax(np.abs(position - index)))
        raise KeypointsFileError(
            f"{where}: frame {worst} at t = {times[worst]:.6g} s lies between frames of a "
            f"{fps:.4g} fps clock; resample the recording to a fixed rate (or give the right fps)")
    full = np.full((int(index[-1]) + 1, *points.shape[1:]), np.nan)
    full[index] = points
    missing = sorted(set(range(len(full))) - set(index.tolist()))
    return np.arange(len(full)) / fps, full, missing, index


def check_units(points: np.ndarray, units: str, where: str) -> None:
    """Refuse keypoints [m] (frames, points, 2) whose extent is no vine's (:data:`VINE_SPAN_M`):
    with ``units: px`` a wrong scale, otherwise values in another unit than ``units``; the
    message names ``where`` and the fix."""
    finite = points[np.all(np.isfinite(points), axis=(1, 2))]
    span = float(np.max(np.ptp(finite.reshape(-1, 2), axis=0)))
    low, high = VINE_SPAN_M
    if units == "px" and not low <= span <= high:
        raise KeypointsFileError(
            f"{where}: with the given scale the points span {span:.4g} m, not a vine recording "
            f"({1e3 * low:g} mm to {high:g} m); check the scale (metres_per_pixel, or "
            "scale.distance in metres between scale.pixels)")
    if span > high:
        raise KeypointsFileError(
            f"{where}: the points span {span:.4g} m with units: {units}, more than any vine "
            f"recording (≤ {high:g} m): the values look like millimetres or pixels; set units: "
            "mm, or units: px with a scale (metres_per_pixel, or two pixels a known distance "
            "apart) and origin_px")
    if span < low:
        raise KeypointsFileError(
            f"{where}: the points span only {1e3 * span:.4g} mm with units: {units}: the "
            "values look like metres read as a larger unit (or a scale far too small); set "
            "units: m, or check the scale")


def read_keypoints_file(
    path: str | Path,
    *,
    units: str = "m",
    scale: Mapping[str, Any] | None = None,
    origin_px: Sequence[float] | None = None,
    flip_y: bool = True,
    fps: float | None = None,
    points: int | None = None,
) -> KeypointsFile:
    """Read a keypoints file (see the module) into metres, checking it.

    Args:
        path: a ``.csv`` or ``.npz`` file.
        units: ``m``, ``mm`` or ``px`` (then ``scale`` and ``origin_px`` are required).
        scale: ``{metres_per_pixel: s}`` or ``{pixels: [[u, v], [u, v]], distance: d}``.
        origin_px: the pixel (x, y) that maps to the world origin (the scene's frame).
        flip_y: image y points down; world y points up.
        fps: frame rate [Hz]: required when the file numbers frames instead of timing them;
            otherwise estimated from the timestamps and, when given, checked against them.
        points: expected points per frame (tip included), or ``None``.

    Raises:
        KeypointsFileError: naming the problem and the fix.
    """
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise KeypointsFileError(f"no keypoints file at {where!r}; check the path (relative "
                                 "paths start in the YAML file's folder)")
    if units not in UNITS:
        raise KeypointsFileError(f"units must be one of {sorted(UNITS)}, got {units!r}")
    if units == "px" and (scale is None or origin_px is None):
        raise KeypointsFileError("units: px needs scale ({metres_per_pixel: s} or {pixels: "
                                 "[[u, v], [u, v]], distance: d}) and origin_px: [u, v] (the "
                                 "pixel of the world origin); a scale is never assumed")
    if units != "px" and (scale is not None or origin_px is not None):
        raise KeypointsFileError(f"scale and origin_px apply to units: px only, got units: "
                                 f"{units}")
    if path.suffix == ".csv":
        try:
            clock, raw, tips, kind = _read_csv(path)
        except (OSError, ValueError) as exc:
            if isinstance(exc, KeypointsFileError):
                raise
            raise KeypointsFileError(f"cannot read {where!r} as CSV: {exc}") from None
    elif path.suffix == ".npz":
        clock, raw, tips, kind = _read_npz(path)
    else:
        raise KeypointsFileError(f"keypoints files end in .csv or .npz, got {where!r}")
    if tips is not None:
        raw = np.concatenate([raw, tips[:, None, :]], axis=1)
    if clock is None:
        clock = np.arange(len(raw), dtype=np.float64)
    if len(raw) == 0:
        raise KeypointsFileError(f"{where!r} has no frames")
    infinite = np.flatnonzero(np.isinf(raw).any(axis=(1, 2)))
    if infinite.size:
        raise KeypointsFileError(
            f"{where}: frames {infinite.tolist()} hold inf values (a failed tracker?); write "
            "NaN for every coordinate of a frame without the vine, or drop those rows")
    nan = np.isnan(raw)
    partial = np.flatnonzero(nan.any(axis=(1, 2)) & ~nan.all(axis=(1, 2)))
    if partial.size:
        raise KeypointsFileError(
            f"{where}: frames {partial.tolist()} are partly NaN; a frame is complete or all NaN "
            "(missing): fill in the points or blank the whole row")
    empty = np.flatnonzero(nan.all(axis=(1, 2))).tolist()
    if len(empty) == len(raw):
        raise KeypointsFileError(f"{where}: every frame is NaN; the file holds no points (a "
                                 "tracker that found nothing, or the wrong columns)")
    if empty and empty[0] == 0:
        first = int(np.flatnonzero(~nan.all(axis=(1, 2)))[0])
        raise KeypointsFileError(
            f"{where}: the first frame is all NaN (the first {first} are); a fit starts from "
            f"the first frame's pose, so drop the rows before row {first}")
    if points is not None and raw.shape[1] != points:
        raise KeypointsFileError(f"{where} has {raw.shape[1]} points per frame (tip included) "
                                 f"but {points} are expected; set the measurement's count to "
                                 f"{raw.shape[1]}")
    times, rate, source = _frame_rate(clock, kind, fps, where)
    times, raw, gaps, rows = _fill_gaps(times, raw, rate, where)
    empty = rows[empty].tolist()
    calibration = None
    if units == "px":
        calibration = Calibration.from_scale(pixel_scale(scale), origin_px, flip_y=flip_y)
        metres = calibration.to_world(raw)
    else:
        metres = raw * UNITS[units]
    check_units(metres, units, where)
    notes = [f"frame rate {rate:.6g} fps ({source})"]
    if gaps:
        notes.append(f"frames {gaps} are missing from the file (NaN rows, skipped by the fit)")
    if empty:
        notes.append(f"frames {empty} of the file are all NaN (skipped by the fit)")
    try:
        keypoints = Keypoints(times, metres, reasons={i: "missing from the file" for i in gaps})
    except KeypointError as exc:
        raise KeypointsFileError(f"{where}: {exc}") from None
    return KeypointsFile(keypoints=keypoints, fps=rate, fps_source=source, notes=tuple(notes),
                         metres_per_pixel=None if calibration is None
                         else pixel_size(calibration, keypoints))
