"""A recording's start: the vine at rest, given by its pin angles and one shared extension.

Every pose the model can start from is :meth:`VineModel.configuration` of the pin angles
and of the prismatic extensions, which a vine that grew by the model's growth mode shares
by the growth weights (equal for ``every_prismatic``, all at the tip for ``tip``). A
:class:`StartPose` holds those ``n_pins + 1`` numbers; :func:`start_pose_from_keypoints`
fits them to one frame's keypoints, and the shooting fit can refine them together with the
model parameters (:func:`sim_vine.fitting.fit_shooting` with ``fit_start``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.optimize

from .kinematics import keypoints as model_keypoints
from .model import VineModel

__all__ = ["StartPoseError", "StartPose", "start_pose_from_keypoints", "pose_from_keypoints"]


class StartPoseError(ValueError):
    """A frame cannot give a start pose (bad shape, or no keypoints)."""


@dataclasses.dataclass(frozen=True)
class StartPose:
    """A vine at rest.

    Attributes:
        angles: pin angles [rad], shape (n_pins,).
        extension: growth beyond the model's length [m], shared by the prismatic joints as
            the growth weights share a growth rate.
    """

    angles: np.ndarray
    extension: float

    def body_q(self, model: VineModel) -> np.ndarray:
        """Body poses (N, 3) [m, m, rad]."""
        return model.configuration(self.angles, model.growth_weights * self.extension)

    def body_q_vjp(self, model: VineModel, g_q) -> tuple[np.ndarray, float]:
        """``(∂L/∂angles (n_pins,), ∂L/∂extension)`` given ``∂L/∂body_q`` (N, 3)."""
        g_angles, g_ext = model.configuration_vjp(
            self.angles, model.growth_weights * self.extension, g_q)
        return g_angles, float(g_ext @ model.growth_weights)


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
    fit_length = fit_length and model.prismatic_count > 0

    def pose(x):
        return StartPose(angles=x[:n_pins], extension=float(x[n_pins]) if fit_length else 0.0)

    def residual(x):
        return (model_keypoints(model, pose(x).body_q(model), len(points)) - points).reshape(-1)

    # start from the measured headings at each pin's arc length
    measured = np.diff(points, axis=0)
    headings = np.unwrap(np.arctan2(measured[:, 1], measured[:, 0]))
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(measured, axis=1))])
    pin_arc = np.minimum(np.arange(n_pins) * 2 * model.body_length, arc[-1])
    absolute = np.interp(pin_arc, 0.5 * (arc[1:] + arc[:-1]), headings)
    start = np.diff(np.concatenate([[model.base[2]], absolute]))
    x0 = np.concatenate([start, [0.0]]) if fit_length else start
    solution = scipy.optimize.least_squares(residual, x0, method="lm", xtol=1e-12, ftol=1e-12)
    return pose(solution.x)


def pose_from_keypoints(model: VineModel, points, *, fit_length: bool = False) -> np.ndarray:
    """Body poses (N, 3) of :func:`start_pose_from_keypoints`."""
    return start_pose_from_keypoints(model, points, fit_length=fit_length).body_q(model)
