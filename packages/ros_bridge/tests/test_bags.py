"""rosbag2 files: round trips in both storages, raw writes, damaged and incomplete bags."""

import shutil

import numpy as np
import pytest

from ros_bridge.bags import (
    BagError,
    BagWriter,
    bag_topics,
    read_bag,
    read_float64_arrays,
    read_joint_states,
    write_bag,
)
from ros_bridge.messages import (
    FLOAT64_ARRAY,
    JOINT_STATE,
    float64_array_message,
    joint_state_message,
    typestore,
)

JOINTS = ["j0", "j1", "j2"]


def joint_messages(count=20, *, shuffle=True):
    rng = np.random.default_rng(0)
    for i in range(count):
        order = rng.permutation(3) if shuffle else np.arange(3)
        names = [JOINTS[k] for k in order]
        position = np.array([i + 0.1 * k for k in order])
        yield ("/joint_states", JOINT_STATE, 10**7 * i,
               joint_state_message(names, stamp=0.01 * i, position=position,
                                   velocity=-position))
        yield ("/effort/commands", FLOAT64_ARRAY, 10**7 * i + 1,
               float64_array_message([i, 2 * i, 3 * i]))


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_round_trip_by_joint_name(tmp_path, storage):
    bag = write_bag(tmp_path / "bag", joint_messages(), storage=storage)
    suffix = {"mcap": ".mcap", "sqlite3": ".db3"}[storage]
    assert [p.suffix for p in bag.iterdir() if p.suffix != ".yaml"] == [suffix]
    assert bag_topics(bag) == {"/joint_states": JOINT_STATE, "/effort/commands": FLOAT64_ARRAY}
    trajectory = read_joint_states(bag, "/joint_states", JOINTS)
    expected = np.arange(20)[:, None] + 0.1 * np.arange(3)[None, :]
    np.testing.assert_allclose(trajectory.position, expected)
    np.testing.assert_allclose(trajectory.velocity, -expected)
    assert np.all(np.isnan(trajectory.effort))
    np.testing.assert_allclose(trajectory.time, 0.01 * np.arange(20))
    times, values = read_float64_arrays(bag, "/effort/commands", 3)
    np.testing.assert_allclose(values[:, 2], 3 * np.arange(20))
    np.testing.assert_allclose(times, 0.01 * np.arange(20) + 1e-9)
    # a single storage file opens as well as the folder
    single = next(p for p in bag.iterdir() if p.suffix == suffix)
    assert len(list(read_bag(single, ["/joint_states"]))) == 20


def test_raw_bytes_are_stored_untouched(tmp_path):
    message = joint_state_message(JOINTS, stamp=1.0, position=[1, 2, 3])
    data = bytes(typestore().serialize_cdr(message, JOINT_STATE))
    with BagWriter(tmp_path / "raw") as writer:
        writer.write_raw("/joint_states", JOINT_STATE, 5, data)
        with pytest.raises(BagError, match="holds sensor_msgs/msg/JointState"):
            writer.write_raw("/joint_states", FLOAT64_ARRAY, 6, data)
    (item,) = read_bag(tmp_path / "raw")
    assert item.time_ns == 5
    assert bytes(typestore().serialize_cdr(item.message, JOINT_STATE)) == data


def test_existing_bag_and_unknown_storage_are_refused(tmp_path):
    write_bag(tmp_path / "bag", joint_messages(2))
    with pytest.raises(BagError, match="already exists"):
        BagWriter(tmp_path / "bag")
    with pytest.raises(BagError, match="unknown bag storage 'zip'"):
        BagWriter(tmp_path / "other", storage="zip")
    with pytest.raises(BagError, match="unknown message type"):
        write_bag(tmp_path / "third", [("/x", "nope_msgs/msg/X", 0, None)])


def test_missing_bag_and_missing_topic(tmp_path):
    with pytest.raises(BagError, match="not found"):
        bag_topics(tmp_path / "nothing")
    bag = write_bag(tmp_path / "bag", joint_messages(2))
    with pytest.raises(BagError, match=r"no topic\(s\) \['/joint_state'\].*'/joint_states'"):
        read_joint_states(bag, "/joint_state", JOINTS)
    with pytest.raises(BagError, match="holds std_msgs/msg/Float64MultiArray"):
        read_joint_states(bag, "/effort/commands", JOINTS)
    with pytest.raises(BagError, match="message 0: .*expected 4"):
        read_float64_arrays(bag, "/effort/commands", 4)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_damaged_bags_get_a_clear_error(tmp_path, storage, damage):
    bag = write_bag(tmp_path / "bag", joint_messages(), storage=storage)
    file = next(p for p in bag.iterdir() if p.suffix in (".mcap", ".db3"))
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"garbage" * 64)
    with pytest.raises(BagError, match="truncated, corrupt|damaged"):
        read_joint_states(bag, "/joint_states", JOINTS)


def test_joint_names_that_do_not_match_name_the_message(tmp_path):
    bag = write_bag(tmp_path / "bag", joint_messages(3))
    with pytest.raises(BagError, match=r"message 0: the joint state has no joint\(s\) \['j9'\]"):
        read_joint_states(bag, "/joint_states", ["j0", "j9"])


def test_out_of_order_stamps_are_refused_or_replaced_by_receive_times(tmp_path):
    messages = [("/joint_states", JOINT_STATE, 10**7 * i,
                 joint_state_message(JOINTS, stamp=stamp, position=[i, i, i]))
                for i, stamp in enumerate([0.0, 0.02, 0.01, 0.03])]
    bag = write_bag(tmp_path / "bag", messages)
    with pytest.raises(BagError, match="out of order at message 2"):
        read_joint_states(bag, "/joint_states", JOINTS)
    trajectory = read_joint_states(bag, "/joint_states", JOINTS, stamps="bag")
    np.testing.assert_allclose(trajectory.time, [0.0, 0.01, 0.02, 0.03])
    with pytest.raises(BagError, match="stamps must be"):
        read_joint_states(bag, "/joint_states", JOINTS, stamps="wall")


def test_copy_of_a_bag_folder_reads_the_same(tmp_path):
    bag = write_bag(tmp_path / "bag", joint_messages(5), storage="sqlite3")
    shutil.copytree(bag, tmp_path / "copy")
    a = read_joint_states(bag, "/joint_states", JOINTS)
    b = read_joint_states(tmp_path / "copy", "/joint_states", JOINTS)
    np.testing.assert_array_equal(a.position, b.position)
