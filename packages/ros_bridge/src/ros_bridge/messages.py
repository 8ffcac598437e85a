"""ROS 2 messages to arrays and back, without ROS: the message classes of ``rosbags``.

Joint states are matched by joint name, never by position: drivers publish
``sensor_msgs/JointState`` in their own order (often alphabetical, sometimes with grippers or
heads mixed in), and a controller that read them by position would command the wrong joint.
Effort commands go out as ``std_msgs/Float64MultiArray`` in the controller's ``joints`` order
(what ros2_control's JointGroupEffortController reads), keypoints as
``geometry_msgs/PolygonStamped``.

Every function takes and returns the message classes of :func:`typestore` (the rclpy adapter
converts to and from rclpy's classes through the same CDR bytes).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import struct
from collections.abc import Sequence

import numpy as np
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.store import Typestore

__all__ = [
    "FLOAT64_ARRAY",
    "JOINT_STATE",
    "POLYGON_STAMPED",
    "JointNameError",
    "JointSample",
    "MessageError",
    "float64_array_message",
    "float64_array_values",
    "joint_indices",
    "joint_sample",
    "joint_state_message",
    "deserialize",
    "polygon_message",
    "polygon_points",
    "stamp_seconds",
    "time_message",
    "typestore",
]

JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64_ARRAY = "std_msgs/msg/Float64MultiArray"
POLYGON_STAMPED = "geometry_msgs/msg/PolygonStamped"


class MessageError(ValueError):
    """A message does not hold what it should: wrong sizes, NaN where numbers are needed."""


class JointNameError(MessageError):
    """A joint state lacks joints the caller needs, or names one twice."""


@functools.cache
def typestore() -> Typestore:
    """The message types of ROS 2 Jazzy (the standard messages used here are the same in
    every ROS 2 release since Humble)."""
    return get_typestore(Stores.ROS2_JAZZY)


def deserialize(data: bytes | memoryview, msgtype: str, *, trailing_bytes: bool = False):
    """A CDR-serialized ``msgtype`` message as the typestore's class.

    Args:
        trailing_bytes: accept any bytes after the message. rclpy's ``serialize_message``
            returns a buffer sized by rmw_fastrtps' estimate, with up to several bytes of
            junk after the message (8 for a one-joint JointState); a message from the wire
            or a bag ends within CDR's 4-byte padding, which is all the default accepts.

    Raises:
        MessageError: not CDR, cut short, or followed by more than padding.
    """
    store = typestore()
    if len(data) < 4 or bytes(data[:2]) not in (b"\x00\x00", b"\x00\x01"):
        raise MessageError(f"not a CDR-encoded {msgtype} (unknown encapsulation header)")
    definition = store.get_msgdef(msgtype)
    decode = definition.deserialize_cdr_le if data[1] else definition.deserialize_cdr_be
    try:
        message, end = decode(memoryview(data)[4:], 0, definition.cls, store)
    except (IndexError, ValueError, UnicodeDecodeError, struct.error) as exc:
        raise MessageError(f"cannot decode {msgtype}: {exc}") from None
    if not trailing_bytes and len(data) - 4 - end > 3:
        raise MessageError(f"{len(data) - 4 - end} bytes follow a {msgtype} message; the data "
                           "holds something else")
    return message


def _message_type(name: str):
    return typestore().types[name]


# -- time ---------------------------------------------------------------------------------


def stamp_seconds(stamp) -> float:
    """A ``builtin_interfaces/Time`` as seconds [s] (float)."""
    return stamp.sec + 1e-9 * stamp.nanosec


def time_message(seconds: float):
    """Seconds [s] (≥ 0, finite) as a ``builtin_interfaces/msg/Time``."""
    if not (math.isfinite(seconds) and seconds >= 0):
        raise MessageError(f"a ROS time must be a finite number of seconds >= 0, got {seconds}")
    total = round(seconds * 1e9)
    return _message_type("builtin_interfaces/msg/Time")(sec=total // 10**9,
                                                        nanosec=total % 10**9)


def _header(seconds: float, frame_id: str):
    return _message_type("std_msgs/msg/Header")(stamp=time_message(seconds), frame_id=frame_id)


# -- sensor_msgs/JointState ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class JointSample:
    """One joint state, in the caller's joint order.

    Attributes:
        stamp: the header's time [s].
        position: joint positions [rad or m], shape (n,).
        velocity: joint velocities [rad/s or m/s], shape (n,); NaN when the message had none.
        effort: joint efforts [N m or N], shape (n,); NaN when the message had none.
    """

    stamp: float
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def joint_indices(names: Sequence[str], joints: Sequence[str]) -> np.ndarray:
    """Where each of ``joints`` sits in a message's ``names``, shape (len(joints),), int.

    Raises:
        JointNameError: a joint is missing (the message's names are listed) or ``names``
            holds a name twice.
    """
    names = list(names)
    where = {}
    for index, name in enumerate(names):
        if name in where:
            raise JointNameError(f"the joint state names {name!r} twice ({names}); a driver "
                                 "must publish each joint once")
        where[name] = index
    missing = [j for j in joints if j not in where]
    if missing:
        raise JointNameError(f"the joint state has no joint(s) {missing}; it has {names}. "
                             "Check the joint names (the URDF's) in the `joints` option")
    return np.array([where[j] for j in joints], dtype=np.int64)


def _field(message, field: str, count: int, indices: np.ndarray) -> np.ndarray:
    values = np.asarray(getattr(message, field), dtype=np.float64)
    if values.size == 0:  # JointState allows an empty field: "not measured"
        return np.full(len(indices), np.nan)
    if values.shape != (count,):
        raise MessageError(f"the joint state's {field} has {values.size} value(s) for "
                           f"{count} name(s); each filled field needs one value per name")
    return values[indices]


def joint_sample(message, joints: Sequence[str]) -> JointSample:
    """The ``joints`` of a ``sensor_msgs/JointState``, picked by name, in ``joints`` order.

    Raises:
        JointNameError: a joint missing from the message, or a name given twice.
        MessageError: a filled field whose length differs from the names'.
    """
    names = list(message.name)
    indices = joint_indices(names, joints)
    return JointSample(stamp=stamp_seconds(message.header.stamp),
                       position=_field(message, "position", len(names), indices),
                       velocity=_field(message, "velocity", len(names), indices),
                       effort=_field(message, "effort", len(names), indices))


def _values(name: str, values, count: int) -> np.ndarray:
    if values is None:
        return np.zeros(0)
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if array.shape != (count,):
        raise MessageError(f"{name} has {array.size} value(s) for {count} joint(s)")
    return array


def joint_state_message(joints: Sequence[str], *, stamp: float, position,
                        velocity=None, effort=None, frame_id: str = ""):
    """A ``sensor_msgs/msg/JointState`` of ``joints`` at ``stamp`` [s].

    Args:
        position, velocity, effort: shape (len(joints),) each; ``None`` leaves a field empty.
    """
    count = len(joints)
    return _message_type(JOINT_STATE)(
        header=_header(stamp, frame_id), name=list(joints),
        position=_values("position", position, count),
        velocity=_values("velocity", velocity, count),
        effort=_values("effort", effort, count))


# -- std_msgs/Float64MultiArray -----------------------------------------------------------


def float64_array_message(values):
    """A ``std_msgs/msg/Float64MultiArray`` holding ``values`` flattened, with an empty layout
    (what ros2_control's forward command controllers read)."""
    layout = _message_type("std_msgs/msg/MultiArrayLayout")(dim=[], data_offset=0)
    return _message_type(FLOAT64_ARRAY)(
        layout=layout, data=np.asarray(values, dtype=np.float64).reshape(-1).copy())


def float64_array_values(message, *, size: int | None = None) -> np.ndarray:
    """The data of a ``std_msgs/Float64MultiArray``, shape (size,).

    Raises:
        MessageError: ``size`` is given and the message holds another number of values.
    """
    data = np.asarray(message.data, dtype=np.float64)[int(message.layout.data_offset):]
    if size is not None and data.shape != (size,):
        raise MessageError(f"the Float64MultiArray holds {data.size} value(s); expected {size} "
                           "(one per joint, in the `joints` order)")
    return data


# -- geometry_msgs/PolygonStamped ---------------------------------------------------------


def polygon_message(points, *, stamp: float, frame_id: str = ""):
    """A ``geometry_msgs/msg/PolygonStamped`` of keypoints at ``stamp`` [s].

    Args:
        points: keypoints [m or px], shape (n, 2) (z = 0) or (n, 3).
    """
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] not in (2, 3):
        raise MessageError(f"keypoints must have shape (n, 2) or (n, 3), got {points.shape}")
    point = _message_type("geometry_msgs/msg/Point32")
    xyz = np.zeros((len(points), 3))
    xyz[:, : points.shape[1]] = points
    polygon = _message_type("geometry_msgs/msg/Polygon")(
        points=[point(x=float(x), y=float(y), z=float(z)) for x, y, z in xyz])
    return _message_type(POLYGON_STAMPED)(header=_header(stamp, frame_id), polygon=polygon)


def polygon_points(message, *, count: int | None = None, dims: int = 2) -> np.ndarray:
    """The keypoints of a ``geometry_msgs/PolygonStamped``, shape (n, dims).

    Args:
        count: the number of points expected; ``None`` takes what the message holds.
        dims: 2 (x, y) or 3 (x, y, z).

    Raises:
        MessageError: another number of points than ``count``.
    """
    if dims not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, got {dims}")
    points = message.polygon.points
    if count is not None and len(points) != count:
        raise MessageError(f"the keypoint message holds {len(points)} point(s); expected "
                           f"{count} (the measurement's keypoint count)")
    xyz = np.array([(p.x, p.y, p.z) for p in points], dtype=np.float64).reshape(-1, 3)
    return xyz[:, :dims]
