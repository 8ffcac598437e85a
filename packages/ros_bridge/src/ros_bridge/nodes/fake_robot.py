"""``fake_robot``: a stand-in for hardware with "true" parameters that differ from the nominal
model, its dynamics from a reference rigid-body model (not one of codesign's simulators).

``robot``: ``two_link`` (default; the closed-form arm of :mod:`ros_bridge.arm`, RK4) or
``baxter`` (Baxter's left arm in Pinocchio, :mod:`ros_bridge.baxter`, RK4; needs the
``fake-baxter`` extra). Each tick of 1/``rate`` s the robot publishes its state as
``sensor_msgs/JointState`` on /joint_states (Gaussian ``noise`` [rad, rad/s], published
``delay`` [s] later, stamped with the time it was sampled), its ``effort`` the motor torque
applied from that instant, then integrates ``substeps`` RK4 steps under it. The motor torque
is the latest effort command (``/<controller>/commands``, ``std_msgs/Float64MultiArray`` in
the ``joints`` order, held as ros2_control's forwarder holds it) plus a known sine
excitation; external torque pulses act too but are no motor torque (not in ``effort``).

The robot's time starts at zero when it starts, or with ``brake`` when the first command
arrives (until then it is held at ``initial_q``, as a robot in position mode holds its pose);
the excitation and pulses are scheduled in it.

Parameters: ``robot``, ``joints``, ``rate``, ``substeps``, ``noise``, ``delay``, ``seed``,
``controller``, ``initial_q`` (with ``rest_pose`` true, the Baxter arm starts at rest where
it hangs near ``initial_q``), ``brake``; the excitation ``excitation_amplitude`` [N m],
``excitation_frequency`` [Hz] (one per joint; empty: none), ``excitation_start`` [s],
``excitation_hold`` [s]; the pulses ``pulse_joint`` (names), ``pulse_torque`` [N m],
``pulse_start``, ``pulse_end`` [s] (one each per pulse). The truth: for ``two_link``
``length``, ``mass``, ``com``, ``inertia``, ``damping``, ``spring`` (two values each,
defaults :data:`TRUE_ARM`); for ``baxter`` ``mass_scale``, ``damping`` (seven each),
``spring_stiffness`` [N/m] and ``spring_offset`` [rad] (defaults
:data:`ros_bridge.baxter.TRUE_BAXTER`).
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
from rclpy.node import Node
from rclpy.parameter import Parameter

from ..arm import ArmParameters, rk4_step
from ..messages import (
    FLOAT64_ARRAY,
    JOINT_STATE,
    MessageError,
    float64_array_values,
    joint_state_message,
)
from ..rclpy_adapter import from_rclpy, rclpy_class, to_rclpy
from ..torque_schedule import SineExcitation, TorquePulse, pulse_torques
from ._params import array_parameter, optional_parameter
from ._spin import run_node

__all__ = ["ROBOTS", "TRUE_ARM", "FakeRobotNode", "main"]

TRUE_ARM = ArmParameters(mass=np.array([2.3, 0.85]), damping=np.array([0.25, 0.15]),
                         spring=np.array([1.5, 0.0]))
"""The two-link fake robot's default truth: the nominal :class:`~ros_bridge.arm.ArmParameters`
with perturbed masses, joint damping and a shoulder spring."""

ROBOTS = ("two_link", "baxter")
"""The fake robots: the closed-form two-link arm, Baxter's left arm in Pinocchio."""


def _two_link(node: Node):
    """(joints, step(q, q̇, τ, dt), initial guess) of the two-link arm from the parameters."""
    arm = ArmParameters(**{f.name: array_parameter(node, f.name, getattr(TRUE_ARM, f.name))
                           for f in dataclasses.fields(ArmParameters)})
    return (["shoulder", "elbow"], lambda q, qd, tau, dt: rk4_step(arm, q, qd, tau, dt),
            [0.0, 0.0], None)


def _baxter(node: Node):
    """(joints, step, initial guess, rest pose finder) of Baxter's left arm."""
    from ..baxter import LEFT_ARM, TRUE_BAXTER, BaxterArm, BaxterTruth

    spring = dataclasses.replace(
        TRUE_BAXTER.spring,
        stiffness=float(node.declare_parameter("spring_stiffness",
                                               TRUE_BAXTER.spring.stiffness).value),
        offset=float(node.declare_parameter("spring_offset", TRUE_BAXTER.spring.offset).value))
    arm = BaxterArm(BaxterTruth(
        mass_scale=array_parameter(node, "mass_scale", TRUE_BAXTER.mass_scale),
        damping=array_parameter(node, "damping", TRUE_BAXTER.damping), spring=spring))
    return list(LEFT_ARM), arm.step, [0.0, 0.55, 0.0, 1.0, 0.0, 0.0, 0.0], arm.rest_pose


