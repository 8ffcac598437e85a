"""Known joint torques over time for the fake robot: an excitation for identification and
the external torque pulses of the paper's impedance experiment (Sec. V-E: 5 and 10 N m on
s1 over time windows). Pure functions of the robot's time [s]."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

__all__ = ["GOLDEN", "SineExcitation", "TorquePulse", "pulse_torques"]

GOLDEN = (1.0 + 5.0**0.5) / 2.0
"""Ratio of each joint's second tone to its first: incommensurate, so the sum never repeats."""


@dataclasses.dataclass(frozen=True)
class TorquePulse:
    """A constant external ``torque`` [N m] on joint index ``joint`` over [``start``, ``end``)
    [s]."""

    joint: int
    torque: float
    start: float
    end: float

    def __post_init__(self):
        if not (np.isfinite(self.torque) and np.isfinite(self.start) and np.isfinite(self.end)
                and self.start < self.end):
            raise ValueError(f"a torque pulse needs a finite torque and start < end [s], got "
                             f"{self}")


def pulse_torques(time: float, pulses: Sequence[TorquePulse], size: int) -> np.ndarray:
    """The joint torques [N m], (size,), of the ``pulses`` acting at ``time`` [s] (summed)."""
    torque = np.zeros(size)
    for pulse in pulses:
        if not 0 <= pulse.joint < size:
            raise ValueError(f"pulse joint index {pulse.joint} outside 0..{size - 1}")
        if pulse.start <= time < pulse.end:
            torque[pulse.joint] += pulse.torque
    return torque


@dataclasses.dataclass(frozen=True)
class SineExcitation:
    """Per joint, a(sin 2πf t' + ½ sin 2πφf t') with φ the golden ratio, t' the time since
    ``start`` held at multiples of ``hold`` (zero-order hold, as a controller commands it);
    zero before ``start``.

    Attributes:
        amplitude: a [N m], (n,).
        frequency: f [Hz], (n,).
        start: when it begins [s].
        hold: how long each value is held [s] (> 0).
    """

    amplitude: np.ndarray
    frequency: np.ndarray
    start: float = 0.0
    hold: float = 0.01

    def __post_init__(self):
        amplitude = np.asarray(self.amplitude, dtype=np.float64)
        frequency = np.asarray(self.frequency, dtype=np.float64)
        if amplitude.ndim != 1 or frequency.shape != amplitude.shape or not (
                np.all(np.isfinite(amplitude)) and np.all(np.isfinite(frequency))):
            raise ValueError(f"the excitation needs one finite amplitude [N m] and frequency "
                             f"[Hz] per joint, got {amplitude} and {frequency}")
        if not (np.isfinite(self.hold) and self.hold > 0 and np.isfinite(self.start)):
            raise ValueError(f"the excitation's hold must be a positive time and its start "
                             f"finite [s], got {self.hold} and {self.start}")
        object.__setattr__(self, "amplitude", amplitude)
        object.__setattr__(self, "frequency", frequency)

    def torque(self, time: float) -> np.ndarray:
        """The excitation [N m], (n,), at ``time`` [s]."""
        if time < self.start:
            return np.zeros(self.amplitude.size)
        # the small margin keeps a time on a hold boundary in the interval it starts
        held = np.floor((time - self.start) / self.hold + 1e-9) * self.hold
        phase = 2.0 * np.pi * self.frequency * held
        return self.amplitude * (np.sin(phase) + 0.5 * np.sin(GOLDEN * phase))
