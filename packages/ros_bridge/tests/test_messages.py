"""Message conversion: joint states by name, effort arrays, keypoint polygons, times."""

import numpy as np
import pytest

from ros_bridge.messages import (
    JointNameError,
    MessageError,
    deserialize,
    float64_array_message,
    float64_array_values,
    joint_indices,
    joint_sample,
    joint_state_message,
    polygon_message,
    polygon_points,
    stamp_seconds,
    time_message,
    typestore,
)

JOINTS = ["left_s0", "left_s1", "left_e0", "left_e1"]


def test_joint_state_is_read_by_name_whatever_the_published_order():
    rng = np.random.default_rng(3)
    order = list(rng.permutation(len(JOINTS)))
    published = [JOINTS[i] for i in order] + ["head_pan"]
    position = np.array([10.0 * i for i in order] + [99.0])
    message = joint_state_message(published, stamp=1.25, position=position,
                                  velocity=position + 1, effort=position + 2)
    sample = joint_sample(message, JOINTS)
    np.testing.assert_array_equal(sample.position, [0.0, 10.0, 20.0, 30.0])
    np.testing.assert_array_equal(sample.velocity, [1.0, 11.0, 21.0, 31.0])
    np.testing.assert_array_equal(sample.effort, [2.0, 12.0, 22.0, 32.0])
    assert sample.stamp == 1.25


def test_a_missing_joint_is_named_with_what_the_message_has():
    message = joint_state_message(JOINTS[:3], stamp=0.0, position=[0, 1, 2])
    with pytest.raises(JointNameError, match=r"no joint\(s\) \['left_e1'\].*it has"):
        joint_sample(message, JOINTS)


def test_a_joint_named_twice_is_refused():
    with pytest.raises(JointNameError, match="twice"):
        joint_indices(["a", "b", "a"], ["a"])


def test_empty_fields_read_as_nan_and_short_fields_are_refused():
    message = joint_state_message(JOINTS, stamp=0.0, position=[0, 1, 2, 3])
    sample = joint_sample(message, JOINTS)
    assert np.all(np.isnan(sample.velocity)) and np.all(np.isnan(sample.effort))
    message.velocity = np.array([1.0, 2.0])
    with pytest.raises(MessageError, match="velocity has 2 value"):
        joint_sample(message, JOINTS)
    with pytest.raises(MessageError, match="position has 3 value"):
        joint_state_message(JOINTS, stamp=0.0, position=[0, 1, 2])


def test_joint_state_survives_cdr_serialization():
    store = typestore()
    message = joint_state_message(JOINTS, stamp=3.5, position=[0.1, 0.2, 0.3, 0.4])
    data = store.serialize_cdr(message, "sensor_msgs/msg/JointState")
    back = store.deserialize_cdr(data, "sensor_msgs/msg/JointState")
    np.testing.assert_array_equal(joint_sample(back, JOINTS[::-1]).position,
                                  [0.4, 0.3, 0.2, 0.1])


def test_time_round_trips_to_the_nanosecond_and_refuses_negative():
    stamp = time_message(12.000000007)
    assert (stamp.sec, stamp.nanosec) == (12, 7)
    assert stamp_seconds(stamp) == pytest.approx(12.000000007, abs=1e-12)
    with pytest.raises(MessageError, match=">= 0"):
        time_message(-1.0)
    with pytest.raises(MessageError, match="finite"):
        time_message(float("nan"))


def test_float64_array_round_trip_and_size_check():
    message = float64_array_message(np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(float64_array_values(message, size=4), [1, 2, 3, 4])
    with pytest.raises(MessageError, match="holds 4 value.*expected 7"):
        float64_array_values(message, size=7)


def test_polygon_keypoints_round_trip_and_wrong_count():
    points = np.array([[0.0, 1.0], [2.0, 3.5], [4.0, -1.0]])
    message = polygon_message(points, stamp=2.0, frame_id="camera")
    np.testing.assert_allclose(polygon_points(message, count=3), points)
    np.testing.assert_allclose(polygon_points(message, dims=3)[:, 2], 0.0)
    assert stamp_seconds(message.header.stamp) == 2.0
    assert message.header.frame_id == "camera"
    with pytest.raises(MessageError, match="holds 3 point.*expected 6"):
        polygon_points(message, count=6)
    with pytest.raises(MessageError, match=r"\(n, 2\) or \(n, 3\)"):
        polygon_message(np.zeros((3, 4)), stamp=0.0)


def test_deserialize_accepts_trailing_bytes_only_when_asked():
    message = joint_state_message(JOINTS, stamp=1.0, position=[1, 2, 3, 4])
    data = bytes(typestore().serialize_cdr(message, "sensor_msgs/msg/JointState"))
    with pytest.raises(MessageError, match="8 bytes follow"):
        deserialize(data + bytes(8), "sensor_msgs/msg/JointState")
    padded = deserialize(data + b"junkjunk", "sensor_msgs/msg/JointState", trailing_bytes=True)
    np.testing.assert_array_equal(joint_sample(padded, JOINTS).position, [1, 2, 3, 4])
    with pytest.raises(MessageError, match="not a CDR-encoded"):
        deserialize(b"\x07\x07" + data[2:], "sensor_msgs/msg/JointState")
    with pytest.raises(MessageError, match="cannot decode"):
        deserialize(data[:20], "sensor_msgs/msg/JointState")
