"""sim_pbd: articulated rigid robots with differentiable position-based dynamics (XPBD)."""

from .model import JOINT_TYPES, PARAMETERS, PBDModel
from .state import PBDState

__all__ = ["JOINT_TYPES", "PARAMETERS", "PBDModel", "PBDState"]
