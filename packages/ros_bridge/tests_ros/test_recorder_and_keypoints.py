"""The recorder writes the bytes it receives untouched; the keypoint node publishes a
plugin extractor's keypoints with the image's stamp."""


import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from codesign.hookspecs import hookimpl
from codesign.plugins import get_plugin_manager, get_registry
from ros_bridge.bags import read_joint_states
from ros_bridge.images import COMPRESSED_IMAGE, IMAGE
from ros_bridge.messages import (
    JOINT_STATE,
    POLYGON_STAMPED,
    joint_state_message,
    polygon_points,
    typestore,
)
from ros_bridge.nodes.keypoints import KeypointsNode
from ros_bridge.nodes.recorder import RecorderNode
from ros_bridge.rclpy_adapter import from_rclpy, rclpy_class, to_rclpy


def test_the_recorder_stores_received_joint_states_in_a_bag(tmp_path, spin_until):
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=76)
    try:
        recorder = RecorderNode(context=context, parameter_overrides=[
            Parameter("topics", value=["/joint_states"]),
            Parameter("types", value=[JOINT_STATE]),
            Parameter("output", value=str(tmp_path / "bag"))])
        sender = rclpy.create_node("sender", context=context)
        publisher = sender.create_publisher(rclpy_class(JOINT_STATE), "/joint_states", 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(recorder)
        executor.add_node(sender)
        stamp = [1.0]

        def publish_until_recorded():
            publisher.publish(to_rclpy(joint_state_message(["a", "b"], stamp=stamp[0],
                                                           position=[stamp[0], -stamp[0]]),
                                       JOINT_STATE))
            stamp[0] += 0.01
            return recorder.count >= 5

        assert spin_until(executor, publish_until_recorded)
        recorder.close()
        executor.shutdown()
    finally:
        rclpy.shutdown(context=context)
    trajectory = read_joint_states(tmp_path / "bag", "/joint_states", ["b", "a"])
    assert len(trajectory.time) >= 5
    np.testing.assert_allclose(trajectory.position[:, 0], -trajectory.position[:, 1])


class BrightestPixel:
    """A test plugin: the keypoint is the brightest pixel, then its mirror image."""

    CODESIGN_API = (1, 1)

    @staticmethod
    @hookimpl
    def codesign_register_keypoint_extractors(register):
        def factory(*, scale: float):
            def extract(image):
                y, x = np.unravel_index(np.argmax(image.sum(axis=2)), image.shape[:2])
                return scale * np.array([[x, y], [y, x]], dtype=float)
            return extract
        register("brightest", factory)


@pytest.mark.parametrize("compressed", [False, True])
def test_the_keypoint_node_publishes_the_extractors_points_with_the_image_stamp(spin_until,
                                                                              compressed):
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(BrightestPixel, name="brightest")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=77)
    kind = COMPRESSED_IMAGE if compressed else IMAGE
    try:
        node = KeypointsNode(registry=get_registry(manager), context=context,
                             parameter_overrides=[Parameter("extractor", value="brightest"),
                                                  Parameter("options", value='{"scale": 0.5}'),
                                                  Parameter("compressed", value=compressed)])
        camera = rclpy.create_node("camera", context=context)
        publisher = camera.create_publisher(rclpy_class(kind), "/image", 10)
        got = []
        camera.create_subscription(rclpy_class(POLYGON_STAMPED), "/keypoints",
                                   lambda m: got.append(from_rclpy(m, POLYGON_STAMPED)), 10)
        pixels = np.zeros((4, 6, 3), np.uint8)
        pixels[3, 5] = 255
        store = typestore()
        header = store.types["std_msgs/msg/Header"](
            stamp=store.types["builtin_interfaces/msg/Time"](sec=7, nanosec=250_000_000),
            frame_id="camera")
        if compressed:  # PNG: lossless, so the brightest pixel stays where it was
            import cv2

            png = cv2.imencode(".png", pixels)[1].reshape(-1)
            image = store.types[kind](header=header, format="png", data=png)
        else:
            image = store.types[kind](header=header, height=4, width=6, encoding="rgb8",
                                      is_bigendian=0, step=18, data=pixels.reshape(-1))
        message = to_rclpy(image, kind)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(camera)

        def publish_until_answered():
            publisher.publish(message)
            return bool(got)

        assert spin_until(executor, publish_until_answered)
        executor.shutdown()
    finally:
        rclpy.shutdown(context=context)
    assert (got[0].header.stamp.sec, got[0].header.stamp.nanosec) == (7, 250_000_000)
    assert got[0].header.frame_id == "camera"
    np.testing.assert_allclose(polygon_points(got[0], count=2), [[2.5, 1.5], [1.5, 2.5]])
