"""Live topics over a time window into a new bag: the data of ``identify --live``.

The window opens with the first message received on any of the topics and closes
``duration`` seconds of ROS time later (the recording node's clock: the system clock, or
/clock under ``use_sim_time``); messages received after it closes are not written. Waiting
for that first message is bounded by ``wait`` seconds of wall-clock time. Messages are
stored as the ``recorder`` node stores them (raw CDR bytes, receive times as bag times,
through :class:`~ros_bridge.nodes.window_recorder.WindowRecorderNode`).

The bag appears at its path only once complete: it is written in a hidden folder beside it
(``.NAME.*.recording``) and renamed when the window has closed; on any failure (nothing
arrived, Ctrl-C) that folder is removed. Importing this module never needs ROS; recording
imports rclpy (the ``ros`` extra).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .bags import STORAGES
from .messages import JOINT_STATE

__all__ = ["LiveRecordingError", "LiveWindow", "record_window"]

ROS_EXTRA_HINT = ("pip install 'ros_bridge[ros]' (Linux x86_64) into an environment of its "
                  "own, e.g. the .venv-ros that `python3 dev.py test` makes (README, \"ROS\")")


class LiveRecordingError(RuntimeError):
    """A live recording could not be made: no rclpy, nothing received, or its bag exists."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LiveWindow:
    """What to record live and for how long.

    Args:
        topics: topic names, e.g. ``("/joint_states",)``.
        types: one message type per topic, e.g. ``("sensor_msgs/msg/JointState",)``.
        duration: the window [s of ROS time] from the first message; positive.
        wait: how long [s, wall clock] to wait for the first message; positive.
        storage: the bag's storage, ``mcap`` or ``sqlite3``.
    """

    duration: float
    topics: tuple[str, ...] = ("/joint_states",)
    types: tuple[str, ...] = (JOINT_STATE,)
    wait: float = 5.0
    storage: str = "mcap"

    def __post_init__(self):
        for name in ("duration", "wait"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"--{name} must be a positive, finite number of seconds, got "
                                 f"{value!r}")
        if not self.topics:
            raise ValueError("name at least one topic to record (--topics /joint_states)")
        if len(self.topics) != len(self.types):
            raise ValueError(f"give one message type per topic: {len(self.topics)} topic(s) "
                             f"{list(self.topics)} but {len(self.types)} type(s) "
                             f"{list(self.types)} (--types sensor_msgs/msg/JointState ...)")
        if self.storage not in STORAGES:
            raise ValueError(f"unknown bag storage {self.storage!r}; use one of "
                             f"{sorted(STORAGES)}")


def _window_recorder_module():
    """:mod:`ros_bridge.nodes.window_recorder`, or LiveRecordingError naming the ros extra
    where rclpy is missing."""
    try:
        importlib.import_module("rclpy")
    except ImportError:
        raise LiveRecordingError(f"live mode needs the ros extra (rclpy): {ROS_EXTRA_HINT}; "
                                 "or record a bag with the recorder node and pass --bag "
                                 "without --live") from None
    return importlib.import_module(".nodes.window_recorder", __package__)


def _domain_hint(context) -> str:
    return (f"check that the publisher runs, publishes that type, and shares this "
            f"ROS_DOMAIN_ID ({context.get_domain_id()}; the environment's "
            f"{os.environ.get('ROS_DOMAIN_ID', 'unset: 0')})")


def _quiet(message: str) -> None:
    """The default ``log``: say nothing."""


def record_window(bag: str | Path, window: LiveWindow, *, context=None,
                  log: Callable[[str], None] | None = None) -> dict[str, int]:
    """Record ``window``'s topics into the new bag folder ``bag``; return the messages
    written per topic.

    ``context`` is an initialized rclpy context to record in (default: one of its own,
    shut down afterwards); ``log`` hears when it waits and when the window opens. Raises
    LiveRecordingError where rclpy is missing, ``bag`` exists, no message arrives within
    ``window.wait`` or a topic gets none in the window; then no bag is left behind.
    """
    bag = Path(bag)
    if bag.exists():
        raise LiveRecordingError(f"bag {str(bag)!r} already exists; choose another --bag or "
                                 "delete it")
    window_recorder = _window_recorder_module()
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    own_context = context is None
    if own_context:
        context = rclpy.Context()
        # rclpy's SIGINT handler would shut the context down under the loop: Ctrl-C is a
        # KeyboardInterrupt here, and the finally blocks clean up
        rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    bag.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{bag.name}.", suffix=".recording",
                                    dir=bag.parent))
    try:
        node = window_recorder.WindowRecorderNode(
            duration=window.duration, context=context, parameter_overrides=[
                Parameter("topics", value=list(window.topics)),
                Parameter("types", value=list(window.types)),
                # the bag's files are named after its folder: the same name as the final one
                Parameter("output", value=str(staging / bag.name)),
                Parameter("storage", value=window.storage)])
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        try:
            _spin_window(executor, node, window, context, log or _quiet, bag)
        finally:
            node.close()
            executor.shutdown()
            node.destroy_node()
        silent = [topic for topic, count in node.counts.items() if count == 0]
        if silent:
            raise LiveRecordingError(
                f"no message arrived on {silent} in the {window.duration:g} s window (counts "
                f"{node.counts}); {_domain_hint(context)}")
        (staging / bag.name).rename(bag)
        return dict(node.counts)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if own_context:
            rclpy.try_shutdown(context=context)


def _spin_window(executor, node, window: LiveWindow, context, log, bag: Path) -> None:
    """Spin until ``node``'s window has closed; LiveRecordingError if no message arrives
    within ``window.wait`` seconds."""
    log(f"recording into {str(bag)!r}: waiting up to {window.wait:g} s for the first "
        f"message on {list(window.topics)}")
    deadline = time.monotonic() + window.wait
    while node.window_start_ns is None:
        if time.monotonic() > deadline:
            raise LiveRecordingError(
                f"no message arrived on {list(window.topics)} within --wait {window.wait:g} "
                f"s; {_domain_hint(context)}, or wait longer")
        executor.spin_once(timeout_sec=0.01)
    log(f"recording for {window.duration:g} s from the first message")
    while not node.window_closed():
        executor.spin_once(timeout_sec=0.01)
