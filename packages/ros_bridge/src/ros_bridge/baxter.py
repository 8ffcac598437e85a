"""Baxter's left arm in Pinocchio: the fake robot's reference dynamics.

Deliberately not one of codesign's simulators: the fake robot must be an independent truth
for identification and control. The arm is Pinocchio's model of Baxter's URDF reduced to the
seven left-arm joints (every other joint locked at zero), with "true" parameters that differ
from the URDF's nominal ones (:class:`BaxterTruth`): each link's mass scaled (centre of mass
and inertia about it kept), joint viscous damping, and a counterbalance spring across
``left_s1`` (the paper's Eq. 31, :class:`ShoulderSpring`). The equations of motion are

    M(q) q̈ + C(q, q̇) q̇ + g(q) = τ + τ_spring(q) − b q̇

solved by Pinocchio's articulated-body algorithm and integrated by classical RK4
(:func:`codesign.testing.rk4_step`).

Pinocchio (the ``pin`` wheel) is optional: ``pip install 'ros_bridge[fake-baxter]'``;
:func:`require_pinocchio` names that extra when it is missing.
"""

from __future__ import annotations

import dataclasses
import functools
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from codesign.testing import rk4_step

__all__ = ["LEFT_ARM", "NOMINAL_SPRING", "TRUE_BAXTER", "BaxterArm", "BaxterTruth",
           "ShoulderSpring", "baxter_urdf", "full_model", "require_pinocchio", "reduced_model"]

LEFT_ARM = ("left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2")
"""Baxter's left-arm joints, shoulder to wrist."""


def require_pinocchio():
    """The ``pinocchio`` module, or an ImportError naming the extra that installs it."""
    try:
        import pinocchio
    except ImportError as exc:
        raise ImportError(
            "the Baxter fake robot needs Pinocchio (the `pin` wheel), which is not installed "
            f"here ({exc}); install the extra: pip install 'ros_bridge[fake-baxter]' (or "
            "`uv sync --package ros_bridge --extra fake-baxter`)") from None
    return pinocchio


def baxter_urdf() -> Path:
    """Baxter's URDF (the copy bundled with sim_pbd, package data only: no simulator is
    used)."""
    from sim_pbd.scene import urdf_path

    return urdf_path("baxter")


def full_model(urdf):
    """Pinocchio's model of the whole robot in ``urdf`` (path). Its reduced-model builder
    refuses fixed joints named like a link (Baxter's ``left_hand``, ...), so those are renamed
    ``<name>_joint`` first."""
    pin = require_pinocchio()
    root = ET.parse(urdf).getroot()
    link_names = {element.get("name") for element in root.findall("link")}
    for element in root.findall("joint"):
        if element.get("name") in link_names:
            element.set("name", element.get("name") + "_joint")
    return pin.buildModelFromXML(ET.tostring(root, encoding="unicode"))


def reduced_model(urdf, joints, frozen: dict[str, float] | None = None):
    """Pinocchio's model of the robot in ``urdf`` (path) reduced to ``joints`` (names); every
    other joint is locked at its position in ``frozen`` [rad] (default 0)."""
    pin = require_pinocchio()
    full = full_model(urdf)
    unknown = [name for name in joints if not full.existJointName(name)]
    if unknown:
        raise ValueError(f"joints {unknown} are not in {urdf}; its joints are "
                         f"{list(full.names[1:])}")
    q = pin.neutral(full)
    for name, value in (frozen or {}).items():
        q[full.joints[full.getJointId(name)].idx_q] = value
    locked = [full.getJointId(name) for name in full.names[1:] if name not in joints]
    return pin.buildReducedModel(full, locked, q)


