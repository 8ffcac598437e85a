"""``identify --live``: a robot's joint states recorded over a time window in one process,
fitted as a bag would be; nothing left behind when nothing arrives."""

import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))  # the two_joint test plugin
from test_identify import registry  # noqa: E402
from test_recording_source import DT, EXPERIMENT, JOINTS, TRUTH, simulate  # noqa: E402

from ros_bridge.bags import read_joint_states  # noqa: E402
from ros_bridge.identify import identify_live  # noqa: E402
from ros_bridge.live_recording import LiveRecordingError, LiveWindow, record_window  # noqa: E402
from ros_bridge.messages import JOINT_STATE, joint_state_message  # noqa: E402
from ros_bridge.rclpy_adapter import rclpy_class, to_rclpy  # noqa: E402

DOMAIN_ID = 79  # this module's DDS domain (the context fixture's)
SAMPLES = 121  # 1.2 s of the two-joint truth at 100 Hz


class TwoJointRobot:
    """A test robot: publishes the two-joint truth trajectory (``simulate``) as joint states
    every ``DT`` s, from sample 0 once a subscriber is matched, spun in a thread of its
    own as another process would be."""

    def __init__(self, context):
        actions, q, qd = simulate(steps=SAMPLES - 1, seed=0)
        self.messages = [to_rclpy(joint_state_message(
            JOINTS, stamp=1000.0 + k * DT, position=q[k], velocity=qd[k],
            effort=actions[min(k, len(actions) - 1)]), JOINT_STATE) for k in range(SAMPLES)]
        self.sent = 0
        self.node = rclpy.create_node("two_joint_robot", context=context)
        self.publisher = self.node.create_publisher(rclpy_class(JOINT_STATE), "/joint_states",
                                                    100)
        self.node.create_timer(DT, self._tick)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin)

    def _tick(self):
        if self.publisher.get_subscription_count() and self.sent < SAMPLES:
            self.publisher.publish(self.messages[self.sent])
            self.sent += 1

    def _spin(self):
        while not self.stop.is_set():
            self.executor.spin_once(timeout_sec=0.01)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stop.set()
        self.thread.join()
        self.executor.shutdown()
        self.node.destroy_node()


def test_a_live_window_is_fitted_like_a_bag(tmp_path, context):
    experiment = tmp_path / "identify.yaml"
    experiment.write_text(textwrap.dedent(EXPERIMENT))
    with TwoJointRobot(context):
        # a window longer than the 1.2 s published: discovery plus every sample
        fitted = identify_live(experiment, out=tmp_path / "run", design=tmp_path / "fit.npz",
                               window=LiveWindow(duration=2.0, wait=8.0),
                               registry=registry(), context=context, settings={
                                   # the robot's efforts are the actions: no command topic
                                   "identification.recordings.options.topics.commands":
                                       None})
    with np.load(tmp_path / "fit.npz") as saved:
        for name, truth in TRUTH.items():
            np.testing.assert_allclose(saved[name], fitted[name])
            np.testing.assert_allclose(saved[name], truth, rtol=1e-3)
    bag = tmp_path / "run.bag"  # kept beside the run, which names it
    assert len(read_joint_states(bag, "/joint_states", JOINTS).time) == SAMPLES
    assert str(bag) in (tmp_path / "run" / "config.yaml").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "fit.npz", "identify.yaml", "run", "run.bag"]


def test_messages_after_the_window_are_not_recorded(tmp_path, context):
    with TwoJointRobot(context):
        counts = record_window(tmp_path / "bag", LiveWindow(duration=0.3, wait=8.0),
                               context=context)
    receive_times = read_joint_states(tmp_path / "bag", "/joint_states", JOINTS,
                                      stamps="bag").time
    assert counts == {"/joint_states": len(receive_times)}
    assert 1 < len(receive_times) < SAMPLES  # about 30 of the robot's 1.2 s
    # the window is decided on the clock read just before each write
    assert receive_times[-1] - receive_times[0] <= 0.3 + 0.01


def test_nothing_received_is_named_and_leaves_no_bag(tmp_path, context):
    with pytest.raises(LiveRecordingError, match=r"no message arrived on \['/nobody'\] within "
                       r"--wait 0.5 s; check that the publisher runs.*ROS_DOMAIN_ID \(79"):
        record_window(tmp_path / "bag", LiveWindow(topics=("/nobody",), duration=1.0,
                                                   wait=0.5), context=context)
    assert list(tmp_path.iterdir()) == []


def test_a_silent_topic_is_named_and_leaves_no_bag(tmp_path, context):
    window = LiveWindow(topics=("/joint_states", "/effort/commands"),
                        types=(JOINT_STATE, "std_msgs/msg/Float64MultiArray"), duration=0.3,
                        wait=8.0)
    with TwoJointRobot(context), pytest.raises(
            LiveRecordingError, match=r"no message arrived on \['/effort/commands'\] in the "
            r"0.3 s window"):
        record_window(tmp_path / "bag", window, context=context)
    assert list(tmp_path.iterdir()) == []
