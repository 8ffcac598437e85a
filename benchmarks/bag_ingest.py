"""JointState messages per second from a rosbag2 bag to arrays: ros_bridge's bulk CDR decoder
(``ros_bridge.joint_state_cdr``) against rosbags' per-message deserialization, same run.

    .venv/bin/python benchmarks/bag_ingest.py [--messages 50000] [--joints 7] [--storage mcap]

Writes a bag of a 7-joint arm's joint states (plus a gripper, names shuffled once: one
driver's fixed order), reads its raw bytes once, then times both decoders on them and the
whole path (read + decode). Prints messages/s and the speed-up; the results agree exactly.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Reader

from ros_bridge.bags import BagWriter
from ros_bridge.joint_state_cdr import decode_joint_states
from ros_bridge.messages import JOINT_STATE, joint_sample, joint_state_message, typestore


def write(path: Path, count: int, joints: list[str], storage: str) -> None:
    names = [*joints, "gripper"][::-1]
    rng = np.random.default_rng(0)
    with BagWriter(path, storage=storage) as writer:
        for k in range(count):
            values = rng.normal(size=(3, len(names)))
            writer.write_raw("/joint_states", JOINT_STATE, k * 2_000_000, bytes(
                typestore().serialize_cdr(joint_state_message(
                    names, stamp=k * 0.002, position=values[0], velocity=values[1],
                    effort=values[2]), JOINT_STATE)))


def raw_messages(path: Path) -> list[bytes]:
    with Reader(path) as reader:
        return [bytes(raw) for _, _, raw in reader.messages()]


def per_message(raws, joints):
    samples = [joint_sample(typestore().deserialize_cdr(raw, JOINT_STATE), joints)
               for raw in raws]
    return np.stack([s.position for s in samples]), np.stack([s.velocity for s in samples])


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--joints", type=int, default=7)
    parser.add_argument("--storage", default="mcap", choices=["mcap", "sqlite3"])
    args = parser.parse_args()
    joints = [f"joint_{i}" for i in range(args.joints)]
    with tempfile.TemporaryDirectory() as folder:
        bag = Path(folder) / "bag"
        write(bag, args.messages, joints, args.storage)
        raws, read_s = timed(raw_messages, bag)
        (position, velocity), slow_s = timed(per_message, raws, joints)
        bulk, fast_s = timed(decode_joint_states, raws, joints)
    assert np.array_equal(bulk.position, position) and np.array_equal(bulk.velocity, velocity)
    n = len(raws)
    print(f"{n} JointState messages, {args.joints} joints (+1 extra), {args.storage}")
    print(f"read raw bytes from the bag   {n / read_s:12,.0f} msg/s")
    print(f"rosbags per-message decode    {n / slow_s:12,.0f} msg/s")
    print(f"ros_bridge bulk decode        {n / fast_s:12,.0f} msg/s   ({slow_s / fast_s:.1f}x)")
    print(f"read + decode, end to end     {n / (read_s + slow_s):12,.0f} -> "
          f"{n / (read_s + fast_s):,.0f} msg/s ({(read_s + slow_s) / (read_s + fast_s):.1f}x)")


if __name__ == "__main__":
    main()
