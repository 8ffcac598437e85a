"""A recorder over a time window: ``identify --live``'s node (not a console script).

The window opens with the first message received on any of the recorder's topics and
closes ``duration`` seconds of ROS time later (the node's clock: the system clock, or
/clock under ``use_sim_time``); a message received after it closes is not written.
"""

from __future__ import annotations

from .recorder import RecorderNode

__all__ = ["WindowRecorderNode"]


class WindowRecorderNode(RecorderNode):
    """:class:`RecorderNode` (same parameters, same raw writes) that keeps only the
    messages received in its window of ``duration`` [s]; ``counts`` holds the messages
    written per topic, ``window_start_ns`` the window's opening [ns of ROS time] (``None``
    until the first message)."""

    def __init__(self, *, duration: float, **node_options):
        self.duration_ns = round(duration * 1e9)
        self.window_start_ns: int | None = None
        self.counts: dict[str, int] = {}  # filled as the base class subscribes
        super().__init__(**node_options)

    def _writer_of(self, topic: str, msgtype: str):
        write = super()._writer_of(topic, msgtype)
        self.counts[topic] = 0

        def write_in_window(data: bytes) -> None:
            now_ns = self.get_clock().now().nanoseconds
            if self.window_start_ns is None:
                self.window_start_ns = now_ns
            if now_ns - self.window_start_ns <= self.duration_ns:
                write(data)
                self.counts[topic] += 1

        return write_in_window

    def window_closed(self) -> bool:
        """Whether ``duration`` has passed since the first message."""
        return (self.window_start_ns is not None
                and self.get_clock().now().nanoseconds - self.window_start_ns
                >= self.duration_ns)
