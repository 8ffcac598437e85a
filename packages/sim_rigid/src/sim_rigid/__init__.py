"""sim_rigid: articulated rigid robots in reduced coordinates, implicit BDF2, adjoint
gradients."""

from .model import JOINT_TYPES, PARAMETERS, RigidModel
from .state import RigidState

__all__ = ["JOINT_TYPES", "PARAMETERS", "RigidModel", "RigidState"]
