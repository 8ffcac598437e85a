"""The ``rosbag`` recording source: identification data from rosbag2 files.

A YAML identification run names it under ``identification.recordings``::

    identification:
      recordings:
        source: rosbag
        options:
          path: arm_run.mcap              # or a bag folder, or a list of them (one recording each)
          joints: [left_s0, left_s1]      # matched by name in every JointState
          topics: {joint_states: /joint_states, commands: /effort_controller/commands}
          measure: [position]             # or [position, velocity]
      measurement: {name: state_fields, options: {fields: [joint_q]}}

Joint states are resampled on the run's control steps (``dt × substeps`` apart, from the
first time both joint states and commands exist, plus ``start``) by linear interpolation;
a step between two samples more than ``max_gap`` apart, or next to a NaN sample, is a NaN
row (missing, the fit skips it). The action of step k is the last command received at or
before its start (zero-order hold, as a robot applies it): a ``std_msgs/Float64MultiArray``
topic in the ``joints`` order (``topics.commands``), or without one the joint states' own
``effort`` field.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from codesign.identification import Recording
from codesign.limits import MAX_RECORDINGS
from codesign.recordings import RecordingSet, RecordingSourceError, truth_design

from .bags import BagError, JointTrajectory, read_float64_arrays, read_joint_states

__all__ = ["MEASURED_FIELDS", "TOPIC_ROLES", "resample_joint_states", "rosbag_recordings"]

TOPIC_ROLES = {"joint_states": "/joint_states", "commands": None}
"""The roles a bag's topics play (``topics`` option) and their default topic names."""

MEASURED_FIELDS = ("position", "velocity")
"""JointState fields a recording can measure, in the order the measurement lists them."""


