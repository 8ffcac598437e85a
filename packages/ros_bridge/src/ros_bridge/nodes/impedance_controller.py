"""``impedance_controller``: /joint_states in, effort commands out, through
:class:`ros_bridge.controller.SafeImpedanceController`.

Publishes ``std_msgs/Float64MultiArray`` on ``/<controller>/commands`` in the ``joints``
order (what ros2_control's JointGroupEffortController reads); zero torque whenever a guard
trips (each change of reason is logged) and on shutdown. With ``trigger`` ``state`` (the
default) each joint state is answered at once, and the timer (restarted by every state)
only sends the watchdog's zero torque once states stop coming: ``rate`` should be the joint
states' rate, as the torque-rate limit and the watchdog count its periods. With ``timer`` a
command goes out every 1/``rate`` s from the latest joint state, so a state waits up to one
period for its answer (benchmarks/ros_loop.py: p99 1.2-2.4 ms at 500 Hz against 0.5-0.8 ms).

Parameters: ``joints`` (string array), ``robot_joints`` (the effort interface's joints,
default ``joints``; a different list refuses to start), ``urdf`` (effort, velocity and
position limits), ``stiffness``, ``damping``, ``goal_q``, ``goal_qd`` (arrays),
``effort_limit``, ``velocity_limit`` (lower than the URDF's, optional), ``torque_rate``
[N m per cycle], ``rate`` [Hz], ``model_file`` (a net-torque map ``.npz``; empty: PD alone),
``scale`` (λ), ``missed_periods``, ``controller`` (the effort controller's name),
``trigger`` (``timer`` or ``state``).
"""

from __future__ import annotations

import time

from rclpy.node import Node
from rclpy.parameter import Parameter

from codesign.impedance import NetTorqueMap, zero_net_torque

from ..controller import SafeImpedanceController
from ..limits import joint_limits
from ..messages import FLOAT64_ARRAY, JOINT_STATE, float64_array_message
from ..rclpy_adapter import from_rclpy, rclpy_class, to_rclpy
from ..watchdog import same_stop
from ._params import array_parameter, optional_parameter, required_parameter
from ._spin import run_node

__all__ = ["TRIGGERS", "ImpedanceControllerNode", "main"]

TRIGGERS = ("timer", "state")
"""When a command goes out: every 1/``rate`` s, or on every joint state."""


class ImpedanceControllerNode(Node):
    """The controller node; ``close()`` publishes the zero command."""

    def __init__(self, **node_options):
        super().__init__("impedance_controller", **node_options)
        joints = list(required_parameter(self, "joints", Parameter.Type.STRING_ARRAY))
        robot_joints = optional_parameter(self, "robot_joints",
                                          Parameter.Type.STRING_ARRAY) or joints
        urdf = required_parameter(self, "urdf", Parameter.Type.STRING)
        rate = float(self.declare_parameter("rate", 500.0).value)
        self.trigger = self.declare_parameter("trigger", "state").value
        if self.trigger not in TRIGGERS:
            raise ValueError(f"trigger must be one of {TRIGGERS} (a command every 1/rate, or "
                             f"one per joint state), got {self.trigger!r}")
        model_file = self.declare_parameter("model_file", "").value
        effort = array_parameter(self, "effort_limit", None)
        velocity = array_parameter(self, "velocity_limit", None)
        limits = joint_limits(urdf, joints,
                              rate=self.declare_parameter("torque_rate", 1.0).value,
                              effort=effort if effort.size else None,
                              velocity=velocity if velocity.size else None)
        goal_qd = array_parameter(self, "goal_qd", None)
        self.controller = SafeImpedanceController(
            joints=joints, stiffness=array_parameter(self, "stiffness", None),
            damping=array_parameter(self, "damping", None),
            goal_q=array_parameter(self, "goal_q", None),
            goal_qd=goal_qd if goal_qd.size else 0.0, limits=limits, period=1.0 / rate,
            net_torque=NetTorqueMap.load(model_file) if model_file else zero_net_torque,
            scale=self.declare_parameter("scale", 1.0).value,
            missed_periods=self.declare_parameter("missed_periods", 2.0).value)
        self.controller.check_joints(robot_joints)
        self.state = self.controller.initial_state()
        self.stop: str | None = None
        name = self.declare_parameter("controller", "effort_controller").value
        self.publisher = self.create_publisher(rclpy_class(FLOAT64_ARRAY),
                                               f"/{name}/commands", 10)
        self.create_subscription(rclpy_class(JOINT_STATE), "/joint_states", self._receive, 10)
        self.timer = self.create_timer(1.0 / rate, self._tick)

    def _receive(self, message) -> None:
        now = time.monotonic()
        self.state = self.controller.receive(self.state, from_rclpy(message, JOINT_STATE), now)
        if self.trigger == "state":
            # the timer is only the watchdog now: it fires once states stop coming
            self.timer.reset()
            self._command(now)

    def _publish(self, torque) -> None:
        self.publisher.publish(to_rclpy(float64_array_message(torque), FLOAT64_ARRAY))

    def _tick(self) -> None:
        now = time.monotonic()
        # triggered by states, a tick must not compute a command from an answered state:
        # that would spend the torque-rate limit of the next cycle
        if self.trigger == "timer" or self.controller.watchdog.stale(self.state.received,
                                                                     now) is not None:
            self._command(now)

    def _command(self, now: float) -> None:
        command, self.state = self.controller.command(self.state, now)
        if not same_stop(command.stop, self.stop):
            if command.stop is None:
                self.get_logger().info("control running")
            else:
                self.get_logger().warning(f"zero torque: {command.stop}")
            self.stop = command.stop
        self._publish(command.torque)

    def close(self) -> None:
        """Publish the last command of all: zero torque."""
        self._publish(self.controller.shutdown().torque)


def main(argv: list[str] | None = None) -> int:
    """Console script ``impedance_controller`` (ROS arguments: ``--ros-args -p name:=value``)."""
    return run_node(ImpedanceControllerNode, argv)
