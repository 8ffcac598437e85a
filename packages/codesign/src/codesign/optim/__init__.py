"""Optimizers over a problem's scaled parameter vector, all behind one interface.

Gradient-based: :class:`Adam` (projected, with bounds), :class:`LBFGSB`; constrained:
:class:`SLSQP`, :class:`TrustConstr`; gradient-free baselines: :class:`CMAES`,
:class:`OnePlusOneES`; least squares on a problem's residuals:
:class:`TrustRegionLeastSquares`; :class:`EvaluateOnly` (``none``) evaluates the start
only, for a run that only simulates; :class:`GuardedProblem` turns a point whose
simulation fails into a penalty (:mod:`codesign.optim.guarded`). Every optimizer is
deterministic given its options and the evaluation results, and calls the callback after
every iteration.
"""

from . import adam, base, evaluate, evolution, guarded, least_squares, scipy_optimizers
from .adam import *  # noqa: F403 - the names in each module's __all__
from .base import *  # noqa: F403
from .evaluate import *  # noqa: F403
from .evolution import *  # noqa: F403
from .guarded import *  # noqa: F403
from .least_squares import *  # noqa: F403
from .scipy_optimizers import *  # noqa: F403

__all__ = (base.__all__ + adam.__all__ + scipy_optimizers.__all__ + evolution.__all__
           + evaluate.__all__ + least_squares.__all__ + guarded.__all__)