class FakeRobotNode(Node):
    """The fake robot; ``joint_q``/``joint_qd`` hold its true state, ``time`` its time since
    its release [s]."""

    def __init__(self, **node_options):
        super().__init__("fake_robot", **node_options)
        robot = self.declare_parameter("robot", "two_link").value
        if robot not in ROBOTS:
            raise ValueError(f"robot must be one of {ROBOTS}, got {robot!r}")
        default_joints, self._step, guess, rest_pose = (_two_link if robot == "two_link"
                                                        else _baxter)(self)
        self.joints = list(self.declare_parameter("joints", default_joints).value)
        n = len(default_joints)
        if len(self.joints) != n:
            raise ValueError(f"the {robot} fake robot has {n} joints; give {n} names, got "
                             f"{self.joints}")
        rate = float(self.declare_parameter("rate", 500.0).value)
        self.substeps = int(self.declare_parameter("substeps", 4).value)
        self.dt = 1.0 / rate
        self.noise = float(self.declare_parameter("noise", 0.0).value)
        self.delay = float(self.declare_parameter("delay", 0.0).value)
        self.rng = np.random.default_rng(self.declare_parameter("seed", 0).value)
        self.joint_q = array_parameter(self, "initial_q", guess)
        if self.joint_q.shape != (n,):
            raise ValueError(f"initial_q needs {n} angles [rad], got {self.joint_q}")
        if self.declare_parameter("rest_pose", False).value:
            if rest_pose is None:
                raise ValueError("rest_pose is for the baxter robot (the two-link arm's rest "
                                 "pose is initial_q hanging straight down)")
            self.joint_q = rest_pose(self.joint_q)
        self.joint_qd = np.zeros(n)
        self.command = np.zeros(n)
        self.braked = bool(self.declare_parameter("brake", False).value)
        self.excitation = self._excitation(n)
        self.pulses = self._pulses()
        self.time = 0.0
        self.ticks = 0  # periods since the start, braked or not: the stamps' clock
        self.start_stamp = self.get_clock().now().nanoseconds * 1e-9
        self.outbox: collections.deque = collections.deque()  # (due, message) for the delay
        controller = self.declare_parameter("controller", "effort_controller").value
        self.publisher = self.create_publisher(rclpy_class(JOINT_STATE), "/joint_states", 10)
        self.create_subscription(rclpy_class(FLOAT64_ARRAY), f"/{controller}/commands",
                                 self._command, 10)
        self.create_timer(self.dt, self._tick)

    def _excitation(self, n: int) -> SineExcitation | None:
        amplitude = array_parameter(self, "excitation_amplitude", None)
        frequency = array_parameter(self, "excitation_frequency", None)
        start = float(self.declare_parameter("excitation_start", 0.0).value)
        hold = float(self.declare_parameter("excitation_hold", self.dt).value)
        if amplitude.size == 0 and frequency.size == 0:
            return None
        if amplitude.size != n:
            raise ValueError(f"excitation_amplitude needs {n} values (one per joint), got "
                             f"{amplitude}")
        return SineExcitation(amplitude, frequency, start=start, hold=hold)

    def _pulses(self) -> list[TorquePulse]:
        joints = optional_parameter(self, "pulse_joint", Parameter.Type.STRING_ARRAY) or []
        columns = [array_parameter(self, f"pulse_{name}", None)
                   for name in ("torque", "start", "end")]
        if any(len(column) != len(joints) for column in columns):
            raise ValueError(f"pulse_joint, pulse_torque, pulse_start and pulse_end need one "
                             f"value per pulse each, got {joints} and "
                             f"{[list(c) for c in columns]}")
        unknown = [name for name in joints if name not in self.joints]
        if unknown:
            raise ValueError(f"pulse joints {unknown} are not the robot's {self.joints}")
        return [TorquePulse(self.joints.index(name), float(torque), float(start), float(end))
                for name, torque, start, end in zip(joints, *columns, strict=True)]

    def _command(self, message) -> None:
        try:
            self.command = float64_array_values(from_rclpy(message, FLOAT64_ARRAY),
                                                size=len(self.joints))
        except MessageError as exc:
            self.get_logger().error(f"command ignored: {exc}")
            return
        self.braked = False

    def motor_torque(self) -> np.ndarray:
        """The torque [N m] the motors apply from now on: command plus excitation."""
        if self.excitation is None:
            return self.command
        return self.command + self.excitation.torque(self.time)

    def _tick(self) -> None:
        n = len(self.joints)
        torque = np.zeros(n) if self.braked else self.motor_torque()
        noise = self.rng.normal(scale=self.noise, size=(2, n)) if self.noise else np.zeros((2, n))
        sampled = self.ticks * self.dt
        self.outbox.append((sampled + self.delay, joint_state_message(
            self.joints, stamp=self.start_stamp + sampled, position=self.joint_q + noise[0],
            velocity=self.joint_qd + noise[1], effort=torque)))
        while self.outbox and self.outbox[0][0] <= sampled + 1e-12:
            self.publisher.publish(to_rclpy(self.outbox.popleft()[1], JOINT_STATE))
        self.ticks += 1
        if self.braked:
            return
        total = torque + pulse_torques(self.time, self.pulses, n)
        for _ in range(self.substeps):
            self.joint_q, self.joint_qd = self._step(self.joint_q, self.joint_qd, total,
                                                     self.dt / self.substeps)
        self.time += self.dt

    def close(self) -> None:
        """Nothing to release: a real robot's brakes are not modelled."""


def main(argv: list[str] | None = None) -> int:
    """Console script ``fake_robot``."""
    return run_node(FakeRobotNode, argv)
