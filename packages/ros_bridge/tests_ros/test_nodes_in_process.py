"""The fake robot and the impedance controller as nodes in one process: the arm is driven to
its goal, a controller refuses a joint list that is not the robot's, and one triggered by
joint states answers each at once and still sends the watchdog's zero torque."""

import time
from importlib.resources import files

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from ros_bridge.controller import JointListError
from ros_bridge.messages import (
    FLOAT64_ARRAY,
    JOINT_STATE,
    float64_array_values,
    joint_state_message,
)
from ros_bridge.nodes.fake_robot import FakeRobotNode
from ros_bridge.nodes.impedance_controller import ImpedanceControllerNode
from ros_bridge.rclpy_adapter import from_rclpy, rclpy_class, to_rclpy

URDF = str(files("ros_bridge.data") / "two_link_arm.urdf")
JOINTS = ["shoulder", "elbow"]
HANGING = [-1.5708, 0.0]  # the arm starts hanging at rest (it swings in a vertical plane)
GOAL = [-1.2, 0.3]


def controller_parameters(**changes):
    values = {"joints": JOINTS, "urdf": URDF, "stiffness": [30.0, 10.0],
              "damping": [3.0, 0.5], "goal_q": GOAL, "torque_rate": 2.0,
              "rate": 200.0} | changes
    return [Parameter(k, value=v) for k, v in values.items()]


DOMAIN_ID = 74  # this module's DDS domain (the context fixture's)


def test_the_controller_holds_the_fake_arm_near_its_goal(context):
    robot = FakeRobotNode(context=context,
                          parameter_overrides=[Parameter("rate", value=200.0),
                                               Parameter("initial_q", value=HANGING)])
    controller = ImpedanceControllerNode(context=context,
                                         parameter_overrides=controller_parameters())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(robot)
    executor.add_node(controller)
    deadline = time.monotonic() + 12.0  # discovery margin and settling, not a timing check
    # PD without gravity compensation settles off the goal by g(q)/K: within 0.25 rad
    while time.monotonic() < deadline and not (
            controller.stop is None and np.abs(robot.joint_q - GOAL).max() < 0.25
            and np.abs(robot.joint_qd).max() < 0.05):
        executor.spin_once(timeout_sec=0.01)
    assert controller.stop is None
    assert np.abs(robot.joint_q - GOAL).max() < 0.25
    executor.shutdown()
    robot.destroy_node()
    controller.destroy_node()


def test_a_joint_list_that_is_not_the_robots_is_refused(context):
    with pytest.raises(JointListError, match="list the same joints in the same order"):
        ImpedanceControllerNode(context=context, parameter_overrides=controller_parameters(
            robot_joints=["elbow", "shoulder"]))


class JointStateSource:
    """A test node: publishes joint states, collects the controller's commands."""

    def __init__(self, context):
        self.node = rclpy.create_node("joint_state_source", context=context)
        self.publisher = self.node.create_publisher(rclpy_class(JOINT_STATE), "/joint_states",
                                                    10)
        self.commands = []
        self.node.create_subscription(
            rclpy_class(FLOAT64_ARRAY), "/effort_controller/commands",
            lambda m: self.commands.append(float64_array_values(from_rclpy(m, FLOAT64_ARRAY))),
            10)

    def publish(self, joint_q):
        self.publisher.publish(to_rclpy(joint_state_message(
            JOINTS, stamp=time.time(), position=np.asarray(joint_q), velocity=np.zeros(2)),
            JOINT_STATE))



@pytest.mark.parametrize("trigger", [{"trigger": "state"}, {}], ids=["state", "default"])
def test_a_state_triggered_controller_answers_each_joint_state_once(context, spin_until,
                                                                    trigger):
    # a 20 s period: no timer tick within the test, so every command answers a state (the
    # default trigger is state: benchmarks/ros_loop.py's p99 target is met only with it)
    controller = ImpedanceControllerNode(context=context, parameter_overrides=(
        controller_parameters(rate=0.05, **trigger)))
    source = JointStateSource(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(controller)
    executor.add_node(source.node)
    spin_until(executor, lambda: source.publisher.get_subscription_count() > 0
               and controller.publisher.get_subscription_count() > 0, 10.0)
    for k, offset in enumerate([[0.01, 0.0], [0.02, -0.03], [-0.01, 0.05]]):
        source.publish(np.array(GOAL) - offset)
        assert spin_until(executor, lambda k=k: len(source.commands) > k, 5.0), \
            f"joint state {k} was not answered"
        np.testing.assert_allclose(source.commands[k], [30.0, 10.0] * np.array(offset),
                                   rtol=1e-12)
    spin_until(executor, lambda: False, 0.2)
    assert len(source.commands) == 3
    executor.shutdown()
    controller.destroy_node()
    source.node.destroy_node()


def test_a_state_triggered_controller_sends_zero_torque_once_states_stop(context, spin_until):
    controller = ImpedanceControllerNode(context=context, parameter_overrides=(
        controller_parameters(trigger="state", rate=100.0)))
    source = JointStateSource(context)
    sending = source.node.create_timer(0.01, lambda: source.publish(np.array(GOAL) - 0.01))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(controller)
    executor.add_node(source.node)
    assert spin_until(executor, lambda: source.commands and np.any(source.commands[-1]), 10.0)
    sending.cancel()
    assert spin_until(executor, lambda: not np.any(source.commands[-1]), 5.0), \
        "the controller kept its torque after the joint states stopped"
    assert "old, more than 2 control periods" in controller.stop
    executor.shutdown()
    controller.destroy_node()
    source.node.destroy_node()


def test_an_unknown_trigger_is_refused(context):
    with pytest.raises(ValueError, match="trigger must be one of"):
        ImpedanceControllerNode(context=context,
                                parameter_overrides=controller_parameters(trigger="tick"))
