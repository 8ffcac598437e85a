"""sim_mpm: differentiable MLS-MPM for soft robots (ChainQueen and its extensions).

Forward substep and hand-derived adjoint, as a readable array-level reference
(:mod:`sim_mpm.step`, NumPy or CuPy) and numba CPU kernels (:mod:`sim_mpm.kernels`).
"""

from .actuators import CableActuator
from .boundaries import BoxWalls, HeightField, Plane
from .model import ModelError, MPMModel, build_model
from .options import MPMOptions
from .scene import make_simulator
from .simulator import MPMSimulator
from .state import MPMState

__all__ = [
    "BoxWalls",
    "CableActuator",
    "HeightField",
    "MPMModel",
    "MPMOptions",
    "MPMSimulator",
    "MPMState",
    "ModelError",
    "Plane",
    "build_model",
    "make_simulator",
]
