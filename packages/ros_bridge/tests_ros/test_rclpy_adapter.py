"""In-process rclpy: messages converted both ways, and a joint state through a real topic."""

import time

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from ros_bridge.messages import (
    FLOAT64_ARRAY,
    JOINT_STATE,
    float64_array_message,
    float64_array_values,
    joint_sample,
    joint_state_message,
)
from ros_bridge.rclpy_adapter import from_rclpy, rclpy_class, to_rclpy


def test_messages_convert_both_ways():
    message = joint_state_message(["b", "a"], stamp=2.5, position=[1.0, 2.0], velocity=[3, 4])
    ros = to_rclpy(message, JOINT_STATE)
    assert isinstance(ros, rclpy_class(JOINT_STATE))
    assert list(ros.name) == ["b", "a"] and ros.header.stamp.nanosec == 500_000_000
    back = joint_sample(from_rclpy(ros, JOINT_STATE), ["a", "b"])
    np.testing.assert_array_equal(back.position, [2.0, 1.0])
    command = to_rclpy(float64_array_message([1.5, -2.0]), FLOAT64_ARRAY)
    np.testing.assert_array_equal(float64_array_values(from_rclpy(command, FLOAT64_ARRAY)),
                                  [1.5, -2.0])
    with pytest.raises(ImportError, match="no rclpy message class"):
        rclpy_class("nope_msgs/msg/Nothing")


def test_a_joint_state_crosses_a_topic_between_two_nodes():
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=73)
    try:
        sender = rclpy.create_node("sender", context=context)
        receiver = rclpy.create_node("receiver", context=context)
        got = []
        receiver.create_subscription(rclpy_class(JOINT_STATE), "/joint_states",
                                     lambda m: got.append(from_rclpy(m, JOINT_STATE)), 10)
        publisher = sender.create_publisher(rclpy_class(JOINT_STATE), "/joint_states", 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(sender)
        executor.add_node(receiver)
        message = to_rclpy(joint_state_message(["j"], stamp=1.0, position=[0.25]), JOINT_STATE)
        deadline = time.monotonic() + 5.0  # discovery margin, not a timing assertion
        while not got and time.monotonic() < deadline:
            publisher.publish(message)
            executor.spin_once(timeout_sec=0.05)
        assert got, "no joint state arrived within the discovery margin"
        assert joint_sample(got[0], ["j"]).position[0] == 0.25
        executor.shutdown()
    finally:
        rclpy.shutdown(context=context)
