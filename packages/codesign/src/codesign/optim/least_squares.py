"""Nonlinear least squares: SciPy's trust-region reflective method on a problem's residuals.

A fit whose loss is a sum of squares, ``L(x) = ‖r(x)‖²`` (a tracking loss: keypoint or joint
errors), has more to give than ``L`` and its gradient. L-BFGS-B builds its curvature from
gradients one iteration at a time and creeps along the flat directions such fits have (a
vine's stiffness against damping, a link's mass against a spring); a Gauss-Newton method
gets the curvature ``JᵀJ`` from the Jacobian ``J = ∂r/∂x`` at every iterate and converges in
a few iterations where the residuals are small.

``J`` comes from forward differences of the residuals (one evaluation per free entry): for
the handful to a few dozen parameters a fit frees, that is cheaper than one reverse sweep
per residual, and smooth rollouts keep a small relative step (:data:`JACOBIAN_STEP`)
accurate. A perturbed evaluation that fails (raises :class:`codesign.SimulationError` or
gives non-finite residuals) is taken on the other side; where both fail the Jacobian cannot
be formed and the fit stops there, saying so. SciPy's ``trf`` answers a trial point whose
residuals are not finite by shrinking its trust region.

A problem for :class:`TrustRegionLeastSquares` has ``residuals(x)`` and
``jacobian(x, at)`` beside the optimizers' interface: :class:`ResidualProblem` (from a
residual function), :class:`codesign.identification.IdentificationProblem`, or sim_vine's
shooting fits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..simulator import SimulationError
from .base import Evaluation, IterationInfo, OptimizeResult

__all__ = ["JACOBIAN_STEP", "ResidualProblem", "TrustRegionLeastSquares", "forward_jacobian"]

JACOBIAN_STEP = 1e-6
"""Forward-difference step relative to ``max(1, |x_i|)`` in the scaled parameters."""


def forward_jacobian(residuals: Callable[[np.ndarray], np.ndarray], x, at, *, lower, upper,
                     relative_step: float = JACOBIAN_STEP) -> np.ndarray:
    """∂r/∂x by forward differences, shape (m, n).

    Args:
        residuals: x (n,) -> r (m,); may raise :class:`codesign.SimulationError` or return
            non-finite values where the rollout fails.
        x: the point (scaled parameters), shape (n,); lower, upper: its bounds.
        at: ``residuals(x)``, shape (m,).
        relative_step: step ``relative_step · max(1, |x_i|)``, taken backwards where a
            forward step would leave the bounds or its rollout fails.

    Raises:
        SimulationError: the rollouts on both sides of an entry failed.
    """
    x = np.asarray(x, dtype=np.float64)
    at = np.asarray(at, dtype=np.float64)
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    columns = []
    for i in range(len(x)):
        if lower[i] == upper[i]:  # a pinned entry: no direction to differentiate along
            columns.append(np.zeros_like(at))
            continue
        h = relative_step * max(1.0, abs(x[i]))
        sides = (h, -h) if x[i] + h <= upper[i] else (-h, h)
        failures = []
        for step in sides:
            moved = x.copy()
            moved[i] = np.clip(x[i] + step, lower[i], upper[i])
            if moved[i] == x[i]:
                continue
            try:
                moved_residuals = residuals(moved)
            except SimulationError as error:
                failures.append(str(error))
                continue
            if np.all(np.isfinite(moved_residuals)):
                columns.append((moved_residuals - at) / (moved[i] - x[i]))
                break
            failures.append(f"non-finite residuals at entry {moved[i]:.6g}")
        else:
            why = "; ".join(failures) or "the bounds leave no room for a step"
            raise SimulationError(
                f"the Jacobian's column {i} cannot be formed: the rollouts on both sides of "
                f"the scaled point's entry {x[i]:.6g} failed ({why})")
    return np.stack(columns, axis=1)


class ResidualProblem:
    """A least-squares objective ``L(x) = ‖w ⊙ r(x)‖²`` as an
    :class:`~codesign.optim.ObjectiveFunction` that also gives its residuals and Jacobian.

    Args:
        residuals: x (n,) -> r (m,), e.g. every measured keypoint coordinate's error [mm].
        weights: per residual, shape (m,), so that the loss is the fit's (per-recording
            means: ``1 / √(recordings × frames)``).
        lower, upper: bounds of x, shape (n,).
        relative_step: the Jacobian's forward-difference step (:func:`forward_jacobian`).
    """

    def __init__(self, residuals: Callable[[np.ndarray], np.ndarray], weights, *, lower,
                 upper, relative_step: float = JACOBIAN_STEP):
        self.function = residuals
        self.weights = np.asarray(weights, dtype=np.float64)
        self.residual_count = len(self.weights)
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.size = len(self.lower)
        self.relative_step = relative_step
        self.constraint_lower = np.zeros(0)
        self.constraint_upper = np.zeros(0)

    def residuals(self, x) -> np.ndarray:
        """The weighted residuals ``w ⊙ r(x)``, shape (m,)."""
        return self.weights * self.function(np.asarray(x, dtype=np.float64))

    def jacobian(self, x, at, *, residuals: Callable | None = None) -> np.ndarray:
        """∂(w ⊙ r)/∂x at ``x`` whose weighted residuals are ``at``, shape (m, n), by
        :func:`forward_jacobian` of ``residuals`` (default :meth:`residuals`; a guard passes
        its own, which record the perturbed points that fail)."""
        return forward_jacobian(residuals or self.residuals, x, at, lower=self.lower,
                                upper=self.upper, relative_step=self.relative_step)

    def evaluate(self, x, *, grad: bool = True) -> Evaluation:
        """The loss ``‖w ⊙ r‖²`` and, with ``grad``, its gradient ``2 Jᵀ (w ⊙ r)``."""
        r = self.residuals(x)
        if not grad:
            return Evaluation(loss=float(r @ r))
        return Evaluation(loss=float(r @ r), grad=2.0 * self.jacobian(x, r).T @ r,
                          constraint_jac=np.zeros((0, self.size)))

    def evaluate_many(self, xs, *, grad: bool = False):
        """:meth:`evaluate` at each point."""
        return [self.evaluate(x, grad=grad) for x in xs]


class _JacobianFailed(Exception):
    """Raised through SciPy when the Jacobian at an accepted point cannot be formed."""


class TrustRegionLeastSquares:
    """SciPy's ``least_squares(method="trf")`` (trust-region reflective with box bounds,
    Branch, Coleman & Li 1999) behind the :class:`~codesign.optim.Optimizer` interface, for
    a problem with ``residuals(x)`` and ``jacobian(x, residuals)`` (:class:`ResidualProblem`,
    an identification problem, or sim_vine's fits wrapped by its ``GuardedProblem``).
    Entries pinned by equal bounds keep their value (a parameter held where the data cannot
    determine it).

    An iteration is one accepted step (one Jacobian); the callback gets the loss
    ``‖r‖²``; evaluations count the residual evaluations and one per Jacobian column.
    SciPy's message is passed on whole; a stop by the callback or the iteration limit reads
    like :class:`~codesign.optim.LBFGSB`'s ("stopped by callback", "reached
    max_iterations") and is not a convergence; a Jacobian that cannot be formed (both sides
    of an entry failed) ends the fit at the point it was asked for ("stopped: …").

    Args:
        function_tolerance: ``ftol``, relative loss reduction below which it converges.
        step_tolerance: ``xtol``, relative step below which it converges.
        gradient_tolerance: ``gtol``, scaled gradient below which it converges.
        x_scale: SciPy's ``x_scale``: 1 where the parameters are already scaled to unit
            order (a design's scales, sim_vine's ``unit_scales``), or ``"jac"`` to rescale
            by the Jacobian's column norms.
    """

    def __init__(self, *, function_tolerance: float = 1e-8, step_tolerance: float = 1e-8,
                 gradient_tolerance: float = 1e-8, x_scale: float | str = 1.0):
        self.function_tolerance = function_tolerance
        self.step_tolerance = step_tolerance
        self.gradient_tolerance = gradient_tolerance
        self.x_scale = x_scale

    def minimize(self, function, x0, *, max_iterations: int, callback=None) -> OptimizeResult:
        """Run up to ``max_iterations`` accepted steps from ``x0``; call ``callback`` after
        each with an :class:`~codesign.optim.IterationInfo`."""
        from scipy.optimize import least_squares

        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        if not (callable(getattr(function, "residuals", None))
                and callable(getattr(function, "jacobian", None))):
            raise TypeError("least_squares fits residuals (residuals(x), jacobian(x, at)) "
                            "and this objective has none: use it for identification runs (a "
                            "tracking loss), or pick lbfgsb for an optimization objective")
        lower, upper = np.asarray(function.lower, float), np.asarray(function.upper, float)
        x_start = np.clip(np.asarray(x0, dtype=float), lower, upper)
        # SciPy wants lower < upper: entries pinned by equal bounds stay out of its vector
        free = lower < upper
        seen: dict[bytes, np.ndarray] = {}
        history: list[float] = []
        stop: dict[str, object] = {}
        evaluations = [0]

        def full(z):
            x = x_start.copy()
            x[free] = z
            return x

        def residuals(z):
            evaluations[0] += 1
            r = function.residuals(full(z))
            seen.clear()  # SciPy asks for the Jacobian at the point it evaluated last
            seen[np.asarray(z, float).tobytes()] = r
            return r

        def jacobian(z):
            z = np.asarray(z, dtype=float)
            at = seen.get(z.tobytes())
            at = residuals(z) if at is None else at
            try:
                jacobian = function.jacobian(full(z), at)[:, free]
            except SimulationError as error:
                stop.update(x=full(z), residuals=at, message=f"stopped: {error}")
                raise _JacobianFailed from None
            evaluations[0] += jacobian.shape[1]
            return jacobian

        def on_iteration(intermediate_result):
            loss = 2.0 * float(intermediate_result.cost)
            history.append(loss)
            x = full(np.asarray(intermediate_result.x, dtype=float))
            info = IterationInfo(iteration=len(history), x=x, loss=loss,
                                 evaluations=evaluations[0])
            if callback is not None and callback(info):
                stop.setdefault("message", "stopped by callback")
            elif len(history) >= max_iterations:
                stop.setdefault("message", "reached max_iterations")
            if stop:
                raise StopIteration

        try:
            result = least_squares(residuals, x_start[free], jac=jacobian,
                                   bounds=(lower[free], upper[free]),
                                   method="trf", x_scale=self.x_scale,
                                   ftol=self.function_tolerance, xtol=self.step_tolerance,
                                   gtol=self.gradient_tolerance, callback=on_iteration)
        except _JacobianFailed:
            # SciPy had accepted the point whose Jacobian failed: the fit ends there
            r = stop["residuals"]
            return OptimizeResult(x=stop["x"], loss=float(r @ r), iterations=len(history),
                                  evaluations=evaluations[0], converged=False,
                                  message=str(stop["message"]), history=history)
        x = np.clip(full(np.asarray(result.x, dtype=float)), lower, upper)
        converged = bool(result.success) and not stop
        message = str(stop.get("message", result.message))
        return OptimizeResult(x=x, loss=2.0 * float(result.cost), iterations=len(history),
                              evaluations=evaluations[0], converged=converged,
                              message=message, history=history)
