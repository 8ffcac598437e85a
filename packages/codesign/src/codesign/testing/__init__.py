"""Testing kit: finite-difference gradient checks and the simulator conformance suite."""

from . import _conformance, _gradcheck
from ._conformance import *  # noqa: F403 - the names in _conformance.__all__
from ._gradcheck import *  # noqa: F403 - the names in _gradcheck.__all__

__all__ = _gradcheck.__all__ + _conformance.__all__
