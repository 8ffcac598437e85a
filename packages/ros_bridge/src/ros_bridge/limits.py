"""Joint limits of the controller: from the URDF, never looser than it.

The URDF's ``<limit effort velocity lower upper>`` of each joint is the ceiling; a
controller may be given lower effort and velocity limits and a narrower position range,
never wider ones (:func:`joint_limits` refuses, naming the joint). :func:`limit_torque`
clamps a command to the effort limit and its change per cycle to the rate limit;
:func:`bounds_violation` names a joint outside its position or velocity limits.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["JointLimits", "LimitError", "bounds_violation", "joint_limits", "limit_torque",
           "urdf_joint_limits"]


class LimitError(ValueError):
    """Limits that are missing, not physical, or looser than the robot's."""


@dataclasses.dataclass(frozen=True)
class JointLimits:
    """Per-joint limits, each shape (n,), in the controller's joint order.

    Attributes:
        effort: largest |τ| [N m].
        rate: largest change of τ from one control cycle to the next [N m per cycle].
        lower, upper: joint position range [rad] (±inf for a continuous joint).
        velocity: largest |q̇| [rad/s].
    """

    effort: np.ndarray
    rate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray


def urdf_joint_limits(urdf: str | Path, joints: Sequence[str]) -> dict[str, np.ndarray]:
    """``effort``, ``velocity``, ``lower``, ``upper`` of ``joints`` from a URDF file, (n,) each.

    Continuous joints get ±inf positions. Raises :class:`LimitError` for a joint the URDF
    lacks or one without an effort or velocity limit.
    """
    try:
        root = ElementTree.parse(urdf).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise LimitError(f"cannot read URDF {str(urdf)!r}: {exc}") from None
    # the robot's own joints only: a <transmission> names its joints in <joint> elements too
    found = {j.get("name"): j for j in root.findall("joint")}
    rows = {"effort": [], "velocity": [], "lower": [], "upper": []}
    for name in joints:
        joint = found.get(name)
        if joint is None:
            raise LimitError(f"URDF {str(urdf)!r} has no joint {name!r}; its joints: "
                             f"{sorted(found)}")
        limit = joint.find("limit")
        if limit is None or limit.get("effort") is None or limit.get("velocity") is None:
            raise LimitError(f"URDF joint {name!r} has no <limit effort= velocity=>; a torque "
                             "controller needs both")
        continuous = joint.get("type") == "continuous"
        rows["effort"].append(float(limit.get("effort")))
        rows["velocity"].append(float(limit.get("velocity")))
        rows["lower"].append(-np.inf if continuous else float(limit.get("lower", 0.0)))
        rows["upper"].append(np.inf if continuous else float(limit.get("upper", 0.0)))
    return {k: np.array(v) for k, v in rows.items()}


def _per_joint(name: str, value, count: int) -> np.ndarray:
    array = np.broadcast_to(np.asarray(value, dtype=np.float64), (count,)).copy()
    if np.any(np.isnan(array)):
        raise LimitError(f"{name} limits must be numbers, got {array}")
    return array


def joint_limits(urdf: str | Path, joints: Sequence[str], *, rate, effort=None,
                 velocity=None, lower=None, upper=None) -> JointLimits:
    """The controller's limits: the URDF's, tightened by any given (scalars broadcast).

    Args:
        rate: largest torque change per cycle [N m], > 0 (the URDF has none).
        effort, velocity, lower, upper: tighter limits; default the URDF's.

    Raises:
        LimitError: a given limit looser than the URDF's (naming the joint and both values),
            or a rate that is not positive.
    """
    joints = list(joints)
    robot = urdf_joint_limits(urdf, joints)
    n = len(joints)
    given = {"effort": effort, "velocity": velocity, "lower": lower, "upper": upper}
    values = {k: robot[k] if v is None else _per_joint(k, v, n) for k, v in given.items()}
    for name, looser in (("effort", values["effort"] > robot["effort"]),
                         ("velocity", values["velocity"] > robot["velocity"]),
                         ("lower", values["lower"] < robot["lower"]),
                         ("upper", values["upper"] > robot["upper"])):
        if np.any(looser):
            j = int(np.flatnonzero(looser)[0])
            raise LimitError(f"{name} limit {values[name][j]:g} of joint {joints[j]!r} is "
                             f"looser than the URDF's {robot[name][j]:g}; give a limit within "
                             "the robot's or leave it to the URDF")
    rate = _per_joint("rate", rate, n)
    if np.any(rate <= 0) or np.any(values["effort"] <= 0):
        raise LimitError("effort and rate limits must be positive")
    return JointLimits(rate=rate, **values)


def limit_torque(torque, previous, limits: JointLimits) -> np.ndarray:
    """``torque`` clamped to ±effort and to within ±rate of ``previous`` [N m], (n,)."""
    step = np.clip(np.asarray(torque, float) - previous, -limits.rate, limits.rate)
    return np.clip(previous + step, -limits.effort, limits.effort)


def bounds_violation(joint_q, joint_qd, limits: JointLimits,
                     joints: Sequence[str]) -> str | None:
    """Why the state is outside the limits (the first joint named), or ``None``."""
    q, qd = np.asarray(joint_q), np.asarray(joint_qd)
    for j, name in enumerate(joints):
        if not limits.lower[j] <= q[j] <= limits.upper[j]:
            return (f"joint {name!r} at {q[j]:.4g} rad is outside its range "
                    f"[{limits.lower[j]:.4g}, {limits.upper[j]:.4g}]")
        if abs(qd[j]) > limits.velocity[j]:
            return (f"joint {name!r} moves at {qd[j]:.4g} rad/s, beyond its limit "
                    f"{limits.velocity[j]:.4g}")
    return None
