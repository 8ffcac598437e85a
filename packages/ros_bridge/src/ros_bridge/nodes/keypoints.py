"""``keypoints``: ``sensor_msgs/Image`` or ``sensor_msgs/CompressedImage`` in,
``geometry_msgs/PolygonStamped`` out with the image's stamp and frame, through a keypoint
extractor chosen by plugin (the core's ``codesign_register_keypoint_extractors`` hook;
sim_vine registers ``vine_centerline``).

Parameters: ``extractor`` (its registered name), ``options`` (its options as a JSON
object), ``image_topic`` (default /image), ``compressed`` (default false: the topic carries
CompressedImage, e.g. image_transport's /image/compressed; decoding needs OpenCV, the
``images`` extra), ``output_topic`` (default /keypoints). An image in which the extractor
finds nothing (NaN keypoints) publishes nothing and is logged; one that does not decode is
skipped and logged.
"""

from __future__ import annotations

import json

import numpy as np
from rclpy.node import Node
from rclpy.parameter import Parameter

from codesign.plugins import get_registry

from ..images import COMPRESSED_IMAGE, IMAGE, compressed_image_bgr, image_bgr
from ..messages import POLYGON_STAMPED, MessageError, polygon_message, stamp_seconds
from ..rclpy_adapter import from_rclpy, rclpy_class, to_rclpy
from ._params import required_parameter
from ._spin import run_node

__all__ = ["KeypointsNode", "main"]


class KeypointsNode(Node):
    """The keypoint node; ``registry`` (default: every installed plugin's) supplies the
    extractor."""

    def __init__(self, *, registry=None, **node_options):
        super().__init__("keypoints", **node_options)
        name = required_parameter(self, "extractor", Parameter.Type.STRING)
        options = json.loads(self.declare_parameter("options", "{}").value)
        if not isinstance(options, dict):
            raise ValueError(f"the extractor options must be a mapping, got {options!r}")
        factory = (registry or get_registry()).get("keypoint_extractors", name).factory
        self.extract = factory(**options)
        self.publisher = self.create_publisher(
            rclpy_class(POLYGON_STAMPED),
            self.declare_parameter("output_topic", "/keypoints").value, 10)
        compressed = bool(self.declare_parameter("compressed", False).value)
        self.kind, self.decode = ((COMPRESSED_IMAGE, compressed_image_bgr) if compressed
                                  else (IMAGE, image_bgr))
        self.create_subscription(rclpy_class(self.kind),
                                 self.declare_parameter("image_topic", "/image").value,
                                 self._image, 10)

    def _image(self, message) -> None:
        image = from_rclpy(message, self.kind)
        try:
            points = np.asarray(self.extract(self.decode(image)), dtype=np.float64)
        except MessageError as exc:
            self.get_logger().error(f"image skipped: {exc}")
            return
        if np.isnan(points).any():
            self.get_logger().warning("no keypoints in this image")
            return
        self.publisher.publish(to_rclpy(polygon_message(
            points, stamp=stamp_seconds(image.header.stamp), frame_id=image.header.frame_id),
            POLYGON_STAMPED))

    def close(self) -> None:
        """Nothing to release."""


def main(argv: list[str] | None = None) -> int:
    """Console script ``keypoints``."""
    return run_node(KeypointsNode, argv)
