"""The ``holding_poses`` recording source: a robot held still at static poses by measured
joint torques (the paper's Sec. V-C data), for identification runs.

A YAML identification run names it under ``identification.recordings``::

    identification:
      recordings:
        source: holding_poses
        options: {path: pbd_recordings/spring_poses.npz}   # relative to the YAML's folder
      measurement: {name: joints}

The file holds P poses of the simulator's joints and the torques that hold each still
(:func:`read_holding_poses`). Every pose becomes a recording of one control step: it starts
at rest at the pose (:func:`sim_pbd.torque_estimation.rest_state`), the torques are its
action, and its measurement (the ``joints`` observer: angles, then rates) stays at the pose
with zero rates. A design that explains the torques keeps the robot still; the loss is then
the paper's Eq. 26 over the poses (with equal weights on angles and rates). The starts are
the robot at the poses for the simulator's joint origins as built, so fit parameters that
leave the kinematics alone (spring stiffness and offset, masses, inertias, damping), not
``joint.origin``.

With ``torques: zero`` every recording's action starts at zero instead: the torques are
then the unknowns of an identification with ``identification.fit_actions: true`` (the
paper's gravity compensation, Sec. V-C, Table III), and the file's torques the reference
the report compares the fitted ones with (``holding_torques.png``,
:func:`sim_pbd.reports.holding_torque_report`). The set then says ``actions_unknown``, and
the core refuses to build such a run without ``fit_actions``: a design fitted to a robot
left to fall under gravity would be meaningless.
"""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np

from codesign.identification import Recording
from codesign.limits import MAX_RECORDINGS
from codesign.outputs import read_npz
from codesign.recordings import RecordingSet, RecordingSourceError, truth_design

from .model import JOINT_TYPES
from .reports import holding_report, holding_torque_report
from .torque_estimation import rest_state

__all__ = ["ANGLE_UNITS", "TORQUE_STARTS", "HoldingPoseSet", "HoldingPoses",
           "holding_pose_recordings", "joint_columns", "read_holding_poses"]

ANGLE_UNITS = {"rad": 1.0, "deg": np.pi / 180.0}
"""Joint-angle units a file may use -> radians per unit (prismatic joints are always m)."""

TORQUE_STARTS = ("file", "zero")
"""Where a recording's torques start: the file's (measured, fixed unless fitted) or zero
(unknowns of an action fit; the file's torques are then the reference)."""

_LARGEST_ANGLE = 2.0 * np.pi
"""Angles in radians beyond this [rad] are taken for degrees given without ``angle_unit``."""


class HoldingPoses(NamedTuple):
    """Static poses and the torques that hold them, in the simulator's joint order.

    Attributes:
        joint_q: joint positions [rad or m], shape (P, m).
        torques: holding torques [N m or N], shape (P, m).
        truth: ``design parameter -> value`` behind the data when the file knows it.
    """

    joint_q: np.ndarray
    torques: np.ndarray
    truth: dict[str, np.ndarray]


class HoldingPoseSet(RecordingSet):
    """The recordings of :func:`holding_pose_recordings` with the poses behind them, and the
    run's report (:func:`sim_pbd.reports.holding_report`: how still the fitted robot stays,
    the fitted springs' torque curves; with fitted torques
    :func:`sim_pbd.reports.holding_torque_report` too).

    Attributes:
        actions_unknown: whether the recordings' torques are zero placeholders for an
            identification that fits them (``torques: zero``).
    """

    def __init__(self, recordings, *, truth, simulator, poses: HoldingPoses, dt: float,
                 substeps: int, actions_unknown: bool = False):
        super().__init__(recordings, truth=truth)
        self.simulator, self.poses = simulator, poses
        self.dt, self.substeps = float(dt), int(substeps)
        self.actions_unknown = bool(actions_unknown)

    def report(self, folder: Path, context) -> dict:
        """Write ``spring_torque.png`` (with springs) and, when the run fitted the torques
        (``context.fitted_actions``), ``holding_torques.png`` into ``folder``; return the
        numbers (the fitted torques against the file's under ``torques``)."""
        count = len(self)
        fitted = context.fitted_actions
        torques = self.poses.torques[:count] if fitted is None else \
            np.array([table[0] for table in fitted])
        numbers = holding_report(folder, simulator=self.simulator,
                                 initial_design=context.initial_design, design=context.design,
                                 joint_q=self.poses.joint_q[:count], torques=torques,
                                 truth=self.truth, dt=self.dt, substeps=self.substeps,
                                 starts=[r.initial_state for r in self])
        if fitted is not None:
            numbers["torques"] = holding_torque_report(
                folder, joint_names=self.simulator.model.joint_names, estimated=torques,
                reference=self.poses.torques[:count])
        return numbers


