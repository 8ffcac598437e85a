"""Central finite-difference gradient checks along random directions, per input group."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..backend import array_module_of, to_backend, to_host
from ..tree import is_float_leaf, tree_leaves, tree_map, tree_paths

__all__ = ["GradcheckReport", "gradcheck"]

# Weights of the central stencils f'(x) ≈ Σ c_k f(x + k h) / h, for k in the keys.
_STENCILS = {
    2: {1: 0.5, -1: -0.5},
    4: {2: -1.0 / 12.0, 1: 8.0 / 12.0, -1: -8.0 / 12.0, -2: 1.0 / 12.0},
}
_STENCIL_NORM = {order: sum(abs(c) for c in w.values()) for order, w in _STENCILS.items()}


@dataclasses.dataclass
class GradcheckReport:
    """Per-group comparison of analytic and finite-difference directional derivatives.

    Attributes:
        errors: group -> largest relative error over the random directions.
        pairs: group -> list of (finite difference, analytic) directional derivatives.
        tolerance: the relative error a group must not exceed.
    """

    errors: dict[str, float]
    pairs: dict[str, list[tuple[float, float]]]
    tolerance: float

    @property
    def passed(self) -> bool:
        """True when every group's relative error is within tolerance."""
        return all(err <= self.tolerance for err in self.errors.values())

    def __str__(self) -> str:
        lines = [f"gradcheck (tolerance {self.tolerance:.1e}):"]
        for group, err in self.errors.items():
            status = "ok" if err <= self.tolerance else "FAIL"
            fd, an = self.pairs[group][0] if self.pairs[group] else (0.0, 0.0)
            lines.append(
                f"  {group:<24s} rel.err {err:.2e} {status}  (fd {fd:+.9e}, analytic {an:+.9e})"
            )
        return "\n".join(lines)

    def assert_ok(self) -> GradcheckReport:
        """Raise AssertionError listing the failing groups; return self otherwise."""
        if not self.passed:
            raise AssertionError(str(self))
        return self


def random_tree(tree, rng: np.random.Generator, *, keep_dtype: bool = False):
    """Standard normal draws shaped like the float leaves of ``tree`` (``None`` elsewhere), on
    each leaf's backend, in float64 or, with ``keep_dtype``, in the leaf's own dtype."""

    def draw(leaf):
        if not is_float_leaf(leaf):
            return None
        d = rng.standard_normal(np.shape(leaf))
        return to_backend(d.astype(leaf.dtype if keep_dtype else np.float64),
                          array_module_of(leaf))

    return tree_map(draw, tree)


def _perturb(tree, direction, h: float):
    return tree_map(lambda x, d: x if d is None else x + h * d, tree, direction)


def _keep_only(direction, path: str):
    """The direction with every float leaf but the one at ``path`` set to zero."""
    kept = tree_paths(direction)[path]
    return tree_map(lambda d: None if d is None else (d if d is kept else d * 0.0), direction)


def _directional(gradient, direction) -> float:
    grads = tree_paths(gradient)
    total = 0.0
    for path, d in tree_paths(direction).items():
        g = grads.get(path)
        if g is not None:
            total += float(np.vdot(to_host(g).reshape(-1), to_host(d).reshape(-1)))
    return total


def _rms(tree) -> float:
    values = [to_host(x).reshape(-1) for x in tree_leaves(tree) if is_float_leaf(x)]
    if not values:
        return 0.0
    flat = np.concatenate(values)
    return float(np.sqrt(np.mean(flat**2))) if flat.size else 0.0


def gradcheck(
    fn: Callable[[dict[str, Any]], float],
    inputs: Mapping[str, Any],
    gradients: Mapping[str, Any],
    *,
    eps: float = 1e-6,
    directions: int = 2,
    stencil: int = 4,
    tolerance: float = 1e-6,
    atol: float = 1e-12,
    seed: int = 0,
    relative_step: bool = True,
    groups: list[str] | None = None,
    split: str = "leaf",
) -> GradcheckReport:
    """Compare analytic gradients with central finite differences along random directions.

    Args:
        fn: scalar function of a dict of input groups (each group a tree of float arrays).
            It must not modify its argument.
        inputs: the point at which to check, ``group -> tree``.
        gradients: analytic ∂fn/∂inputs, ``group -> tree`` of the same structure (a missing
            group or ``None`` leaf means zero).
        eps: finite-difference step; with ``relative_step`` it is multiplied by
            ``max(1, rms(group))`` so groups in large units (Pa) get proportionate steps.
        directions: random directions per group.
        stencil: 2 (second-order) or 4 (fourth-order) point central difference.
        tolerance: largest accepted relative error
            ``max(0, |fd - an| - noise) / (max(|fd|, |an|) + atol)``, where ``noise`` is the
            round-off floor of the stencil, ``4 Σ|c_k| ε_machine |f(x)| / h``: a gradient that
            is truly zero is compared with finite differences that are pure round-off.
        seed: seed of the direction generator; the check is deterministic.
        groups: check only these groups (default: all in ``inputs``).
        split: ``"leaf"`` perturbs one leaf of a group at a time and reports each
            (``"design.mass"``), so a small wrong entry is not hidden by a large right one;
            ``"group"`` perturbs the whole group along each direction.

    Inputs should be float64; float32 round-off makes 1e-6 unattainable.
    """
    if split not in ("leaf", "group"):
        raise ValueError(f"split must be 'leaf' or 'group', got {split!r}")
    if stencil not in _STENCILS:
        raise ValueError(f"stencil must be one of {sorted(_STENCILS)}, got {stencil}")
    for group in groups or []:
        if group not in inputs:
            raise KeyError(f"gradcheck: no input group {group!r}; have {', '.join(inputs)}")
    rng = np.random.default_rng(seed)
    f0 = abs(float(fn(dict(inputs))))
    errors: dict[str, float] = {}
    pairs: dict[str, list[tuple[float, float]]] = {}
    for group in groups or list(inputs):
        base = inputs[group]
        h = eps * max(1.0, _rms(base)) if relative_step else eps
        noise = 4.0 * _STENCIL_NORM[stencil] * np.finfo(np.float64).eps * f0 / h
        leaf_paths = [None]
        if split == "leaf":
            leaf_paths = list(tree_paths(random_tree(base, rng)))
        for only in leaf_paths:
            label = group if only is None else f"{group}{only}"
            pairs[label] = []
            worst = 0.0
            for _ in range(directions):
                direction = random_tree(base, rng)
                if only is not None:
                    direction = _keep_only(direction, only)
                fd = 0.0
                for k, weight in _STENCILS[stencil].items():
                    shifted = dict(inputs)
                    shifted[group] = _perturb(base, direction, k * h)
                    fd += weight * float(fn(shifted))
                fd /= h
                an = _directional(gradients.get(group), direction)
                pairs[label].append((fd, an))
                excess = max(0.0, abs(fd - an) - noise)
                worst = max(worst, excess / (max(abs(fd), abs(an)) + atol))
            errors[label] = worst
    return GradcheckReport(errors=errors, pairs=pairs, tolerance=tolerance)