@dataclasses.dataclass(frozen=True)
class ShoulderSpring:
    """A linear spring across a revolute joint between levers l₁ and l₂ (the paper's Eq. 31,
    Baxter's shoulder counterbalance): at joint angle θ the levers make the angle
    γ = π − α₁ − α₂ − θ, the spring's length is x = √(l₁² + l₂² − 2 l₁ l₂ cos γ) and it
    pushes the joint with τ = k (x − x_rest) l₁ l₂ sin γ / x.

    Attributes:
        joint: the joint's name.
        stiffness: k [N/m].
        offset: α₂ [rad] (the one to calibrate).
        rest_length: x_rest [m].
        lever_parent, lever_child: l₁, l₂ [m].
        angle: α₁ [rad] (fixed by the mechanism).
    """

    joint: str = "left_s1"
    stiffness: float = 2000.0
    offset: float = 0.25
    rest_length: float = 0.2
    lever_parent: float = 0.35
    lever_child: float = 0.08
    angle: float = 3.9

    def torque(self, angle: float) -> float:
        """The spring's torque [N m] at joint angle ``angle`` [rad]: Eq. 31 as sim_pbd
        (:func:`sim_pbd.springs.spring_torques`, the same extra) computes it."""
        from sim_pbd.springs import spring_torques

        return float(spring_torques(self._springs, np.array([float(angle)]),
                                    [self.stiffness], [self.offset])[0])

    @functools.cached_property
    def _springs(self):
        from sim_pbd.springs import springs_from

        return springs_from([{k: getattr(self, k) for k in (
            "joint", "stiffness", "rest_length", "lever_parent", "lever_child", "angle",
            "offset")}], [self.joint], [True])


NOMINAL_SPRING = ShoulderSpring()
"""The spring as the nominal model has it (sim_pbd's spring example: x_rest = 0.2 m is the
paper's, the levers and α₁ chosen so that the spring takes 20 to 25 N m of the arm's s1
gravity torque)."""


@dataclasses.dataclass(frozen=True)
class BaxterTruth:
    """The fake Baxter's true parameters, in :data:`LEFT_ARM` order.

    Attributes:
        mass_scale: each link's mass over the URDF's, (7,) (centre of mass and inertia about
            it unchanged).
        damping: joint viscous damping b [N m s/rad], (7,).
        spring: the counterbalance spring (its joint among :data:`LEFT_ARM`), or ``None``.
    """

    mass_scale: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(7))
    damping: np.ndarray = dataclasses.field(default_factory=lambda: np.full(7, 0.7))
    spring: ShoulderSpring | None = NOMINAL_SPRING

    def __post_init__(self):
        for name in ("mass_scale", "damping"):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if value.shape != (len(LEFT_ARM),) or not np.all(np.isfinite(value)):
                raise ValueError(f"Baxter {name} must be {len(LEFT_ARM)} finite numbers "
                                 f"({', '.join(LEFT_ARM)}), got {value}")
            object.__setattr__(self, name, value)
        if np.any(self.mass_scale <= 0) or np.any(self.damping < 0):
            raise ValueError(f"mass_scale must be positive and damping >= 0, got "
                             f"{self.mass_scale} and {self.damping}")
        if self.spring is not None and self.spring.joint not in LEFT_ARM:
            raise ValueError(f"the spring's joint {self.spring.joint!r} is not one of "
                             f"{LEFT_ARM}")


TRUE_BAXTER = BaxterTruth(
    mass_scale=np.array([1.0, 0.90, 1.08, 0.92, 1.12, 0.90, 1.15]),
    damping=np.array([1.0, 1.2, 0.5, 0.9, 0.4, 0.6, 0.3]),
    spring=dataclasses.replace(NOMINAL_SPRING, stiffness=2400.0, offset=0.32))
"""The fake robot's default truth: the masses of links s1 to w2 off by 8 to 15 %, damping 0.3
to 1.2 N m s/rad (the URDF says 0.7), the spring 20 % stiffer and its offset 0.07 rad from
the nominal. s0's link mass is the URDF's: s0 turns about the vertical with its link's centre
of mass 18 mm from the axis, so joint data cannot determine that mass, and a perturbation
there would test only how the fit holds it."""


