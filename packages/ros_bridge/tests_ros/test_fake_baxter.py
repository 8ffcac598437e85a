"""The Baxter fake robot as a node: it publishes its seven joints' states, rests without
torque where it hangs, and moves under an effort command."""

import importlib.util

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from ros_bridge.baxter import LEFT_ARM
from ros_bridge.messages import FLOAT64_ARRAY, JOINT_STATE, float64_array_message, joint_sample
from ros_bridge.rclpy_adapter import from_rclpy, rclpy_class, to_rclpy

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pinocchio") is None,
    reason="the Baxter fake robot needs Pinocchio: install the extra fake-baxter "
           "(the README's ROS test command does)")


DOMAIN_ID = 78  # this module's DDS domain (the context fixture's)



def test_the_baxter_fake_robot_publishes_states_and_follows_an_effort_command(context, spin_until):
    from ros_bridge.nodes.fake_robot import FakeRobotNode

    robot = FakeRobotNode(context=context, parameter_overrides=[
        Parameter("robot", value="baxter"), Parameter("rate", value=200.0),
        Parameter("rest_pose", value=True), Parameter("brake", value=True)])
    client = rclpy.create_node("client", context=context)
    states = []
    client.create_subscription(rclpy_class(JOINT_STATE), "/joint_states",
                               lambda m: states.append(from_rclpy(m, JOINT_STATE)), 10)
    commands = client.create_publisher(rclpy_class(FLOAT64_ARRAY),
                                       "/effort_controller/commands", 10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(robot)
    executor.add_node(client)
    assert spin_until(executor, lambda: len(states) >= 5, 10.0), "no joint states"
    rest = joint_sample(states[-1], list(LEFT_ARM))
    np.testing.assert_allclose(rest.position, robot.joint_q)  # braked: it holds its pose
    assert robot.time == 0.0
    # one N m on s0 (the vertical shoulder axis, where gravity does not act): it turns
    commands.publish(to_rclpy(float64_array_message([1.0, 0, 0, 0, 0, 0, 0]), FLOAT64_ARRAY))
    assert spin_until(executor, lambda: robot.time > 0.2, 10.0), "the command did not arrive"
    moved = joint_sample(states[-1], list(LEFT_ARM))
    assert moved.position[0] - rest.position[0] > 1e-3
    assert moved.velocity[0] > 0.0
    assert moved.effort[0] == 1.0
    # released at its rest pose, the other joints stay near it under s0's turn
    assert np.abs(moved.position[1:] - rest.position[1:]).max() < 0.05
    executor.shutdown()
    robot.destroy_node()
    client.destroy_node()
