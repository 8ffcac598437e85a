"""Recording sources: where an identification run's trajectories come from.

A source is a factory registered through the ``codesign_register_recordings`` hook (its
arguments and result: :mod:`codesign.hookspecs`). The core's are :func:`file_recordings`
(``file``: an ``.npz`` file, as :func:`save_recordings` writes it) and
:func:`synthetic_recordings` (``synthetic``: simulated at a truth design, with noise).
:func:`frame_steps` places a source's timestamped frames (a video) on the run's control steps.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from .controllers import OpenLoopController
from .identification import Recording
from .limits import MAX_RECORDINGS, MAX_STEPS
from .options import Range, suggest
from .outputs import read_npz, write_npz
from .rollout import Rollout
from .terms import Objective

__all__ = [
    "RecordingSet",
    "RecordingSourceError",
    "file_recordings",
    "frame_steps",
    "save_recordings",
    "smooth_random_actions",
    "synthetic_recordings",
    "truth_design",
]


class RecordingSourceError(ValueError):
    """A recording source cannot deliver: missing file, wrong arrays, unknown parameters."""


class RecordingSet(list):
    """A list of recordings that may know the design parameters behind them.

    Attributes:
        truth: ``parameter name -> value`` (arrays of the parameters' shapes), or ``None``.
    """

    def __init__(self, recordings: Sequence[Recording] = (), *,
                 truth: Mapping[str, Any] | None = None):
        super().__init__(recordings)
        self.truth = None if truth is None else {k: np.asarray(v, dtype=np.float64)
                                                 for k, v in truth.items()}


# -- files ------------------------------------------------------------------------------------


def save_recordings(path: str | Path, recordings: Sequence[Recording], *,
                    truth: Mapping[str, Any] | None = None) -> Path:
    """Write recordings of equal length, and any ``truth``, to an ``.npz`` that
    :func:`file_recordings` reads."""
    recordings = list(recordings)
    if not recordings:
        raise ValueError("no recordings to save")
    steps = {r.steps for r in recordings}
    if len(steps) > 1:
        raise ValueError(f"recordings of different lengths {sorted(steps)} cannot share one "
                         "file; save them separately")
    arrays = {"actions": np.stack([r.actions for r in recordings]),
              "measurements": np.stack([r.measurements for r in recordings]),
              "names": np.array([r.name for r in recordings], dtype=str)}
    arrays.update({f"truth.{k}": np.asarray(v, dtype=np.float64)
                   for k, v in (truth or {}).items()})
    return write_npz(path, arrays)


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise RecordingSourceError(f"recording file {str(path)!r} not found; check options.path "
                                   "(relative paths are resolved against the experiment's "
                                   "folder)")
    try:
        return read_npz(path)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise RecordingSourceError(f"cannot read recording file {str(path)!r} as .npz: "
                                   f"{exc}") from None


def file_recordings(*, simulator, measurement, dt: float, substeps: int, base_dir: Path,
                    path: str) -> RecordingSet:
    """Recordings read from an ``.npz`` file (the ``file`` source).

    Args:
        path: the file; a relative path is resolved against ``base_dir`` (the folder of the
            experiment YAML). It holds ``actions`` of shape (R, T, action_size) and
            ``measurements`` of shape (R, T + 1, measurement size) (or one recording: (T, a)
            and (T + 1, m)), optionally ``names`` (R,) and ``truth.<parameter>`` arrays.
        simulator, measurement: give the expected action and measurement sizes.
        dt, substeps, base_dir: as the hook passes them (``dt``/``substeps`` are unused: the
            file stores control steps).
    """
    del dt, substeps
    file = Path(path)
    if not file.is_absolute():
        file = Path(base_dir) / file
    arrays = _load_npz(file)
    where = f"recording file {str(file)!r}"
    for name in ("actions", "measurements"):
        if name not in arrays:
            raise RecordingSourceError(
                f"{where} has no array {name!r} (it has {sorted(arrays) or 'none'}); it needs "
                "'actions' (R, T, action_size) and 'measurements' (R, T + 1, measurement size)")
    actions = np.asarray(arrays["actions"], dtype=np.float64)
    measurements = np.asarray(arrays["measurements"], dtype=np.float64)
    if actions.ndim == 2 and measurements.ndim == 2:
        actions, measurements = actions[None], measurements[None]
    a, m = int(simulator.action_size), int(measurement.size)
    if actions.ndim != 3 or actions.shape[2] != a:
        raise RecordingSourceError(f"{where}: array 'actions' has shape {actions.shape}; "
                                   f"expected (recordings, steps, {a}) or (steps, {a})")
    count, steps = actions.shape[:2]
    if measurements.shape != (count, steps + 1, m):
        raise RecordingSourceError(
            f"{where}: array 'measurements' has shape {measurements.shape}; expected "
            f"({count}, {steps + 1}, {m}): recordings as in 'actions', one row per state "
            f"(steps + 1, the initial one included), {m} value(s) per row from the measurement")
    names = [f"{file.stem}[{i}]" for i in range(count)]
    if "names" in arrays:
        given = np.asarray(arrays["names"]).reshape(-1)
        if given.shape != (count,):
            raise RecordingSourceError(f"{where}: array 'names' has shape {given.shape}; "
                                       f"expected ({count},)")
        names = [str(n) or names[i] for i, n in enumerate(given)]
    truth = {k.removeprefix("truth."): v for k, v in arrays.items() if k.startswith("truth.")}
    try:
        recordings = [Recording(actions[i], measurements[i], name=names[i])
                      for i in range(count)]
    except ValueError as exc:
        raise RecordingSourceError(f"{where}: {exc}") from None
    return RecordingSet(recordings, truth=truth or None)


# -- timestamped frames -----------------------------------------------------------------------


def frame_steps(times, control_interval: float, *, tolerance: float = 0.01) -> np.ndarray:
    """The control step each frame falls on, shape (frames,), starting at 0.

    Args:
        times: frame timestamps [s], increasing.
        control_interval: ``dt × substeps`` of the run [s].
        tolerance: largest distance of a frame from its step, as a share of a step.

    Raises:
        RecordingSourceError: some frames fall between control steps; the message gives a
            ``dt``/``substeps`` that fits the recording.
    """
    times = np.asarray(times, dtype=np.float64)
    position = (times - times[0]) / control_interval
    steps = np.round(position).astype(np.int64)
    off = np.abs(position - steps)
    if np.any(off > tolerance) or np.any(np.diff(steps) <= 0):
        interval = float(np.median(np.diff(times))) if len(times) > 1 else control_interval
        raise RecordingSourceError(
            f"the recording's frames are {interval:.6g} s apart ({1 / interval:.4g} fps) but "
            f"a control step lasts dt × substeps = {control_interval:.6g} s, so frames fall "
            "between control steps; make the frame interval a whole number of control "
            f"steps, e.g. run.dt: {interval / 3:.10g} with run.substeps: 3 (a 3× model rate, "
            f"one control step per frame) or run.dt: {interval / 3:.10g} with "
            "run.substeps: 1 (frames on every third step)")
    return steps


# -- synthetic data ---------------------------------------------------------------------------


def smooth_random_actions(rng: np.random.Generator, steps: int, size: int, *, knots: int,
                          low: float, high: float) -> np.ndarray:
    """Smooth random signals, shape (steps, size), every value in [low, high].

    Per channel, ``knots`` values drawn uniformly in [low, high] are spread evenly over the
    trajectory and joined by cosine interpolation (continuous slope at the knots, no
    overshoot).
    """
    if knots < 2:
        raise ValueError(f"action_knots must be at least 2, got {knots}")
    values = rng.uniform(low, high, size=(knots, size))
    position = np.linspace(0.0, knots - 1.0, steps) if steps > 1 else np.zeros(1)
    left = np.minimum(np.floor(position).astype(int), knots - 2)
    blend = (1.0 - np.cos(np.pi * (position - left))) / 2.0
    return values[left] * (1.0 - blend[:, None]) + values[left + 1] * blend[:, None]


def truth_design(space, truth: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The simulator's default design with ``truth`` values (scalars broadcast) put in.

    Unknown names and values that do not fit a parameter's shape raise
    :class:`RecordingSourceError`.
    """
    design = space.defaults()
    for name, value in truth.items():
        if name not in space:
            raise RecordingSourceError(f"truth names unknown design parameter {name!r}"
                                       f"{suggest(name, space.names)}; "
                                       f"the simulator's parameters: {', '.join(space.names)}")
        shape = space[name].shape
        try:
            array = np.broadcast_to(np.asarray(value, dtype=np.float64), shape).copy()
        except ValueError:
            raise RecordingSourceError(f"truth value of {name!r} has shape "
                                       f"{np.shape(value)}, which does not fit the parameter's "
                                       f"shape {shape}; give a scalar or that shape") from None
        if not np.all(np.isfinite(array)):
            raise RecordingSourceError(f"truth value of {name!r} must be finite")
        design[name] = array
    return space.check(design)


def synthetic_recordings(*, simulator, measurement, dt: float, substeps: int, base_dir: Path,
                         truth: dict, steps: Annotated[int, Range(1, MAX_STEPS)],
                         count: Annotated[int, Range(1, MAX_RECORDINGS)] = 4,
                         noise_std: float = 0.0, seed: int = 0,
                         action_knots: Annotated[int, Range(2, MAX_STEPS)] = 6,
                         action_low: float = -1.0, action_high: float = 1.0) -> RecordingSet:
    """Simulated recordings at a truth design, with Gaussian measurement noise.

    Each recording replays its own smooth random action table
    (:func:`smooth_random_actions`) open loop for ``steps`` control steps of ``substeps``
    substeps of ``dt`` seconds from the truth design's initial state, and reads the
    measurement at states 0 … steps; ``noise_std`` (in measurement units) of independent
    Gaussian noise is added to every measured value.

    Args:
        truth: ``parameter -> value``; scalars broadcast to the parameter's shape, unnamed
            parameters keep the simulator's defaults (not the experiment's ``design`` inits).
        steps: control steps per recording (a YAML run defaults it to ``run.steps``).
        count: number of recordings.
        noise_std: standard deviation of the measurement noise, ≥ 0.
        seed: seeds the actions and the noise (a YAML run defaults it to ``run.seed``).
        action_knots: random values per channel over the trajectory (≥ 2); more is busier.
        action_low, action_high: the range of the action signals.
        base_dir: unused (nothing is read from disk).
    """
    del base_dir
    if int(steps) < 1 or int(count) < 1:
        raise RecordingSourceError(f"steps and count must be at least 1, got {steps} and "
                                   f"{count}")
    if not (np.isfinite(noise_std) and noise_std >= 0):
        raise RecordingSourceError(f"noise_std must be a non-negative number, got {noise_std}")
    if not action_low <= action_high:
        raise RecordingSourceError(f"action_low {action_low} exceeds action_high {action_high}")
    if not isinstance(truth, Mapping) or not truth:
        raise RecordingSourceError("truth must map design parameter names to values, e.g. "
                                   "{material.youngs_modulus: 20.0}")
    design = truth_design(simulator.design_space(), truth)
    rng = np.random.default_rng(seed)
    size = int(simulator.action_size)
    rollout = Rollout(simulator, controller=OpenLoopController(
        observation_size=0, action_size=size, control_steps=int(steps)),
        steps=int(steps), substeps=int(substeps), dt=float(dt))
    recordings = []
    for index in range(int(count)):
        actions = smooth_random_actions(rng, int(steps), size, knots=int(action_knots),
                                        low=float(action_low), high=float(action_high))
        states = rollout.forward(design, {"table": actions}, Objective(()),
                                 record=True).states
        clean = np.stack([np.asarray(measurement.observe(s, design), dtype=np.float64)
                          for s in states])
        noisy = clean + float(noise_std) * rng.standard_normal(clean.shape)
        recordings.append(Recording(actions, noisy, name=f"synthetic[{index}]"))
    return RecordingSet(recordings, truth={k: design[k] for k in truth})