class BaxterArm:
    """The left arm's dynamics with ``truth``: forward dynamics and RK4 steps.

    Args:
        truth: the true parameters.
        urdf: the robot's URDF (default :func:`baxter_urdf`).
    """

    def __init__(self, truth: BaxterTruth = TRUE_BAXTER, *, urdf=None):
        self.pin = require_pinocchio()
        self.truth = truth
        self.joints = LEFT_ARM
        self.model = reduced_model(baxter_urdf() if urdf is None else urdf, LEFT_ARM)
        for index, scale in enumerate(truth.mass_scale, start=1):
            inertia = self.model.inertias[index]
            self.model.inertias[index] = self.pin.Inertia(
                inertia.mass * scale, inertia.lever.copy(), inertia.inertia.copy())
        self.data = self.model.createData()
        self.spring_joint = None if truth.spring is None else LEFT_ARM.index(truth.spring.joint)

    @property
    def link_mass(self) -> np.ndarray:
        """The true link masses [kg], (7,)."""
        return np.array([self.model.inertias[i].mass for i in range(1, len(LEFT_ARM) + 1)])

    def passive_torque(self, joint_q, joint_qd) -> np.ndarray:
        """Spring plus damping torque [N m], (7,), at angles and rates (7,)."""
        torque = -self.truth.damping * np.asarray(joint_qd, dtype=np.float64)
        if self.spring_joint is not None:
            torque[self.spring_joint] += self.truth.spring.torque(joint_q[self.spring_joint])
        return torque

    def forward_dynamics(self, joint_q, joint_qd, torque) -> np.ndarray:
        """Joint accelerations q̈ [rad/s²], (7,), under joint ``torque`` [N m], (7,)."""
        q, qd = np.asarray(joint_q, dtype=np.float64), np.asarray(joint_qd, dtype=np.float64)
        total = np.asarray(torque, dtype=np.float64) + self.passive_torque(q, qd)
        return np.array(self.pin.aba(self.model, self.data, q, qd, total))

    def step(self, joint_q, joint_qd, torque, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """(q, q̇) after ``dt`` [s] of constant ``torque`` [N m] (one RK4 step)."""
        return rk4_step(np.asarray(joint_q, dtype=np.float64),
                        np.asarray(joint_qd, dtype=np.float64),
                        lambda q, qd: self.forward_dynamics(q, qd, torque), dt)

    def rest_pose(self, guess, *, tolerance: float = 1e-10, iterations: int = 50
                  ) -> np.ndarray:
        """The pose [rad], (7,), near ``guess`` where the arm rests without motor torque
        (g(q) equals the spring's torque), by Gauss-Newton on the torque balance with a
        finite-difference Jacobian; joints gravity cannot turn keep their guessed angle (the
        least-norm step). Raises ValueError if the balance is not found."""
        q = np.array(guess, dtype=np.float64)

        def imbalance(q_):
            return self.gravity(q_) - self.passive_torque(q_, np.zeros(len(LEFT_ARM)))

        for _ in range(iterations):
            residual = imbalance(q)
            if np.max(np.abs(residual)) < tolerance:
                return q
            jacobian = np.stack([(imbalance(q + 1e-7 * e) - residual) / 1e-7
                                 for e in np.eye(len(LEFT_ARM))], axis=1)
            step = np.linalg.lstsq(jacobian, -residual, rcond=1e-8)[0]
            q = q + np.clip(step, -0.2, 0.2)  # a bounded step stays near the guessed pose
        raise ValueError(f"no rest pose found near {guess} (torque imbalance "
                         f"{np.max(np.abs(imbalance(q))):.3g} N m after {iterations} "
                         "iterations); guess a pose closer to where the arm hangs")

    def gravity(self, joint_q) -> np.ndarray:
        """g(q) [N m], (7,): the torque gravity needs from the joints at rest."""
        return np.array(self.pin.computeGeneralizedGravity(
            self.model, self.data, np.asarray(joint_q, dtype=np.float64)))