def _held(times: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The last of ``values`` (rows at ``times``) at or before each of ``at``; a row stamped
    less than a thousandth of the rows' interval after one of ``at`` counts as at it (a
    robot's stamps carry round-off of a few hundred nanoseconds: missed, the step would
    hold the previous command for its whole length)."""
    slack = 1e-3 * float(np.median(np.diff(times))) if len(times) > 1 else 0.0
    return values[np.searchsorted(times, at + max(slack, 1e-12), side="right") - 1]


def resample_joint_states(trajectory: JointTrajectory, step_times: np.ndarray, *,
                          fields: Sequence[str], max_gap: float) -> np.ndarray:
    """Joint-state ``fields`` at ``step_times`` [s] by linear interpolation, shape
    (len(step_times), len(fields) × n): the fields one after another, joints in order.

    A step whose neighbouring samples are more than ``max_gap`` [s] apart, or hold NaN,
    is all NaN (missing). ``step_times`` lie within the trajectory's time span.
    """
    time = trajectory.time
    after = np.clip(np.searchsorted(time, step_times, side="left"), 1, len(time) - 1)
    gap = time[after] - time[after - 1]
    exact = np.isin(step_times, time)
    columns = []
    for field in fields:
        values = getattr(trajectory, field)
        columns += [np.interp(step_times, time, values[:, j]) for j in range(values.shape[1])]
    rows = np.stack(columns, axis=1)
    rows[(gap > max_gap) & ~exact] = np.nan
    rows[np.any(np.isnan(rows), axis=1)] = np.nan  # a half-measured row is not a measurement
    return rows


def _topics(topics: dict | None) -> dict:
    given = dict(topics or {})
    unknown = sorted(set(given) - set(TOPIC_ROLES))
    if unknown:
        raise RecordingSourceError(f"unknown topic role(s) {unknown} in options.topics; the "
                                   f"roles are {sorted(TOPIC_ROLES)}, e.g. {{joint_states: "
                                   "/joint_states, commands: /effort_controller/commands}")
    return TOPIC_ROLES | given


def _segments(recording: Recording, *, steps: int, fields, simulator) -> list[Recording]:
    """``recording`` cut into consecutive recordings of ``steps`` control steps (the last may
    be shorter), each starting from its measured joint state (the simulator's
    ``state_at_joints`` at its first row's positions and rates)."""
    n = recording.measurements.shape[1] // len(fields)
    position = fields.index("position") * n
    velocity = fields.index("velocity") * n
    design = simulator.design_space().defaults()
    segments = []
    for first in range(0, recording.steps, steps):
        row = recording.measurements[first]
        if np.any(np.isnan(row)):
            raise RecordingSourceError(
                f"{recording.name}: the joint state at control step {first} is missing, and a "
                "segment starts from its measured state; choose another options.segment or "
                "start, or record without gaps")
        last = min(first + steps, recording.steps)
        segments.append(Recording(
            recording.actions[first:last], recording.measurements[first:last + 1],
            name=f"{recording.name}[{first}:{last}]",
            initial_state=simulator.state_at_joints(design, row[position:position + n],
                                                    row[velocity:velocity + n])))
    return segments


def _compared(recording: Recording, *, fields, compare) -> Recording:
    """``recording`` with the columns of the ``fields`` not in ``compare`` NaN (missing)."""
    if list(compare) == list(fields):
        return recording
    n = recording.measurements.shape[1] // len(fields)
    measurements = recording.measurements.copy()
    for index, field in enumerate(fields):
        if field not in compare:
            measurements[:, index * n:(index + 1) * n] = np.nan
    return Recording(recording.actions, measurements, name=recording.name,
                     initial_state=recording.initial_state)


def _one_recording(file: Path, *, joints, topics, fields, stamps, step_interval, start,
                   duration, max_gap, action_size) -> Recording:
    where = f"bag {str(file)!r}"
    trajectory = read_joint_states(file, topics["joint_states"], joints, stamps=stamps)
    for field in fields:
        if np.all(np.isnan(getattr(trajectory, field))):
            raise RecordingSourceError(f"{where}: the joint states carry no {field}; remove "
                                       f"{field!r} from options.measure")
    if topics["commands"] is None:
        if action_size != len(joints):
            raise RecordingSourceError(
                f"the simulator takes {action_size} action(s) but options.joints lists "
                f"{len(joints)} joint(s) whose measured efforts would be the actions; list "
                "the actuated joints or give topics.commands")
        command_time, commands = trajectory.time, trajectory.effort
        if np.any(np.isnan(commands)):
            raise RecordingSourceError(f"{where}: joint states without effort cannot give "
                                       "the actions; give topics.commands")
    else:
        command_time, commands = read_float64_arrays(file, topics["commands"], action_size)
    first = max(trajectory.time[0], command_time[0]) + start
    last = trajectory.time[-1] if duration is None else first + duration
    if last > trajectory.time[-1] + 1e-9:
        raise RecordingSourceError(f"{where}: start + duration ends {last:.6g} s, after the "
                                   f"last joint state ({trajectory.time[-1]:.6g} s)")
    steps = int(np.floor((last - first) / step_interval + 1e-9))
    if steps < 1:
        raise RecordingSourceError(
            f"{where}: the joint states span {last - first:.6g} s from the first command, "
            f"less than one control step (dt × substeps = {step_interval:.6g} s)")
    step_times = first + step_interval * np.arange(steps + 1)
    gap = max_gap if max_gap is not None else 3.0 * float(np.median(np.diff(trajectory.time)))
    measurements = resample_joint_states(trajectory, step_times, fields=fields, max_gap=gap)
    actions = _held(command_time, commands, step_times[:-1])
    try:
        return Recording(actions, measurements, name=file.name)
    except ValueError as exc:
        raise RecordingSourceError(f"{where}: {exc}") from None


def rosbag_recordings(
    *,
    simulator,
    measurement,
    dt: float,
    substeps: int,
    base_dir: Path,
    path: str | list[str],
    joints: list[str],
    topics: dict | None = None,
    measure: list[str] | None = None,
    stamps: str = "header",
    start: float = 0.0,
    duration: float | None = None,
    max_gap: float | None = None,
    segment: float | None = None,
    compare: list[str] | None = None,
    truth: dict | None = None,
) -> RecordingSet:
    """Recordings from rosbag2 bags (the ``rosbag`` source), one per bag.

    Args:
        simulator, measurement, dt, substeps, base_dir: supplied by the run; the measurement
            must read ``len(measure) × len(joints)`` values (e.g. the ``state_fields``
            observer of the joint positions).
        path: a bag folder or ``.mcap``/``.db3`` file, or a list of them; relative to
            ``base_dir``.
        joints: the joint names, in the order of the simulator's joints and actions.
        topics: ``{joint_states: ..., commands: ...}``; defaults ``/joint_states`` and none
            (actions from the joint states' effort field).
        measure: JointState fields measured, from ``position`` and ``velocity``; default
            ``[position]``.
        stamps: ``header`` (joint states' own stamps) or ``bag`` (receive times; commands
            always use receive times, so ``header`` stamps must share the bag's clock).
        start: seconds skipped after the first joint state and command, ≥ 0.
        duration: seconds used [s]; default up to the last joint state.
        max_gap: longest gap between joint states [s] bridged by interpolation; default
            three times their median interval.
        segment: cut each bag's span into recordings of this many seconds (whole control
            steps), each starting from its measured joint state (multiple shooting: a
            chaotic or mismodelled motion is compared over short horizons only). Needs
            ``measure: [position, velocity]`` and a simulator with ``state_at_joints(design,
            joint_q, joint_qd)`` (sim_pbd's); the starts do not depend on the fitted design.
        compare: the measured fields the fit compares, default all of ``measure``; the
            others are NaN in the recordings (missing values, which the loss skips) once
            they have started the segments. ``[position]`` when the velocities are the less
            faithful signal: a robot's differentiated encoders, or a simulator whose rates
            converge more slowly than its angles (sim_pbd's at 100 substeps, see the
            ros_bridge README's Baxter demo).
        truth: the parameters behind the data when known (a simulated robot), for the run's
            truth-against-recovered report; not used by the fit.
    """
    paths = [path] if isinstance(path, str) else list(path)
    if not paths or len(paths) > MAX_RECORDINGS:
        raise RecordingSourceError(f"options.path must name 1 to {MAX_RECORDINGS} bag(s)")
    joints = list(joints)
    if not joints or len(set(joints)) != len(joints):
        raise RecordingSourceError(f"options.joints must list distinct joint names, got "
                                   f"{joints}")
    fields = list(measure or ["position"])
    if not fields or any(f not in MEASURED_FIELDS for f in fields) or \
            len(set(fields)) != len(fields):
        raise RecordingSourceError(f"options.measure must list distinct fields from "
                                   f"{list(MEASURED_FIELDS)}, got {fields}")
    if int(measurement.size) != len(fields) * len(joints):
        raise RecordingSourceError(
            f"the measurement reads {measurement.size} value(s) but the bag gives "
            f"{len(fields)} field(s) {fields} of {len(joints)} joint(s) = "
            f"{len(fields) * len(joints)}; measure the same joints and fields (e.g. "
            "state_fields of the joint positions)")
    compared = fields if compare is None else list(compare)
    if not compared or any(f not in fields for f in compared):
        raise RecordingSourceError(f"options.compare must list fields of options.measure "
                                   f"{fields}, got {compared}")
    if not (np.isfinite(start) and start >= 0):
        raise RecordingSourceError(f"options.start must be a number of seconds >= 0, got "
                                   f"{start!r}")
    for name, value in (("duration", duration), ("max_gap", max_gap), ("segment", segment)):
        if value is not None and not (np.isfinite(value) and value > 0):
            raise RecordingSourceError(f"options.{name} must be a positive number of seconds, "
                                       f"got {value!r}")
    step_interval = float(dt) * int(substeps)  # a control step: where the fit compares
    segment_steps = None
    if segment is not None:
        if sorted(fields) != sorted(MEASURED_FIELDS):
            raise RecordingSourceError("options.segment starts each segment from its measured "
                                       "positions and velocities: set options.measure: "
                                       "[position, velocity]")
        if not callable(getattr(simulator, "state_at_joints", None)):
            raise RecordingSourceError("options.segment needs a simulator that can start at "
                                       "measured joint positions and rates (state_at_joints, "
                                       "e.g. sim_pbd's pbd); remove options.segment")
        segment_steps = int(np.floor(segment / step_interval + 1e-9))
        if segment_steps < 1:
            raise RecordingSourceError(f"options.segment {segment} s is shorter than one "
                                       f"control step (dt × substeps = {step_interval:.6g} s)")
    recordings = []
    for item in paths:
        file = Path(item) if Path(item).is_absolute() else Path(base_dir) / item
        try:
            recording = _one_recording(
                file, joints=joints, topics=_topics(topics), fields=fields, stamps=stamps,
                step_interval=step_interval, start=float(start), duration=duration,
                max_gap=max_gap, action_size=int(simulator.action_size))
        except BagError as exc:
            raise RecordingSourceError(str(exc)) from None
        recordings += [recording] if segment_steps is None else _segments(
            recording, steps=segment_steps, fields=fields, simulator=simulator)
    recordings = [_compared(r, fields=fields, compare=compared) for r in recordings]
    if len(recordings) > MAX_RECORDINGS:
        raise RecordingSourceError(f"{len(recordings)} recordings, more than "
                                   f"{MAX_RECORDINGS}; use longer options.segment or a "
                                   "shorter duration")
    known = None
    if truth:
        design = truth_design(simulator.design_space(), truth)
        known = {k: design[k] for k in truth}
    return RecordingSet(recordings, truth=known)
