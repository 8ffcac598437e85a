"""A recording's start: the vine at rest, given by its pin angles and one shared extension.

Every pose the model can start from is :meth:`VineModel.configuration` of the pin angles
and of the prismatic extensions, which a vine that grew by the model's growth mode shares
by the growth weights (equal for ``every_prismatic``, all at the tip for ``tip``). A vine
that everts (``growth: evert``) has one extension, its everted length beyond the model's
``length``: the bodies out at that length bend at their joints, the others lie straight
on the tip body. A :class:`StartPose` holds those ``n_pins + 1`` numbers;
:func:`start_pose_from_keypoints` fits them to one frame's keypoints, and the shooting fit
can refine them together with the model parameters
(:func:`sim_vine.fit.shooting.fit_shooting` with ``fit_start``).

:class:`StartPoses` and :class:`FixedStart` are the :class:`~codesign.tying.StartState` of a
:class:`~codesign.tying.TiedSimulator` that starts from fitted poses or a given state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from codesign import Parameter

from ..kinematics import centerline_vertices
from ..kinematics import keypoints as model_keypoints
from ..model import VineModel
from ..safety import check_start
from ..state import VineState

__all__ = ["StartPoseError", "StartPose", "start_pose_from_keypoints", "START_PARAMETERS",
           "StartPoses", "FixedStart", "can_fit_length"]


class StartPoseError(ValueError):
    """A frame cannot give a start pose (bad shape, or no keypoints)."""


@dataclasses.dataclass(frozen=True)
class StartPose:
    """A vine at rest.

    Attributes:
        angles: pin angles [rad], shape (n_pins,).
        extension: growth beyond the model's length [m], shared by the prismatic joints as
            the growth weights share a growth rate (a vine that everts: its everted length
            beyond the model's).
    """

    angles: np.ndarray
    extension: float

    def body_q(self, model: VineModel) -> np.ndarray:
        """Body poses (N, 3) [m, m, rad]."""
        return model.configuration(self.angles, _extension_weights(model) * self.extension)

    def body_q_vjp(self, model: VineModel, g_q) -> tuple[np.ndarray, float]:
        """``(∂L/∂angles (n_pins,), ∂L/∂extension)`` given ``∂L/∂body_q`` (N, 3)."""
        g_angles, g_ext = model.configuration_vjp(
            self.angles, _extension_weights(model) * self.extension, g_q)
        return g_angles, float(g_ext @ _extension_weights(model))


def _extension_weights(model: VineModel) -> np.ndarray:
    """How the model's extensions share a start pose's extension, shape (n_extensions,): by
    the growth weights, or all of it for a vine that everts."""
    return np.ones(1) if model.evert else model.growth_weights


def can_fit_length(model: VineModel) -> bool:
    """Whether a start pose of ``model`` has a length to fit (prismatic joints, or a vine
    that everts)."""
    return model.evert or model.prismatic_count > 0


def start_pose_from_keypoints(model: VineModel, points, *,
                              fit_length: bool = False) -> StartPose:
    """The start pose whose keypoints best match one frame's ``points``.

    A least-squares fit of the pin angles (and, with ``fit_length``, of the extension),
    started from the measured polyline's headings.

    Args:
        model: the vine model (base pose, body count and length).
        points: keypoints of one frame [m], shape (n, 2), base first.
        fit_length: also fit the extension; otherwise it is 0 (the model's length).
    """
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 2 or len(points) < 2:
        raise StartPoseError(f"keypoints of a frame must have shape (n >= 2, 2), got "
                             f"{points.shape}")
    if not np.all(np.isfinite(points)):
        raise StartPoseError("the frame used for the initial pose has no keypoints (NaN); the "
                             "first frame of a recording must show the vine: drop the frames "
                             "before it")
    n_pins = model.pin_count
    fit_length = fit_length and can_fit_length(model)
    measured = np.diff(points, axis=0)
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(measured, axis=1))])
    extension = _measured_extension(model, arc[-1]) if fit_length else 0.0
    # a vine that everts bends only at the joints out: the others stay straight (so the
    # pose is continuous in the length) and are not fitted
    bends = _everted_joints(model, extension) if model.evert else np.ones(n_pins, dtype=bool)

    def pose(x):
        angles = np.zeros(n_pins)
        angles[bends] = x[:np.count_nonzero(bends)]
        return StartPose(angles=angles, extension=float(x[-1]) if fit_length else 0.0)

    def residual(x):
        return (model_keypoints(model, pose(x).body_q(model), len(points)) - points).reshape(-1)

    # start from the measured headings at each pin's arc length on the straight vine
    headings = np.unwrap(np.arctan2(measured[:, 1], measured[:, 0]))
    straight = centerline_vertices(model, StartPose(np.zeros(n_pins), extension).body_q(model))
    pin_arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(straight, axis=0),
                                                              axis=1))])[:n_pins]
    absolute = np.interp(np.minimum(pin_arc, arc[-1]), 0.5 * (arc[1:] + arc[:-1]), headings)
    start = np.diff(np.concatenate([[model.base[2]], absolute]))[bends]
    x0 = np.concatenate([start, [extension]]) if fit_length else start
    import scipy.optimize  # on first use: half a second every run would pay at start-up

    # Levenberg-Marquardt needs at least as many residuals as unknowns
    method = "lm" if 2 * len(points) >= len(x0) else "trf"
    solution = scipy.optimize.least_squares(residual, x0, method=method, xtol=1e-12, ftol=1e-12)
    return pose(solution.x)


def _measured_extension(model: VineModel, measured_length: float) -> float:
    """The extension [m] a start from a frame whose keypoints span ``measured_length`` [m]
    begins at: 0 for prismatic models (their lengths are fitted from the model's), the
    measured length beyond the model's (within one body and ``max_length``) for a vine that
    everts, whose bodies out and bends depend on it."""
    if not model.evert:
        return 0.0
    return float(np.clip(measured_length, model.body_length, model.max_length) - model.length)


def _everted_joints(model: VineModel, extension: float) -> np.ndarray:
    """The joints of a vine that everts whose body is fully out with ``extension`` [m]
    beyond its length (the base joint always), shape (N,) bool."""
    offsets, _ = model.evert_schedule(model.length - model.body_length + extension)
    return offsets == 0.0


START_PARAMETERS = ("start.angles", "start.extension")
"""Design parameters :class:`StartPoses` adds: every recording's start pin angles [rad], shape
(recordings, n_pins), and extension [m], shape (recordings,)."""


def _step_zero(simulator, state: VineState) -> VineState:
    """A copy of ``state`` that ``simulator`` counts as step 0 in its error messages."""
    start = getattr(simulator, "start_from", None)  # a wrapper of the simulator has none
    return start(state) if start is not None else VineState(
        body_q=np.array(state.body_q, dtype=np.float64),
        body_qd=np.array(state.body_qd, dtype=np.float64))


class FixedStart:
    """A start at a given state, with no design parameters (its gradient is not needed).

    Args:
        simulator: the vine simulator that steps from it.
        state: the initial state.
    """

    parameters = ()

    def __init__(self, simulator, state: VineState):
        self.simulator, self.fixed = simulator, state
        check_start(simulator.model, state.body_q, what="the given start state")

    def state(self, design) -> VineState:
        """A copy of the given state."""
        return _step_zero(self.simulator, self.fixed)

    def state_vjp(self, design, g_state) -> dict:
        """No design gradient."""
        return {}


class StartPoses:
    """Every recording's start pose as design parameters (:data:`START_PARAMETERS`), one row
    per recording so that the recordings of one fit share a design space; the state is pose
    ``index`` at rest.

    Args:
        simulator: the vine simulator that steps from it.
        poses: the start poses' defaults, one per recording.
        index: which of ``poses`` this start is.
    """

    def __init__(self, simulator, poses: Sequence[StartPose], *, index: int = 0):
        poses = list(poses)
        if not 0 <= int(index) < len(poses):
            raise StartPoseError(f"start index {index} is not one of the {len(poses)} start "
                                 "poses")
        self.simulator, self.model, self.index = simulator, simulator.model, int(index)
        # scales: 2 mrad turns a 0.25 m vine's tip by 0.5 mm, about one frame's error
        for number, pose in enumerate(poses):  # the poses a fit starts from, not the model's
            check_start(self.model, pose.body_q(self.model), what=f"start pose {number}")
        angles = np.stack([np.asarray(p.angles, dtype=np.float64) for p in poses])
        self.parameters = (
            Parameter("start.angles", angles.shape, angles, unit="rad", scale=0.002,
                      entity="recording", doc="pin angles of the vine at rest at frame 0"),
            Parameter("start.extension", (len(poses),), [p.extension for p in poses],
                      unit="m", scale=0.001, entity="recording",
                      doc="growth beyond the model's length at frame 0"),
        )

    def pose(self, design) -> StartPose:
        """This start's pose in ``design``."""
        return StartPose(
            angles=np.asarray(design["start.angles"], dtype=np.float64)[self.index].copy(),
            extension=float(np.asarray(design["start.extension"])[self.index]))

    def state(self, design) -> VineState:
        """The vine at rest in :meth:`pose`."""
        q = self.pose(design).body_q(self.model)
        return _step_zero(self.simulator, VineState(body_q=q, body_qd=np.zeros_like(q)))

    def state_vjp(self, design, g_state) -> dict:
        """∂L/∂start.angles and ∂L/∂start.extension (zero but in this start's row)."""
        g_angles, g_extension = self.pose(design).body_q_vjp(self.model,
                                                             np.asarray(g_state.body_q))
        angles, extension = (np.zeros(p.shape) for p in self.parameters)
        angles[self.index], extension[self.index] = g_angles, g_extension
        return {"start.angles": angles, "start.extension": extension}
