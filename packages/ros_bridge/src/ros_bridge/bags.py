"""rosbag2 files (``.mcap`` and ``.db3``) read and written with ``rosbags``: no ROS needed.

A bag is a folder with ``metadata.yaml`` and its storage files, as ``ros2 bag record`` writes
it; :func:`read_bag` also opens a single ``.mcap`` or ``.db3`` file. Times in a bag are
integer nanoseconds (``time_ns``); message stamps are seconds (:mod:`ros_bridge.messages`).
Every failure to read (no such path, a truncated or corrupt file, a topic the bag lacks, a
message that does not decode) is a :class:`BagError` that names the bag and the problem.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Reader, ReaderError, StoragePlugin, Writer, WriterError

from .joint_state_cdr import decode_joint_states
from .messages import (
    FLOAT64_ARRAY,
    JOINT_STATE,
    MessageError,
    deserialize,
    float64_array_values,
    typestore,
)

__all__ = [
    "STORAGES",
    "BagError",
    "BagMessage",
    "BagWriter",
    "JointTrajectory",
    "bag_topics",
    "read_bag",
    "read_float64_arrays",
    "read_joint_states",
    "write_bag",
]

STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
"""Storage name (as ``ros2 bag record -s``) -> rosbags' storage plugin."""

# What rosbags and its storage back ends raise on a damaged file or message.
_READ_ERRORS = (ReaderError, sqlite3.Error, struct.error, EOFError, IndexError, KeyError,
                UnicodeDecodeError, ValueError, OSError)


class BagError(ValueError):
    """A bag cannot be read or written as asked."""


@dataclasses.dataclass(frozen=True)
class BagMessage:
    """One message of a bag: its ``topic``, ``msgtype``, receive time ``time_ns`` [ns] and
    the deserialized ``message`` (a class of :func:`ros_bridge.messages.typestore`)."""

    topic: str
    msgtype: str
    time_ns: int
    message: object


class BagWriter:
    """Writes a rosbag2 folder; a context manager (the bag is complete once closed).

    Topics are added on first write. :meth:`write_raw` stores already serialized (CDR)
    bytes untouched, as a recorder must; :meth:`write` serializes a message first.

    Args:
        path: the bag folder to create; it must not exist.
        storage: ``"mcap"`` or ``"sqlite3"`` (``.db3``).
    """

    def __init__(self, path: str | Path, *, storage: str = "mcap"):
        if storage not in STORAGES:
            raise BagError(f"unknown bag storage {storage!r}; use one of {sorted(STORAGES)}")
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"bag {str(self.path)!r} already exists; choose a new folder or "
                           "remove the old bag")
        self._writer = Writer(self.path, version=9, storage_plugin=STORAGES[storage])
        self._connections = {}

    def __enter__(self) -> BagWriter:
        try:
            self._writer.open()
        except WriterError as exc:
            raise BagError(f"cannot create bag {str(self.path)!r}: {exc}") from None
        return self

    def __exit__(self, *exc_info) -> None:
        self._writer.close()

    def _connection(self, topic: str, msgtype: str):
        connection = self._connections.get(topic)
        if connection is None:
            if msgtype not in typestore().types:
                raise BagError(f"unknown message type {msgtype!r} for topic {topic!r}; write "
                               "types like 'sensor_msgs/msg/JointState'")
            connection = self._writer.add_connection(topic, msgtype, typestore=typestore())
            self._connections[topic] = connection
        elif connection.msgtype != msgtype:
            raise BagError(f"topic {topic!r} holds {connection.msgtype}; cannot also write "
                           f"{msgtype} to it")
        return connection

    def write_raw(self, topic: str, msgtype: str, time_ns: int, data: bytes) -> None:
        """Store serialized (CDR) ``data`` of ``msgtype`` on ``topic`` at ``time_ns`` [ns]."""
        self._writer.write(self._connection(topic, msgtype), int(time_ns), data)

    def write(self, topic: str, msgtype: str, time_ns: int, message) -> None:
        """Serialize ``message`` (a class of the typestore) and store it like
        :meth:`write_raw`."""
        connection = self._connection(topic, msgtype)  # an unknown type fails here, named
        self._writer.write(connection, int(time_ns), typestore().serialize_cdr(message, msgtype))


def write_bag(path: str | Path, messages: Iterable[tuple[str, str, int, object]], *,
              storage: str = "mcap") -> Path:
    """Write ``(topic, msgtype, time_ns, message)`` tuples to a new bag folder ``path``."""
    with BagWriter(path, storage=storage) as writer:
        for topic, msgtype, time_ns, message in messages:
            writer.write(topic, msgtype, time_ns, message)
    return Path(path)


def _open(path: str | Path) -> Reader:
    path = Path(path)
    if not path.exists():
        raise BagError(f"bag {str(path)!r} not found; give a rosbag2 folder (with "
                       "metadata.yaml) or one .mcap or .db3 file")
    try:
        reader = Reader(path)
        reader.open()
    except _READ_ERRORS as exc:
        raise BagError(f"cannot open bag {str(path)!r}: {exc}; the file is truncated, "
                       "corrupt or not a rosbag2 bag") from None
    return reader


