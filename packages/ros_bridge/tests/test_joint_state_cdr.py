"""Bulk JointState decoding agrees with rosbags' per-message decoding, and refuses bad input."""

import numpy as np
import pytest

from ros_bridge.joint_state_cdr import decode_joint_states
from ros_bridge.messages import (
    JOINT_STATE,
    JointNameError,
    MessageError,
    joint_sample,
    joint_state_message,
    typestore,
)


def serialized(message):
    return bytes(typestore().serialize_cdr(message, JOINT_STATE))


def test_bulk_decoding_matches_per_message_decoding_across_layouts():
    rng = np.random.default_rng(0)
    messages = [joint_state_message(["b", "a", "gripper"], stamp=1 + 0.01 * k,
                                    position=rng.normal(size=3), velocity=rng.normal(size=3),
                                    effort=rng.normal(size=3), frame_id="base")
                for k in range(50)]
    # same names and length, array lengths swapped: only the bulk length check tells them apart
    messages.insert(7, joint_state_message(["a", "b"], stamp=0.5, position=[1.0, 2.0],
                                           velocity=None, effort=[3.0, 4.0]))
    messages.insert(9, joint_state_message(["a", "b"], stamp=0.6, position=[1.0, 2.0],
                                           velocity=[5.0, 6.0], effort=None))
    messages.append(joint_state_message(["a", "b"], stamp=99.25, position=[7.0, 8.0]))
    out = decode_joint_states([serialized(m) for m in messages], ["a", "b"])
    samples = [joint_sample(m, ["a", "b"]) for m in messages]
    for field in ("position", "velocity", "effort"):
        np.testing.assert_array_equal(getattr(out, field),
                                      np.stack([getattr(s, field) for s in samples]))
    np.testing.assert_allclose(out.stamp, [s.stamp for s in samples], rtol=0, atol=1e-9)


def test_bad_messages_are_named():
    good = serialized(joint_state_message(["a"], stamp=1.0, position=[1.0]))
    with pytest.raises(JointNameError, match="message 1: .*no joint"):
        decode_joint_states([good, serialized(joint_state_message(["x"], stamp=1.0,
                                                                  position=[1.0]))], ["a"])
    with pytest.raises(MessageError, match="message 0 .* cut short"):
        decode_joint_states([good[:-8]], ["a"])
    with pytest.raises(MessageError, match="not little-endian"):
        decode_joint_states([b"\x00\x00" + good[2:]], ["a"])
