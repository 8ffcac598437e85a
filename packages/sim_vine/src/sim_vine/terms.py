"""Vine observers (tip, keypoints) and objective terms (tip target distance, growth effort).

Factories take ``simulator`` (a :class:`VineSimulator`) and keyword-only options, as the
plugin registry calls them.
"""

from __future__ import annotations

import numpy as np

from codesign.tree import tree_zeros_with

from .kinematics import keypoints, keypoints_vjp, tip_position, tip_position_vjp

__all__ = ["TipObserver", "KeypointObserver", "TipTargetDistance", "GrowthEffort"]


class TipObserver:
    """Observation: the tip position (x, y) [m], size 2."""

    size = 2

    def __init__(self, *, simulator):
        self.model = simulator.model

    def observe(self, state, design):
        """Tip position [m], shape (2,)."""
        return tip_position(self.model, state.body_q)

    def observe_vjp(self, state, design, g_observation):
        """(∂L/∂state, None) given ∂L/∂tip (2,)."""
        g = tip_position_vjp(self.model, state.body_q, np.asarray(g_observation, float))
        return tree_zeros_with(state, body_q=g), None


class KeypointObserver:
    """Observation: ``count`` points evenly spaced by arc length, flattened (x0, y0, x1, ...).

    The model side of fitting to video keypoints; size ``2 * count``.
    """

    def __init__(self, *, simulator, count: int = 10):
        if int(count) < 2:
            raise ValueError(f"keypoints need count >= 2 (base and tip), got {count}")
        self.model = simulator.model
        self.count = int(count)
        self.size = 2 * self.count

    def observe(self, state, design):
        """Keypoints [m], shape (2 * count,)."""
        return keypoints(self.model, state.body_q, self.count).reshape(-1)

    def observe_vjp(self, state, design, g_observation):
        """(∂L/∂state, None) given ∂L/∂keypoints (2 * count,)."""
        g = keypoints_vjp(self.model, state.body_q, self.count,
                          np.asarray(g_observation, float).reshape(self.count, 2))
        return tree_zeros_with(state, body_q=g), None


class TipTargetDistance:
    """Final term: distance from the tip to a target point [m] (or its square).

    Args:
        target: target point (x, y) [m].
        squared: use the squared distance [m²] (smooth at the target).
    """

    kind = "final"

    def __init__(self, *, simulator, target: list[float], squared: bool = False):
        target = np.asarray(target, dtype=np.float64)
        if target.shape != (2,) or not np.all(np.isfinite(target)):
            raise ValueError(f"tip_target_distance: target must be [x, y] in metres, got {target}")
        self.model = simulator.model
        self.target = target
        self.squared = bool(squared)

    def value(self, state, action, design, control_step):
        """Distance (or squared distance) of the tip to the target."""
        delta = tip_position(self.model, state.body_q) - self.target
        return float(delta @ delta) if self.squared else float(np.linalg.norm(delta))

    def grad(self, state, action, design, control_step):
        """(∂/∂state, None, None)."""
        delta = tip_position(self.model, state.body_q) - self.target
        if self.squared:
            g_tip = 2.0 * delta
        else:
            g_tip = delta / max(float(np.linalg.norm(delta)), 1e-12)
        g_q = tip_position_vjp(self.model, state.body_q, g_tip)
        return tree_zeros_with(state, body_q=g_q), None, None


class GrowthEffort:
    """Running term: ``(u + offset)²``, the squared growth rate [m²/s²]."""

    kind = "running"

    def __init__(self, *, simulator):
        pass

    def value(self, state, action, design, control_step):
        """Squared growth rate."""
        rate = float(action[0]) + float(design["growth.offset"])
        return rate * rate

    def grad(self, state, action, design, control_step):
        """(None, ∂/∂action, ∂/∂growth.offset)."""
        rate = float(action[0]) + float(design["growth.offset"])
        return None, np.array([2.0 * rate]), {"growth.offset": np.asarray(2.0 * rate)}
