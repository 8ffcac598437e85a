"""``recorder``: raw (serialized) subscriptions written straight into a rosbag2 bag.

Each message's CDR bytes go to :meth:`ros_bridge.bags.BagWriter.write_raw` untouched (never
deserialized and serialized again), stamped with the receive time.

Parameters: ``topics`` and ``types`` (string arrays of equal length, e.g.
``[/joint_states]`` and ``[sensor_msgs/msg/JointState]``), ``output`` (a new bag folder),
``storage`` (``mcap`` or ``sqlite3``).
"""

from __future__ import annotations

from rclpy.node import Node
from rclpy.parameter import Parameter

from ..bags import BagWriter
from ..rclpy_adapter import rclpy_class
from ._params import required_parameter
from ._spin import run_node

__all__ = ["RecorderNode", "main"]


class RecorderNode(Node):
    """Records its topics until ``close()``, which completes the bag."""

    def __init__(self, **node_options):
        super().__init__("recorder", **node_options)
        topics = list(required_parameter(self, "topics", Parameter.Type.STRING_ARRAY))
        types = list(required_parameter(self, "types", Parameter.Type.STRING_ARRAY))
        if len(topics) != len(types):
            raise ValueError(f"give one type per topic: {len(topics)} topic(s) {topics} but "
                             f"{len(types)} type(s) {types}")
        output = required_parameter(self, "output", Parameter.Type.STRING)
        self.writer = BagWriter(output, storage=self.declare_parameter("storage", "mcap").value)
        self.writer.__enter__()
        self.count = 0
        for topic, msgtype in zip(topics, types, strict=True):
            self.create_subscription(rclpy_class(msgtype), topic, self._writer_of(topic, msgtype),
                                     100, raw=True)

    def _writer_of(self, topic: str, msgtype: str):
        def write(data: bytes) -> None:
            self.writer.write_raw(topic, msgtype, self.get_clock().now().nanoseconds, data)
            self.count += 1

        return write

    def close(self) -> None:
        """Complete the bag (its metadata is written on close)."""
        self.writer.__exit__(None, None, None)


def main(argv: list[str] | None = None) -> int:
    """Console script ``recorder``."""
    return run_node(RecorderNode, argv)
