"""sim_vine: soft growing vine robots for codesign (Jitosho et al., ICRA 2023, extended).

A planar vine of rigid bodies in maximal coordinates with alternating prismatic and pin
joints; each step solves one velocity-level QP with OSQP (set up once, updated every step)
and its gradients come from implicit differentiation of the QP's KKT conditions.
"""

from .model import VineModel
from .obstacles import Circle, Polygon, Wall, rectangle, signed_distance
from .qp import SolverSettings
from .scene import load_scene, make_simulator
from .simulator import VineSimulator
from .state import VineState

__all__ = [
    "Circle",
    "Polygon",
    "SolverSettings",
    "VineModel",
    "VineSimulator",
    "VineState",
    "Wall",
    "load_scene",
    "make_simulator",
    "rectangle",
    "signed_distance",
]
