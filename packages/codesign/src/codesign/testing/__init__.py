"""Testing kit: finite-difference gradient checks, the simulator conformance suite and an RK4
step for reference trajectories."""

from . import _conformance, _gradcheck, _integrate
from ._conformance import *  # noqa: F403 - the names in _conformance.__all__
from ._gradcheck import *  # noqa: F403 - the names in _gradcheck.__all__
from ._integrate import *  # noqa: F403 - the names in _integrate.__all__

__all__ = _gradcheck.__all__ + _conformance.__all__ + _integrate.__all__