def _read_csv(file: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(joint names, angles, torques) of a CSV with columns ``q.<joint>`` and
    ``tau.<joint>``, one row per pose."""
    with open(file, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(row for row in handle if not row.startswith("#")))
    if len(rows) < 2:
        raise RecordingSourceError(f"{str(file)!r} has no poses: it needs a header row of "
                                   "q.<joint> and tau.<joint> columns and one row per pose")
    header = [name.strip() for name in rows[0]]
    names = [h.removeprefix("q.") for h in header if h.startswith("q.")]
    missing = [f"tau.{n}" for n in names if f"tau.{n}" not in header]
    if not names or missing:
        raise RecordingSourceError(f"{str(file)!r}: the header needs a q.<joint> and a "
                                   f"tau.<joint> column for every joint; missing "
                                   f"{missing or ['q.<joint>']}")
    try:
        values = np.array([[float(cell) for cell in row] for row in rows[1:]])
    except ValueError as exc:
        raise RecordingSourceError(f"{str(file)!r}: a value is not a number ({exc})") from None
    if values.ndim != 2 or values.shape[1] != len(header):
        raise RecordingSourceError(f"{str(file)!r}: every row needs {len(header)} values, one "
                                   "per header column")
    column = {name: i for i, name in enumerate(header)}
    return (names, values[:, [column[f"q.{n}"] for n in names]],
            values[:, [column[f"tau.{n}"] for n in names]])


def _read_npz(file: Path) -> tuple[list[str], np.ndarray, np.ndarray, dict]:
    try:
        arrays = read_npz(file)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise RecordingSourceError(f"cannot read {str(file)!r} as .npz: {exc}") from None
    needed = ("joint_names", "joint_q", "torques")
    if any(name not in arrays for name in needed):
        raise RecordingSourceError(f"{str(file)!r} has arrays {sorted(arrays)}; it needs "
                                   "joint_names (m,), joint_q (P, m) and torques (P, m)")
    truth = {k.removeprefix("truth."): v for k, v in arrays.items() if k.startswith("truth.")}
    return ([str(n) for n in np.asarray(arrays["joint_names"]).reshape(-1)],
            np.asarray(arrays["joint_q"], dtype=np.float64),
            np.asarray(arrays["torques"], dtype=np.float64), truth)


def joint_columns(where: str, names, joint_names, arrays: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
    """``arrays`` (each (rows, len(names)), columns the joints ``names`` of a file) with
    their columns in ``joint_names`` order, or a RecordingSourceError (``where`` names the
    file) for joints missing, unknown or named twice, other shapes, NaN or inf."""
    names, expected = list(names), list(joint_names)
    for label, values in arrays.items():
        if values.ndim != 2 or values.shape[1] != len(names):
            raise RecordingSourceError(f"{where}: {label} has shape {values.shape}; it needs "
                                       f"(rows, {len(names)}), one column per named joint")
    if len({len(values) for values in arrays.values()}) > 1:
        raise RecordingSourceError(f"{where}: " + ", ".join(
            f"{label} {values.shape}" for label, values in arrays.items())
            + " must have one row per pose or sample each")
    if len(set(names)) != len(names):
        raise RecordingSourceError(f"{where} names a joint twice: {names}")
    missing = [n for n in expected if n not in names]
    extra = [n for n in names if n not in expected]
    if missing or extra:
        raise RecordingSourceError(f"{where} has joints {names}, the simulator {expected}: "
                                   f"missing {missing}, unknown {extra}; give one column per "
                                   "simulated joint")
    order = [names.index(n) for n in expected]
    ordered = {}
    for label, values in arrays.items():
        values = values[:, order]
        bad = np.argwhere(~np.isfinite(values))
        if bad.size:
            row, joint = bad[0]
            raise RecordingSourceError(f"{where}: {label} of row {row}, joint "
                                       f"{expected[joint]!r} is {values[row, joint]}; drop "
                                       "or fill that row")
        ordered[label] = values
    return ordered


def read_holding_poses(path: str | Path, *, joint_names, revolute, angle_unit: str = "rad"
                       ) -> HoldingPoses:
    """Poses and holding torques from ``path``, checked and put in ``joint_names`` order.

    The file is an ``.npz`` with ``joint_names`` (m,), ``joint_q`` (P, m) and ``torques``
    (P, m) (and optionally ``truth.<parameter>`` arrays), or a ``.csv`` with a column
    ``q.<joint>`` and ``tau.<joint>`` per joint and one row per pose (``#`` lines are
    comments). Angles are in ``angle_unit`` (``rad`` or ``deg``; prismatic positions in m),
    torques in N m (forces in N).

    Args:
        joint_names: the simulator's joints, in its order; the file must name each once.
        revolute: per joint of ``joint_names``, whether it is revolute (its angle is
            converted and checked).

    Raises:
        RecordingSourceError: a missing or unreadable file, joints missing or unknown,
            shapes that disagree, NaN or inf, angles beyond 2π rad given as radians.
    """
    file = Path(path)
    if angle_unit not in ANGLE_UNITS:
        raise RecordingSourceError(f"angle_unit {angle_unit!r} is not one of "
                                   f"{sorted(ANGLE_UNITS)}")
    if not file.is_file():
        raise RecordingSourceError(f"holding-pose file {str(file)!r} not found; check "
                                   "options.path (relative paths start at the experiment's "
                                   "folder)")
    if file.suffix.lower() == ".csv":
        names, joint_q, torques = _read_csv(file)
        truth = {}
    elif file.suffix.lower() == ".npz":
        names, joint_q, torques, truth = _read_npz(file)
    else:
        raise RecordingSourceError(f"{str(file)!r}: give a .npz or .csv file")
    where = f"holding-pose file {str(file)!r}"
    joint_q, torques = joint_columns(where, names, joint_names,
                                     {"joint_q": joint_q, "torques": torques}).values()
    revolute = np.asarray(revolute, dtype=bool)
    joint_q = np.where(revolute, joint_q * ANGLE_UNITS[angle_unit], joint_q)
    too_large = np.abs(joint_q[:, revolute]) > _LARGEST_ANGLE
    if np.any(too_large):
        raise RecordingSourceError(f"{where}: angles up to "
                                   f"{np.abs(joint_q[:, revolute]).max():.4g} rad, beyond 2π; "
                                   "if the file holds degrees set options.angle_unit: deg")
    return HoldingPoses(joint_q, torques, truth)


def holding_pose_recordings(*, simulator, measurement, dt: float, substeps: int,
                            base_dir: Path, path: str, angle_unit: str = "rad",
                            poses: int | None = None,
                            torques: Literal["file", "zero"] = "file",
                            truth: dict | None = None) -> RecordingSet:
    """One recording per static pose of the file ``path`` (the ``holding_poses`` source).

    Args:
        simulator: a :class:`~sim_pbd.simulator.PBDSimulator`; the file names its joints.
        measurement: the ``joints`` observer (angles then rates, 2m values).
        path: the ``.npz`` or ``.csv`` of :func:`read_holding_poses`, relative to
            ``base_dir`` (the experiment's folder).
        angle_unit: ``rad`` or ``deg``.
        poses: use the first ``poses`` poses only (a quick run); default all.
        torques: ``file``: each recording's action is the file's torque; ``zero``: zero,
            the starting guess of an identification that fits the torques
            (``identification.fit_actions: true``, which such a set requires: it says
            ``actions_unknown``), the file's torques then the report's reference.
        truth: the parameters behind the data, for the run's truth-against-recovered
            report; default the file's ``truth.<parameter>`` arrays.
        dt, substeps: the run's control step, for the report.
    """
    model = getattr(simulator, "model", None)
    if model is None or not hasattr(model, "joint_names"):
        raise RecordingSourceError("the holding_poses source needs the pbd simulator")
    if torques not in TORQUE_STARTS:
        raise RecordingSourceError(f"options.torques must be one of {list(TORQUE_STARTS)}, "
                                   f"got {torques!r}")
    m = model.joint_count
    if int(measurement.size) != 2 * m:
        raise RecordingSourceError(f"the measurement reads {measurement.size} values, the "
                                   f"holding poses give angles and rates of {m} joints "
                                   f"({2 * m}); set identification.measurement: {{name: "
                                   "joints}")
    file = Path(path) if Path(path).is_absolute() else Path(base_dir) / path
    revolute = model.joint_type == JOINT_TYPES.index("revolute")
    data = read_holding_poses(file, joint_names=model.joint_names, revolute=revolute,
                              angle_unit=angle_unit)
    count = len(data.joint_q) if poses is None else int(poses)
    if not 1 <= count <= min(len(data.joint_q), MAX_RECORDINGS):
        raise RecordingSourceError(f"options.poses must lie in 1 … "
                                   f"{min(len(data.joint_q), MAX_RECORDINGS)} (the file "
                                   f"holds {len(data.joint_q)} poses), got {poses}")
    design = simulator.design_space().defaults()
    recordings = []
    for index in range(count):
        pose = data.joint_q[index]
        still = np.concatenate([pose, np.zeros(m)])
        action = data.torques[index] if torques == "file" else np.zeros(m)
        recordings.append(Recording(action[None], np.stack([still, still]),
                                    name=f"{file.stem}[{index}]",
                                    initial_state=rest_state(simulator, design, pose)))
    known = truth if truth is not None else data.truth
    if known:
        fitted = truth_design(simulator.design_space(), known)
        known = {k: fitted[k] for k in known}
    return HoldingPoseSet(recordings, truth=known or None, simulator=simulator, poses=data,
                          dt=dt, substeps=substeps, actions_unknown=torques == "zero")
