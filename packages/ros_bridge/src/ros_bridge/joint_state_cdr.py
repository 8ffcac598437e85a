"""Bulk decoding of serialized ``sensor_msgs/JointState`` messages straight into arrays.

A robot driver publishes the same joints, with the same frame id, in every message, so the
CDR bytes of its joint states share one layout: the stamp at bytes 4-12, the names at fixed
offsets and each of position, velocity and effort at a fixed offset. Messages whose bytes
between the stamp and the first array match (same frame id, same names: the *prefix*) are
decoded together with NumPy views of one stacked buffer, instead of one Python object per
message. The layout is derived from the CDR rules (little-endian, each primitive aligned to
its size from the start of the payload after the 4-byte encapsulation header).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence

import numpy as np

from .messages import JointNameError, MessageError, joint_indices

__all__ = ["JointStateArrays", "decode_joint_states"]

_HEADER = 4  # CDR encapsulation header
_LITTLE_ENDIAN = (b"\x00\x01", b"\x00\x03")


@dataclasses.dataclass(frozen=True)
class JointStateArrays:
    """Joint states of N messages, joints in the caller's order.

    Attributes:
        stamp: header stamps [s], shape (N,).
        position, velocity, effort: shape (N, n) each; NaN where a message left a field empty.
    """

    stamp: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def _align(offset: int, size: int) -> int:
    return offset + (-offset) % size


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where things are in the serialized messages of one driver (offsets include the
    encapsulation header): the bytes between the stamp and the first array (``prefix``),
    the byte offset of each array's length word (``count_at``), of its data (``data_at``)
    and its length (``sizes``), and the message ``length``."""

    prefix: bytes
    count_at: tuple[int, int, int]
    data_at: tuple[int, int, int]
    sizes: tuple[int, int, int]
    length: int
    columns: np.ndarray

    def matches(self, data) -> bool:
        """Whether ``data`` has this layout as far as the cheap per-message check sees (its
        length and prefix); the array length words are checked in bulk."""
        return len(data) == self.length and data[12:12 + len(self.prefix)] == self.prefix


def _layout(data: bytes, joints: Sequence[str], index: int) -> _Layout:
    """Parse one message's layout; errors name message ``index``."""
    unpack = struct.unpack_from
    try:
        at = _HEADER + 8  # after sec (int32) and nanosec (uint32)
        (length,) = unpack("<I", data, at)
        at = _aligned(at + 4 + length)
        (count,) = unpack("<I", data, at)
        at += 4
        names = []
        for _ in range(count):
            at = _aligned(at)
            (length,) = unpack("<I", data, at)
            names.append(bytes(data[at + 4:at + 3 + length]).decode())
            at += 4 + length
        prefix = bytes(data[12:at])
        count_at, data_at, sizes = [], [], []
        for field in ("position", "velocity", "effort"):
            at = _aligned(at)
            (size,) = unpack("<I", data, at)
            if size not in (0, count):
                raise MessageError(f"message {index}: {field} has {size} value(s) for {count} "
                                   "joint(s)")
            count_at.append(at)
            at += 4
            if size:
                at = _aligned(at, 8)
            data_at.append(at)
            sizes.append(size)
            at += 8 * size
    except (struct.error, UnicodeDecodeError) as exc:
        raise MessageError(f"message {index} ({len(data)} bytes) is cut short or not a "
                           f"JointState: {exc}") from None
    if at > len(data):
        raise MessageError(f"message {index} ({len(data)} bytes) is cut short: its arrays end "
                           f"at byte {at}")
    try:
        columns = joint_indices(names, joints)
    except JointNameError as exc:
        raise JointNameError(f"message {index}: {exc}") from None
    return _Layout(prefix, tuple(count_at), tuple(data_at), tuple(sizes), len(data), columns)


def _aligned(offset: int, size: int = 4) -> int:
    """``offset`` (header included) rounded up to CDR's alignment of ``size`` bytes."""
    return _HEADER + _align(offset - _HEADER, size)


def decode_joint_states(raws: Sequence[bytes], joints: Sequence[str]) -> JointStateArrays:
    """The ``joints`` of serialized (CDR) ``sensor_msgs/JointState`` messages, by name.

    Messages are grouped by layout (same length, frame id, names and array lengths); each
    group is decoded from one stacked byte buffer. Big-endian messages (rare: ROS 2
    middlewares write little-endian) are refused.

    Args:
        raws: serialized messages, as a bag or a raw subscription holds them.
        joints: the joints to pick, in the output's column order.

    Raises:
        JointNameError: a message lacks one of ``joints`` or names one twice (the error
            names the message's index).
        MessageError: a message that is not little-endian CDR, is cut short, or has a field
            whose length differs from the names'.
    """
    count, n = len(raws), len(joints)
    stamp = np.empty(count)
    arrays = [np.full((count, n), np.nan) for _ in range(3)]
    layouts: list[_Layout] = []
    members: list[list[int]] = []
    pending, parse = list(range(count)), False
    while pending:
        retry = []
        for index in pending:
            data = raws[index]
            if data[:2] not in _LITTLE_ENDIAN:
                raise MessageError(f"message {index} is not little-endian CDR; decode it with "
                                   "ros_bridge.messages.deserialize")
            # the latest layout first: a driver's messages repeat it; a message whose array
            # lengths disagreed with its matching layout is parsed in full (``parse``)
            if not parse and layouts and layouts[-1].matches(data):
                members[-1].append(index)
            else:
                found = [i for i, lay in enumerate(layouts) if lay.matches(data)]
                if found and not parse:
                    members[found[-1]].append(index)
                else:
                    layouts.append(_layout(data, joints, index))
                    members.append([index])
        for layout, rows in zip(layouts, members, strict=True):
            block = np.frombuffer(b"".join(raws[i] for i in rows),
                                  dtype=np.uint8).reshape(len(rows), layout.length)
            agree = np.ones(len(rows), dtype=bool)
            for at, size in zip(layout.count_at, layout.sizes, strict=True):
                agree &= block[:, at:at + 4].copy().view("<u4")[:, 0] == size
            retry += [rows[i] for i in np.flatnonzero(~agree)]
            rows_ok = np.asarray(rows)[agree]
            block = block[agree]
            stamp[rows_ok] = (block[:, 4:8].copy().view("<i4")[:, 0]
                              + 1e-9 * block[:, 8:12].copy().view("<u4")[:, 0])
            for array, at, size in zip(arrays, layout.data_at, layout.sizes, strict=True):
                if size:
                    values = block[:, at:at + 8 * size].copy().view("<f8")
                    array[rows_ok] = values[:, layout.columns]
            rows[:] = []
        pending, parse = retry, True
    return JointStateArrays(stamp, *arrays)
