"""The one module that touches rclpy: messages between rclpy's classes and the ROS-free core's.

rclpy is imported lazily, inside the functions, so importing ``ros_bridge`` never needs ROS.
Conversion goes through the CDR bytes both sides agree on (the same bytes a bag stores), so
the core's conversions (:mod:`ros_bridge.messages`) serve the nodes unchanged. Needs the
``ros`` extra (Linux x86_64), installed in its own environment (README, "ROS").
"""

from __future__ import annotations

import importlib

from .messages import deserialize, typestore

__all__ = ["from_rclpy", "rclpy_class", "to_rclpy"]


def rclpy_class(msgtype: str):
    """rclpy's class of ``msgtype`` (``"sensor_msgs/msg/JointState"``)."""
    package, kind, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"no rclpy message class for {msgtype!r} ({exc}); install the "
                          "ros extra (pip install 'ros_bridge[ros]') in a ROS environment "
                          "of its own") from None


def to_rclpy(message, msgtype: str):
    """A core (rosbags) message as an instance of rclpy's class."""
    from rclpy.serialization import deserialize_message

    data = bytes(typestore().serialize_cdr(message, msgtype))
    return deserialize_message(data, rclpy_class(msgtype))


def from_rclpy(message, msgtype: str):
    """An rclpy message as the core's (rosbags) class, for :mod:`ros_bridge.messages`."""
    from rclpy.serialization import serialize_message

    return deserialize(serialize_message(message), msgtype, trailing_bytes=True)
