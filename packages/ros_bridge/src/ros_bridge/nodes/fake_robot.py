"""``fake_robot``: a stand-in for hardware, a two-link arm (:mod:`ros_bridge.arm`, not one of
codesign's simulators) with "true" parameters that differ from the nominal model.

Integrates the arm with RK4 (``substeps`` per period) under the latest effort command
(``/<controller>/commands``, ``std_msgs/Float64MultiArray`` in the ``joints`` order, held
like ros2_control's forwarder holds it), and publishes ``sensor_msgs/JointState`` on
/joint_states at ``rate`` Hz with Gaussian ``noise`` [rad, rad/s] and a ``delay`` [s].

Parameters: ``joints`` (two names), ``rate``, ``substeps``, ``noise``, ``delay``, ``seed``,
``controller``, ``initial_q``, and the truth: ``length``, ``mass``, ``com``, ``inertia``,
``damping``, ``spring`` (two values each; defaults :data:`TRUE_ARM`).
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
from rclpy.node import Node

from ..arm import ArmParameters, rk4_step
from ..messages import (
    FLOAT64_ARRAY,
    JOINT_STATE,
    MessageError,
    float64_array_values,
    joint_state_message,
)
from ..rclpy_adapter import from_rclpy, rclpy_class, to_rclpy
from ._params import array_parameter
from ._spin import run_node

__all__ = ["TRUE_ARM", "FakeRobotNode", "main"]

TRUE_ARM = ArmParameters(mass=np.array([2.3, 0.85]), damping=np.array([0.25, 0.15]),
                         spring=np.array([1.5, 0.0]))
"""The fake robot's default truth: the nominal :class:`~ros_bridge.arm.ArmParameters` with
perturbed masses, joint damping and a shoulder spring."""


class FakeRobotNode(Node):
    """The fake robot; ``joint_q``/``joint_qd`` hold its true state."""

    def __init__(self, **node_options):
        super().__init__("fake_robot", **node_options)
        self.joints = list(self.declare_parameter("joints", ["shoulder", "elbow"]).value)
        if len(self.joints) != 2:
            raise ValueError(f"the fake robot is a two-link arm; give two joints, got "
                             f"{self.joints}")
        self.arm = ArmParameters(**{f.name: array_parameter(self, f.name,
                                                            getattr(TRUE_ARM, f.name))
                                    for f in dataclasses.fields(ArmParameters)})
        rate = float(self.declare_parameter("rate", 500.0).value)
        self.substeps = int(self.declare_parameter("substeps", 4).value)
        self.dt = 1.0 / rate
        self.noise = float(self.declare_parameter("noise", 0.0).value)
        self.delay = float(self.declare_parameter("delay", 0.0).value)
        self.rng = np.random.default_rng(self.declare_parameter("seed", 0).value)
        self.joint_q = array_parameter(self, "initial_q", [0.0, 0.0])
        self.joint_qd = np.zeros(2)
        self.torque = np.zeros(2)
        self.time = 0.0
        self.outbox: collections.deque = collections.deque()  # (due, message) for the delay
        controller = self.declare_parameter("controller", "effort_controller").value
        self.publisher = self.create_publisher(rclpy_class(JOINT_STATE), "/joint_states", 10)
        self.create_subscription(rclpy_class(FLOAT64_ARRAY), f"/{controller}/commands",
                                 self._command, 10)
        self.create_timer(self.dt, self._tick)

    def _command(self, message) -> None:
        try:
            self.torque = float64_array_values(from_rclpy(message, FLOAT64_ARRAY), size=2)
        except MessageError as exc:
            self.get_logger().error(f"command ignored: {exc}")

    def _tick(self) -> None:
        for _ in range(self.substeps):
            self.joint_q, self.joint_qd = rk4_step(self.arm, self.joint_q, self.joint_qd,
                                                   self.torque, self.dt / self.substeps)
        self.time += self.dt
        noise = self.rng.normal(scale=self.noise, size=(2, 2)) if self.noise else np.zeros((2, 2))
        stamp = self.get_clock().now().nanoseconds * 1e-9
        self.outbox.append((self.time + self.delay, joint_state_message(
            self.joints, stamp=stamp, position=self.joint_q + noise[0],
            velocity=self.joint_qd + noise[1], effort=self.torque)))
        while self.outbox and self.outbox[0][0] <= self.time + 1e-12:
            self.publisher.publish(to_rclpy(self.outbox.popleft()[1], JOINT_STATE))

    def close(self) -> None:
        """Nothing to release: a real robot's brakes are not modelled."""


def main(argv: list[str] | None = None) -> int:
    """Console script ``fake_robot``."""
    return run_node(FakeRobotNode, argv)
