"""Joint-space springs: a linear spring across a revolute joint, like the counterbalance
spring of Baxter's shoulder (the paper's Eq. 31).

The spring runs between a point at distance ``lever_parent`` (l₁) from the joint on one side
and a point at ``lever_child`` (l₂) on the other. The angle between the two levers at joint
angle θ is γ = π - α₁ - α₂ - θ (α₁ = ``angle``, fixed by the mechanism; α₂ = ``offset``, the
one to calibrate), so the spring's length is x = √(l₁² + l₂² - 2 l₁ l₂ cos γ) and its
energy E = ½ k (x - x_rest)². The joint torque is τ = -dE/dθ = k (x - x_rest) l₁ l₂ sin γ / x,
the paper's Eq. 31 (with the law of cosines written out).

The torque is an explicit term added to the step's action and held over the step, taken at
the midpoint angle q + q̇ Δt/2 predicted from the step's start (:meth:`sim_pbd.simulator.
PBDSimulator.step`): held at q, a first-order error no substeps remove (a sprung pendulum
stepped 10 ms at a time ended 0.93 rad from the same 0.5 ms substeps stepped one at a time;
at the midpoint within 5e-3 rad, ``tests/test_springs.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["SPRING_KEYS", "Springs", "spring_torques", "spring_torques_vjp", "springs_from"]

SPRING_KEYS = {"joint": "joint name", "stiffness": "k [N/m]", "rest_length": "x_rest [m]",
               "lever_parent": "l₁ [m]", "lever_child": "l₂ [m]", "angle": "α₁ [rad]",
               "offset": "α₂ [rad]"}
"""The keys of one spring's mapping in the ``springs`` option, with what they hold."""


@dataclasses.dataclass(frozen=True, eq=False)
class Springs:
    """s springs, each across one revolute joint.

    Attributes:
        joint: index of each spring's joint, (s,) int64.
        stiffness: default k [N/m], (s,) (a design parameter).
        offset: default α₂ [rad], (s,) (a design parameter).
        rest_length: x_rest [m], (s,).
        lever_parent, lever_child: l₁, l₂ [m], (s,).
        angle: α₁ [rad], (s,).
    """

    joint: np.ndarray
    stiffness: np.ndarray
    offset: np.ndarray
    rest_length: np.ndarray
    lever_parent: np.ndarray
    lever_child: np.ndarray
    angle: np.ndarray

    @property
    def count(self) -> int:
        """s, the number of springs."""
        return len(self.joint)


def springs_from(entries: Sequence[Mapping], joint_names: Sequence[str],
                 revolute: Sequence[bool]) -> Springs:
    """:class:`Springs` from the ``springs`` option's mappings (keys :data:`SPRING_KEYS`),
    on the model's joints ``joint_names``; raise ValueError naming the spring and the key."""
    columns: dict[str, list] = {key: [] for key in SPRING_KEYS}
    for index, entry in enumerate(entries):
        where = f"springs[{index}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where} must be a mapping with keys {', '.join(SPRING_KEYS)}")
        missing = [key for key in SPRING_KEYS if key not in entry]
        unknown = [key for key in entry if key not in SPRING_KEYS]
        if missing or unknown:
            raise ValueError(f"{where}: missing {missing}, unknown {unknown}; a spring holds "
                             + ", ".join(f"{k} ({v})" for k, v in SPRING_KEYS.items()))
        name = entry["joint"]
        if name not in joint_names:
            raise ValueError(f"{where}.joint: unknown joint {name!r}; the model's joints are "
                             f"{list(joint_names)}")
        if not revolute[list(joint_names).index(name)]:
            raise ValueError(f"{where}.joint: {name!r} is not revolute; springs act across "
                             "revolute joints")
        columns["joint"].append(list(joint_names).index(name))
        for key in list(SPRING_KEYS)[1:]:
            value = entry[key]
            if not isinstance(value, (int, float)) or not np.isfinite(value):
                raise ValueError(f"{where}.{key} must be a finite number ({SPRING_KEYS[key]}), "
                                 f"got {value!r}")
            positive = key in ("rest_length", "lever_parent", "lever_child")
            if (positive and value <= 0) or (key == "stiffness" and value < 0):
                raise ValueError(f"{where}.{key} must be {'positive' if positive else '≥ 0'} "
                                 f"({SPRING_KEYS[key]}), got {value!r}")
            columns[key].append(float(value))
    arrays = {key: np.asarray(values, dtype=np.float64) for key, values in columns.items()}
    arrays["joint"] = np.asarray(columns["joint"], dtype=np.int64)
    return Springs(**arrays)


def _geometry(springs: Springs, joint_q, offset):
    theta = np.asarray(joint_q, dtype=np.float64)[springs.joint]
    gamma = np.pi - springs.angle - np.asarray(offset, dtype=np.float64) - theta
    l1, l2 = springs.lever_parent, springs.lever_child
    x = np.sqrt(l1**2 + l2**2 - 2.0 * l1 * l2 * np.cos(gamma))
    return gamma, l1 * l2, x


def spring_torques(springs: Springs, joint_q, stiffness, offset) -> np.ndarray:
    """Joint torques [N m] of the springs at joint positions ``joint_q`` (m,), with stiffness
    k [N/m] and offset α₂ [rad] per spring (s,): shape (m,), zero at joints without one."""
    gamma, l12, x = _geometry(springs, joint_q, offset)
    tau = np.zeros(np.shape(joint_q))
    np.add.at(tau, springs.joint, np.asarray(stiffness) * (x - springs.rest_length)
              * l12 * np.sin(gamma) / x)
    return tau


def spring_torques_vjp(springs: Springs, joint_q, stiffness, offset, g_tau):
    """(∂L/∂joint_q (m,), ∂L/∂stiffness (s,), ∂L/∂offset (s,)) of :func:`spring_torques`
    given ∂L/∂τ (m,)."""
    gamma, l12, x = _geometry(springs, joint_q, offset)
    k = np.asarray(stiffness, dtype=np.float64)
    g = np.asarray(g_tau, dtype=np.float64)[springs.joint]
    stretch, sin, cos = x - springs.rest_length, np.sin(gamma), np.cos(gamma)
    dx_dgamma = l12 * sin / x
    # τ = k (x - x_rest) l12 sin γ / x, through γ directly and through x(γ)
    dtau_dgamma = k * l12 * (dx_dgamma * sin / x
                             + stretch * (cos / x - sin * dx_dgamma / x**2))
    g_gamma = g * dtau_dgamma
    g_joint_q = np.zeros(np.shape(joint_q))
    np.add.at(g_joint_q, springs.joint, -g_gamma)  # γ = π - α₁ - α₂ - θ
    return g_joint_q, g * stretch * l12 * sin / x, -g_gamma