def bag_topics(path: str | Path) -> dict[str, str]:
    """The bag's topics: ``topic -> msgtype``."""
    reader = _open(path)
    try:
        return {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()


def _read_raw(path: str | Path, topics: Sequence[str] | None,
              decode: Callable[[bytes, str], object]) -> Iterator[BagMessage]:
    """The messages of ``topics`` (default: all) in receive-time order, each message
    ``decode(raw, msgtype)`` (the CDR bytes themselves when it returns them)."""
    reader = _open(path)
    try:
        present = {c.topic: c.msgtype for c in reader.connections}
        missing = [t for t in topics or () if t not in present]
        if missing:
            raise BagError(f"bag {str(path)!r} has no topic(s) {missing}; it has "
                           f"{sorted(present) or 'no topics'}")
        wanted = [c for c in reader.connections if topics is None or c.topic in topics]
        index = 0
        try:
            for connection, time_ns, raw in reader.messages(connections=wanted):
                yield BagMessage(connection.topic, connection.msgtype, time_ns,
                                 decode(raw, connection.msgtype))
                index += 1
        except _READ_ERRORS as exc:
            raise BagError(f"bag {str(path)!r} is damaged after {index} message(s): {exc}; "
                           "re-record it or cut it before the damage") from None
    finally:
        reader.close()


def read_bag(path: str | Path, topics: Sequence[str] | None = None) -> Iterator[BagMessage]:
    """The messages of ``topics`` (default: all) in receive-time order, deserialized.

    Raises:
        BagError: the bag is missing, corrupt or truncated, lacks one of ``topics`` (its
            topics are listed), or holds a message that does not decode.
    """
    return _read_raw(path, topics, deserialize)


@dataclasses.dataclass(frozen=True)
class JointTrajectory:
    """Joint states of one topic, in the caller's joint order.

    Attributes:
        time: sample times [s], shape (N,), strictly increasing.
        position, velocity, effort: shape (N, n) each, NaN where a message had no such field.
    """

    time: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def _check_increasing(where: str, time: np.ndarray) -> None:
    back = np.flatnonzero(np.diff(time) <= 0)
    if back.size:
        i = int(back[0])
        raise BagError(f"{where}: stamps are out of order at message {i + 1} "
                       f"({time[i + 1]:.9f} s after {time[i]:.9f} s); sort the bag or use "
                       "the receive times (stamps: bag)")


def _check_stamps(stamps: str) -> None:
    if stamps not in ("header", "bag"):
        raise BagError(f"stamps must be 'header' (the message's) or 'bag' (receive time), got "
                       f"{stamps!r}")


def read_joint_states(path: str | Path, topic: str, joints: Sequence[str], *,
                      stamps: str = "header") -> JointTrajectory:
    """The ``joints`` of every ``sensor_msgs/JointState`` on ``topic``, matched by name.

    Args:
        stamps: ``"header"`` (the messages' stamps) or ``"bag"`` (receive times).

    Raises:
        BagError: as :func:`read_bag`; the topic holds another type, no messages, a message
            without one of ``joints`` (naming the message), or stamps out of order.
    """
    _check_stamps(stamps)
    where = f"bag {str(path)!r}, topic {topic!r}"
    items = list(_read_raw(path, [topic], lambda raw, msgtype: raw))
    for item in items:
        if item.msgtype != JOINT_STATE:
            raise BagError(f"{where} holds {item.msgtype}, not {JOINT_STATE}")
    if not items:
        raise BagError(f"{where} holds no messages")
    try:  # one driver repeats one layout: decoded in bulk (benchmarks/bag_ingest.py)
        arrays = decode_joint_states([item.message for item in items], joints)
    except MessageError as exc:
        raise BagError(f"{where}, {exc}") from None
    time = arrays.stamp if stamps == "header" else np.array(
        [item.time_ns * 1e-9 for item in items])
    _check_increasing(where, time)
    return JointTrajectory(time=time, position=arrays.position, velocity=arrays.velocity,
                           effort=arrays.effort)


def read_float64_arrays(path: str | Path, topic: str, size: int) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """Receive times [s], shape (N,), and values, shape (N, size), of the
    ``std_msgs/Float64MultiArray`` messages on ``topic`` (Float64MultiArray has no stamp).

    Raises:
        BagError: as :func:`read_bag`; another type, no messages, a message of another size.
    """
    where = f"bag {str(path)!r}, topic {topic!r}"
    times, rows = [], []
    for index, item in enumerate(read_bag(path, [topic])):
        if item.msgtype != FLOAT64_ARRAY:
            raise BagError(f"{where} holds {item.msgtype}, not {FLOAT64_ARRAY}")
        try:
            rows.append(float64_array_values(item.message, size=size))
        except MessageError as exc:
            raise BagError(f"{where}, message {index}: {exc}") from None
        times.append(item.time_ns * 1e-9)
    if not rows:
        raise BagError(f"{where} holds no messages")
    return np.array(times), np.stack(rows)
