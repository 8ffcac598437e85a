"""The fake robot's known torques: external pulses and the sine excitation."""

import numpy as np
import pytest

from ros_bridge.torque_schedule import GOLDEN, SineExcitation, TorquePulse, pulse_torques

# the paper's Sec. V-E pulses on s1 (joint 1 of Baxter's left arm)
PULSES = [TorquePulse(1, 5.0, 5.0, 15.0), TorquePulse(1, 10.0, 20.0, 30.0)]


@pytest.mark.parametrize("time, s1", [(0.0, 0.0), (4.999, 0.0), (5.0, 5.0), (14.999, 5.0),
                                      (15.0, 0.0), (20.0, 10.0), (29.9, 10.0), (30.0, 0.0)])
def test_pulses_act_on_their_joint_over_their_window(time, s1):
    np.testing.assert_array_equal(pulse_torques(time, PULSES, 7),
                                  [0.0, s1, 0.0, 0.0, 0.0, 0.0, 0.0])


def test_overlapping_pulses_add():
    pulses = [TorquePulse(0, 1.0, 0.0, 2.0), TorquePulse(0, -3.0, 1.0, 3.0)]
    assert pulse_torques(1.5, pulses, 2)[0] == -2.0


def test_bad_pulses_are_refused():
    with pytest.raises(ValueError, match="start < end"):
        TorquePulse(1, 5.0, 15.0, 5.0)
    with pytest.raises(ValueError, match="outside 0..6"):
        pulse_torques(1.0, [TorquePulse(7, 5.0, 0.0, 2.0)], 7)


def test_the_excitation_is_zero_before_its_start_and_held_over_each_interval():
    excitation = SineExcitation([2.0, 1.0], [0.5, 1.5], start=1.0, hold=0.01)
    np.testing.assert_array_equal(excitation.torque(0.999), [0.0, 0.0])
    np.testing.assert_array_equal(excitation.torque(1.0), [0.0, 0.0])  # sin 0
    at = 1.0 + 0.37
    held = excitation.torque(at + 0.0099)
    np.testing.assert_array_equal(excitation.torque(at), held)
    phase = 2 * np.pi * np.array([0.5, 1.5]) * 0.37
    np.testing.assert_allclose(held, [2.0, 1.0] * (np.sin(phase) + 0.5 * np.sin(GOLDEN * phase)),
                               rtol=1e-9)


def test_a_bad_excitation_is_refused():
    with pytest.raises(ValueError, match="one finite amplitude"):
        SineExcitation([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="hold must be a positive time"):
        SineExcitation([1.0], [1.0], hold=0.0)
