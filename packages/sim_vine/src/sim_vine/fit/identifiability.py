"""What the data determine at a fit: Gauss-Newton conditioning and parameter standard errors.

A least-squares fit of residuals r(x) [mm] (keypoint errors) in the optimizer's scaled
parameters x has the Gauss-Newton Hessian H = JᵀJ (J = ∂r/∂x) and, for independent keypoint
errors of standard deviation σ [mm], the parameter covariance σ² H⁻¹ (the Fisher
information's inverse). A parameter whose standard error is large against its value, or
that lies along a direction where H is singular, is not determined by the data: a fit that
leaves it where it started, or runs it to a bound (the damping of a vine held against a
wall on real recordings), says nothing about its value. :func:`identifiability` reports
which, instead of the bound.

J comes from central differences of the rollout's keypoints (:func:`residual_jacobian`):
2n forward rollouts for n parameters, the same cost as a few fit iterations, and it needs no
per-residual reverse sweep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["Identifiability", "LeastSquaresPoint", "identifiability", "residual_jacobian"]

SINGULAR_TOLERANCE = 1e-10
"""An eigenvalue of H below this fraction of the largest is treated as zero: its direction
is not determined at all."""


@dataclasses.dataclass(frozen=True)
class Identifiability:
    """The Gauss-Newton view of a fit at its result.

    Attributes:
        names: one label per fitted entry (``joint.stiffness``, ``start.angles[2]``).
        values: the fitted values [the parameters' units], shape (n,).
        standard_errors: their standard errors [same units], shape (n,); inf along a
            singular direction.
        relative_errors: ``standard_errors / |values|``, shape (n,).
        hessian: H = JᵀJ in the optimizer's scaled parameters [mm² per scaled unit²],
            shape (n, n).
        condition_number: largest over smallest eigenvalue of H (inf when singular): the
            conditioning the optimizer sees, which the parameters' scales set.
        noise_mm: the keypoint noise σ the errors assume [mm].
        undetermined: the names the data cannot determine (relative error above
            ``relative_limit``, or along a singular direction).
        relative_limit: that limit.
    """

    names: list[str]
    values: np.ndarray
    standard_errors: np.ndarray
    relative_errors: np.ndarray
    hessian: np.ndarray
    condition_number: float
    noise_mm: float
    undetermined: list[str]
    relative_limit: float

    def summary(self) -> str:
        """One line per parameter: value ± standard error, and whether it is determined."""
        lines = [f"Gauss-Newton condition number {self.condition_number:.3g} "
                 f"(keypoint noise {self.noise_mm:.3g} mm)"]
        for name, value, error, relative in zip(self.names, self.values, self.standard_errors,
                                                self.relative_errors, strict=True):
            verdict = "NOT DETERMINED by the data" if name in self.undetermined else "determined"
            lines.append(f"{name} = {value:.6g} ± {error:.3g} ({100 * relative:.3g} %): "
                         f"{verdict}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class LeastSquaresPoint:
    """A fit's residuals and their Jacobian at its result, what :func:`identifiability`
    needs (the arguments of that name)."""

    jacobian: np.ndarray
    residuals: np.ndarray
    names: list[str]
    values: np.ndarray
    scales: np.ndarray

    def identifiability(self, *, noise_mm: float | None = None,
                        relative_limit: float = 0.5) -> Identifiability:
        """:func:`identifiability` at this point."""
        return identifiability(self.jacobian, self.residuals, names=self.names,
                               values=self.values, scales=self.scales, noise_mm=noise_mm,
                               relative_limit=relative_limit)


def _variances(jacobian: np.ndarray) -> np.ndarray:
    """diag((JᵀJ)⁻¹), inf for an entry along a singular direction.

    Singularity is judged on the Jacobi-scaled JᵀJ (unit columns), so that the verdict does
    not depend on the parameters' scales: badly scaled columns made every direction of the
    unscaled matrix look singular next to the largest."""
    norms = np.linalg.norm(jacobian, axis=0)
    seen = norms > 0
    variance = np.full(jacobian.shape[1], np.inf)
    if not seen.any():
        return variance
    scaled = jacobian[:, seen] / norms[seen]
    eigenvalues, vectors = np.linalg.eigh(scaled.T @ scaled)
    singular = eigenvalues <= SINGULAR_TOLERANCE * eigenvalues[-1]
    weights = vectors ** 2
    # variance of entry i: Σ_k v_ik² / λ_k; an entry untouched by a singular direction
    # (v_ik ≈ 0 there) keeps a finite variance
    along_singular = np.any((weights > 1e-12) & singular, axis=1)
    finite = np.sum(weights[:, ~singular] / eigenvalues[~singular], axis=1)
    variance[seen] = np.where(along_singular, np.inf, finite) / norms[seen] ** 2
    return variance


def residual_jacobian(residuals: Callable[[np.ndarray], np.ndarray], x, *, lower, upper,
                      relative_step: float = 1e-4) -> np.ndarray:
    """∂r/∂x by central differences (one-sided at a bound), shape (m, n).

    Args:
        residuals: x (n,) -> r (m,).
        x: the point (scaled parameters), shape (n,); lower, upper: its bounds.
        relative_step: step ``relative_step · max(1, |x_i|)``.
    """
    x = np.asarray(x, dtype=np.float64)
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    columns = []
    for i in range(len(x)):
        h = relative_step * max(1.0, abs(x[i]))
        plus, minus = x.copy(), x.copy()
        plus[i], minus[i] = min(x[i] + h, upper[i]), max(x[i] - h, lower[i])
        columns.append((residuals(plus) - residuals(minus)) / (plus[i] - minus[i]))
    return np.stack(columns, axis=1)


def identifiability(jacobian, residuals, *, names: Sequence[str], values, scales,
                    noise_mm: float | None = None,
                    relative_limit: float = 0.5) -> Identifiability:
    """Conditioning, standard errors and the undetermined parameters of a least-squares fit.

    Args:
        jacobian: ∂r/∂x [mm per scaled unit], shape (m, n).
        residuals: r at the fit [mm], shape (m,).
        names: labels of the n entries; values: fitted values (n,); scales: value per
            scaled unit (n,).
        noise_mm: keypoint noise σ [mm]; ``None`` estimates it from the residuals,
            ``√(rᵀr / (m − n))`` (a fit to exact synthetic data then gives zero errors:
            pass the noise a real recording would have).
        relative_limit: a parameter whose standard error exceeds this fraction of its
            value is reported as undetermined.
    """
    jacobian = np.asarray(jacobian, dtype=np.float64)
    residuals = np.asarray(residuals, dtype=np.float64)
    m, n = jacobian.shape
    if residuals.shape != (m,) or len(names) != n:
        raise ValueError(f"identifiability needs residuals of shape ({m},) and {n} names, got "
                         f"{residuals.shape} and {len(names)}")
    if noise_mm is None:
        if m <= n:
            raise ValueError(f"{m} residuals cannot estimate the noise of {n} parameters; "
                             "pass noise_mm")
        noise_mm = float(np.sqrt(residuals @ residuals / (m - n)))
    hessian = jacobian.T @ jacobian
    eigenvalues = np.linalg.eigvalsh(hessian)
    condition = float(eigenvalues[-1] / eigenvalues[0]) if eigenvalues[0] > 0 else np.inf
    variance = _variances(jacobian)
    scales = np.asarray(scales, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    errors = np.where(np.isinf(variance), np.inf, noise_mm * np.sqrt(variance) * np.abs(scales))
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(values != 0, errors / np.abs(values), np.inf)
    undetermined = [name for name, r, e in zip(names, relative, errors, strict=True)
                    if not np.isfinite(e) or r > relative_limit]
    return Identifiability(names=list(names), values=values, standard_errors=errors,
                           relative_errors=relative, hessian=hessian,
                           condition_number=condition, noise_mm=float(noise_mm),
                           undetermined=undetermined, relative_limit=float(relative_limit))
