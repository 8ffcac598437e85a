"""Known contacts for the joint estimation: which pairs touch at which step, and where.

The paper's estimation (Jitosho et al. 2023, Section III) knows from the video which bodies
touch an obstacle at each step and constrains their distance to zero there.
:func:`detect_contacts` derives that schedule from a sequence of poses (poses fitted to
video keypoints, or a simulated trajectory); :func:`local_surface` gives the obstacle's
surface near a contact point as a plane or a circle, the shape the estimation's contact
row keeps the point on.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..model import VineModel
from ..obstacles import Obstacle, signed_distance

__all__ = ["ContactScheduleError", "LocalSurface", "detect_contacts", "update_contacts",
           "local_surface"]


class ContactScheduleError(ValueError):
    """Poses or contact modes have the wrong shape."""


def detect_contacts(model: VineModel, body_q, *, tolerance: float = 1e-3) -> np.ndarray:
    """Contact modes per step from a sequence of poses.

    Step k is in contact at a pair (contact point, obstacle; pairs ordered point-major as
    the simulator's contact rows) when the point lies within ``tolerance`` of the obstacle
    at pose k + 1 (the pose the step's contact row constrains). The mode's sign is the
    friction cone edge ``N + mode μ T`` the impulse lies on: friction opposes the point's
    tangential slip from pose k to k + 1, so a point slipping along +T has mode −1.

    Args:
        model: the vine model with its obstacles.
        body_q: poses [m, m, rad], shape (K + 1, N, 3).
        tolerance: contact distance [m].

    Returns:
        Modes in {−1, 0, +1}, shape (K, contact points × obstacles).
    """
    body_q = np.asarray(body_q, dtype=np.float64)
    if body_q.ndim != 3 or body_q.shape[1:] != (model.body_count, 3) or len(body_q) < 2:
        raise ContactScheduleError(f"poses must have shape (steps + 1 >= 2, {model.body_count}, "
                                   f"3), got {body_q.shape}")
    modes = np.zeros((len(body_q) - 1, model.contact_count * len(model.obstacles)),
                     dtype=np.int64)
    for k in range(len(body_q) - 1):
        moved = model.contact_positions(body_q[k + 1]) - model.contact_positions(body_q[k])
        phi, normal, _ = model.obstacle_distances(body_q[k + 1])
        slip = moved[:, None, 0] * -normal[..., 1] + moved[:, None, 1] * normal[..., 0]  # T·Δp
        modes[k] = np.where(phi < tolerance, np.where(slip > 0, -1, 1), 0).reshape(-1)
    return modes


def update_contacts(model: VineModel, modes, body_q, impulse, *, release: float,
                    penetration: float = 1e-5) -> np.ndarray:
    """One active-set update of a contact schedule from the trajectory it produced.

    The simulator's step keeps a contact row when its impulse pushes and adds one that
    would be violated; this applies the same test to an estimated trajectory: a scheduled
    contact whose impulse stayed at its bound (≤ ``release``) is dropped (the point left
    the surface, as in a small bounce that poses alone cannot see), and a free pair whose
    point ends the step more than ``penetration`` inside an obstacle is added. Modes take
    the cone edge of the trajectory's slip (see :func:`detect_contacts`).

    Args:
        model: the vine model with its obstacles.
        modes: the schedule that was used, shape (K, pairs), values in {−1, 0, +1}.
        body_q: the estimated poses [m, m, rad], shape (K + 1, N, 3).
        impulse: the scheduled contacts' normal impulses [N s], shape (K, pairs); NaN where
            a scheduled contact has no impulse variable (it is kept).
        release: largest impulse [N s] that counts as no push.
        penetration: depth [m] beyond which a free pair is added.

    Returns:
        The updated modes, shape (K, pairs).
    """
    modes = np.asarray(modes, dtype=np.int64)
    body_q = np.asarray(body_q, dtype=np.float64)
    impulse = np.asarray(impulse, dtype=np.float64)
    if body_q.shape[0] != modes.shape[0] + 1 or impulse.shape != modes.shape:
        raise ContactScheduleError(
            f"modes {modes.shape}, poses {body_q.shape} and impulses {impulse.shape} do not "
            "match: K steps need K + 1 poses and (K, pairs) modes and impulses")
    scheduled = modes != 0
    drop = scheduled & (impulse <= release)  # NaN compares False: kept
    phi = np.stack([model.obstacle_distances(q)[0].reshape(-1) for q in body_q[1:]])
    add = ~scheduled & (phi < -penetration)
    edges = detect_contacts(model, body_q, tolerance=np.inf)
    return np.where((scheduled & ~drop) | add, edges, 0)


@dataclasses.dataclass(frozen=True)
class LocalSurface:
    """An obstacle's surface near a point: a plane (``radius`` None) or a circle.

    Plane: ``Φ(p) = normal·(p − anchor)``; circle: ``Φ(p) = |p − anchor| − radius``
    (a circle obstacle, or the rounded corner of a polygon or a wall's end) [m].
    """

    anchor: np.ndarray
    normal: np.ndarray
    radius: float | None


def local_surface(obstacle: Obstacle, point) -> LocalSurface:
    """The feature of ``obstacle`` nearest ``point`` [m] (2,), from its signed distance.

    The distance's Hessian tells the two apart: zero beside a face (a constant normal), and
    ``(I − N Nᵀ)/ρ`` around a corner or a circle, whose trace 1/ρ gives the distance ρ from
    the centre.
    """
    point = np.asarray(point, dtype=np.float64).reshape(2)
    phi, normal, hessian = (a[0] for a in signed_distance(obstacle, point[None]))
    curvature = float(np.trace(hessian))
    if curvature == 0.0:
        return LocalSurface(anchor=point - phi * normal, normal=normal, radius=None)
    rho = 1.0 / curvature
    return LocalSurface(anchor=point - rho * normal, normal=normal, radius=rho - phi)
