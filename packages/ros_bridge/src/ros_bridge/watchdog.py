"""The watchdog: joint states older than a few control periods mean the robot is not heard.

ros2_control's effort forwarder keeps applying the last command it got, with no timeout of
its own, so the controller's watchdog is the only guard: :class:`Watchdog` judges staleness
from the time a joint state was received and the time now, both passed in (no clock inside,
so tests drive it deterministically).
"""

from __future__ import annotations

import dataclasses
import math
import re

__all__ = ["Watchdog", "same_stop"]


@dataclasses.dataclass(frozen=True)
class Watchdog:
    """Joint states are stale once more than ``missed_periods`` control periods old.

    Attributes:
        period: the control period [s], > 0.
        missed_periods: control periods without a joint state that are tolerated, > 0
            (2: zero torque within two missed periods).
    """

    period: float
    missed_periods: float = 2.0

    def __post_init__(self):
        if not (math.isfinite(self.period) and self.period > 0):
            raise ValueError(f"the watchdog period must be a positive number of seconds, got "
                             f"{self.period}")
        if not self.missed_periods > 0:
            raise ValueError(f"missed_periods must be positive, got {self.missed_periods}")

    @property
    def timeout(self) -> float:
        """The longest age [s] of a joint state still fresh."""
        return self.period * self.missed_periods

    def stale(self, received: float | None, now: float) -> str | None:
        """Why the joint state received at ``received`` [s] is stale at ``now`` [s] (never
        received, too old, or received in the future of ``now``), or ``None``."""
        if received is None:
            return "no joint state received yet"
        age = now - received
        if age > self.timeout:
            return (f"the last joint state is {age * 1e3:.1f} ms old, more than "
                    f"{self.missed_periods:g} control periods ({self.timeout * 1e3:.1f} ms)")
        if age < 0:
            return f"the last joint state was received {-age * 1e3:.1f} ms after now"
        return None


def same_stop(reason: str | None, other: str | None) -> bool:
    """Whether two stop reasons (``None``: running) are the same kind, the numbers in them
    aside: a stale state's age grows every cycle, and a node logs each change of kind once,
    not every cycle."""
    if reason is None or other is None:
        return reason is other
    return _NUMBER.sub("#", reason) == _NUMBER.sub("#", other)


_NUMBER = re.compile(r"-?\d+(\.\d+)?")
