"""The ``none`` optimizer: a run that only simulates.

A fixed controller on a fixed design (a tuned law to show, a design to replay) still wants
what a run writes: the rollout's loss, its video and its components' reports. With
``optimizer: {name: none}`` the run evaluates its starting point once and stops; the
experiment may then have nothing to optimize (no ``design`` section, a controller with
``optimize: false``).
"""

from __future__ import annotations

import numpy as np

from .base import Callback, ObjectiveFunction, OptimizeResult

__all__ = ["EvaluateOnly"]


class EvaluateOnly:
    """Evaluates the starting point once (no gradient) and returns it: zero iterations.

    ``max_iterations`` (the YAML's ``optimizer.iterations``) is ignored and no callback is
    called, since no iteration happens.
    """

    needs_parameters = False
    """Whether the problem must have free parameters (the run checks it)."""

    def minimize(self, function: ObjectiveFunction, x0: np.ndarray, *, max_iterations: int,
                 callback: Callback | None = None) -> OptimizeResult:
        """The loss at ``x0``, with ``x0`` as the result."""
        x = np.asarray(x0, dtype=np.float64).copy()
        loss = float(function.evaluate(x, grad=False).loss)
        return OptimizeResult(x=x, loss=loss, iterations=0, evaluations=1,
                              converged=bool(np.isfinite(loss)),
                              message="evaluated the start only (optimizer none)",
                              history=(loss,))
