"""Per-substep particle state of the MLS-MPM simulator."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["MPMState"]


@dataclasses.dataclass(frozen=True)
class MPMState:
    """Particle arrays at one instant (NumPy or CuPy, the model's dtype).

    Attributes:
        particle_x: positions [m], shape (n, d).
        particle_v: velocities [m/s], shape (n, d).
        particle_F: deformation gradients [-], shape (n, d, d).
        particle_C: APIC affine velocity fields [1/s], shape (n, d, d).
    """

    particle_x: Any
    particle_v: Any
    particle_F: Any
    particle_C: Any
