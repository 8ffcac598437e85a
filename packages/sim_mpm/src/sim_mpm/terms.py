"""Observers and objective terms of MPM soft robots, each with an exact gradient.

Observers (``observe`` / ``observe_vjp``):

- :class:`CentroidObserver`: centroids of the particle groups (positions relative to the
  whole body's centroid, velocities relative to its mean velocity), plus the mean velocity.
- :class:`KMeansObserver`: the same for k clusters found by k-means on the rest shape.

Terms (``value`` / ``grad``): :class:`MeanPosition`, :class:`TargetDistance`,
:class:`VelocityPenalty`, :class:`Actuation`.

Centroids are unweighted particle means, so observations do not depend on the density
design and ``observe_vjp`` returns no design gradient. States need the fields
``particle_x`` [m] and ``particle_v`` [m/s], shape (n, dim); gradients are states of the
same type with zeros elsewhere.
"""

from __future__ import annotations

import numpy as np

from codesign.backend import to_host
from codesign.terms import TERM_KINDS
from codesign.tree import tree_zeros_with

__all__ = [
    "CentroidObserver",
    "KMeansObserver",
    "kmeans_labels",
    "MeanPosition",
    "TargetDistance",
    "VelocityPenalty",
    "Actuation",
]


def _rest_positions(simulator) -> np.ndarray:
    state = simulator.initial_state(simulator.design_space().defaults())
    return to_host(state.particle_x).astype(np.float64)


def _particle_groups(simulator) -> np.ndarray:
    return to_host(simulator.model.particle_group).astype(np.int64).reshape(-1)


# -- observers --------------------------------------------------------------------------------


class _GroupCentroids:
    """Shared observation of per-label centroids: a fixed linear map of the particle
    positions and of their velocities (rows of particle weights, scales included).

    ``labels`` (n,): 0..k-1 for observed particles (every label non-empty), −1 for particles
    that only count towards the body centroid and mean velocity.
    """

    def _setup(self, labels: np.ndarray, rest: np.ndarray, *, velocities: bool,
               mean_velocity: bool, normalize: bool, position_scale: float,
               velocity_scale: float):
        if not (position_scale > 0 and velocity_scale > 0):
            raise ValueError("position_scale and velocity_scale must be positive")
        if normalize:  # the rest shape's radius of gyration, 1 for a single point
            spread = np.sum((rest - rest.mean(0)) ** 2, axis=1)
            position_scale = float(np.sqrt(np.mean(spread))) or 1.0
        n, self.dim = rest.shape
        self.labels = labels
        members = labels[None, :] == np.arange(int(labels.max()) + 1)[:, None]
        counts = members.sum(axis=1)
        if np.any(counts == 0):
            raise ValueError(f"cluster(s) {np.flatnonzero(counts == 0).tolist()} are empty")
        relative = members / counts[:, None] - 1.0 / n  # centroid minus the body's, (k, n)
        self._position_rows = relative / position_scale
        rows = [relative] if velocities else []
        if mean_velocity:
            rows.append(np.full((1, n), 1.0 / n))
        self._velocity_rows = np.concatenate([np.zeros((0, n)), *rows]) / velocity_scale
        self.size = (len(self._position_rows) + len(self._velocity_rows)) * self.dim

    def observe(self, state, design):
        """Observation, shape (size,): relative positions, relative velocities, mean velocity."""
        x = self._position_rows @ to_host(state.particle_x).astype(np.float64)
        v = self._velocity_rows @ to_host(state.particle_v).astype(np.float64)
        return np.concatenate([x.reshape(-1), v.reshape(-1)])

    def observe_vjp(self, state, design, g_observation):
        """(∂L/∂state, None) given ∂L/∂observation, shape (size,)."""
        g = np.asarray(g_observation, dtype=np.float64).reshape(-1, self.dim)
        k = len(self._position_rows)
        return tree_zeros_with(state, particle_x=self._position_rows.T @ g[:k],
                               particle_v=self._velocity_rows.T @ g[k:]), None


class CentroidObserver(_GroupCentroids):
    """Centroids of particle groups (the model's ``particle_group``), relative to the body.

    Observation: for each observed group, centroid position minus the body centroid
    (dim entries) [m], then (``velocities``) each group's mean velocity minus the body's
    [m/s], then (``mean_velocity``) the body's mean velocity. Positions are divided by
    ``position_scale`` (with ``normalize``, the rest shape's radius of gyration) and
    velocities by ``velocity_scale``.

    Args:
        groups: particle groups to observe, default every group present.
    """

    def __init__(self, *, simulator, groups: list[int] | None = None, velocities: bool = True,
                 mean_velocity: bool = True, normalize: bool = False,
                 position_scale: float = 1.0, velocity_scale: float = 1.0):
        rest = _rest_positions(simulator)
        particle_group = _particle_groups(simulator)
        present = sorted(set(particle_group.tolist()))
        groups = present if groups is None else [int(g) for g in groups]
        missing = [g for g in groups if g not in present]
        if missing or not groups:
            raise ValueError(f"observed group(s) {missing or groups} have no particles; "
                             f"groups present: {present}")
        labels = np.full(len(rest), -1, dtype=np.int64)
        for index, group in enumerate(groups):
            labels[particle_group == group] = index
        self.groups = groups
        self._setup(labels, rest, velocities=velocities, mean_velocity=mean_velocity,
                    normalize=normalize, position_scale=position_scale,
                    velocity_scale=velocity_scale)


def kmeans_labels(points: np.ndarray, clusters: int, *, seed: int = 0,
                  iterations: int = 100) -> np.ndarray:
    """Lloyd's k-means with k-means++ seeding; labels (n,) in 0..clusters-1, deterministic.

    Clusters are numbered by ascending centroid coordinates (x, then y, then z) so that the
    labels do not depend on the seeding order.
    """
    points = np.asarray(points, dtype=np.float64)
    n = len(points)
    if not 1 <= clusters <= n:
        raise ValueError(f"k-means needs 1 <= clusters <= number of particles ({n}), "
                         f"got {clusters}")
    rng = np.random.default_rng(seed)
    centers = [points[rng.integers(n)]]
    for _ in range(1, clusters):
        d2 = np.min(((points[:, None, :] - np.asarray(centers)[None]) ** 2).sum(-1), axis=1)
        total = d2.sum()
        pick = rng.choice(n, p=d2 / total) if total > 0 else rng.integers(n)
        centers.append(points[pick])
    centers = np.asarray(centers)
    labels = np.full(n, -1)
    for _ in range(iterations):
        d2 = ((points[:, None, :] - centers[None]) ** 2).sum(-1)
        new = np.argmin(d2, axis=1)
        for c in range(clusters):
            if not np.any(new == c):  # an empty cluster restarts at the worst-served point
                far = int(np.argmax(d2[np.arange(n), new]))
                new[far] = c
        if np.array_equal(new, labels):
            break
        labels = new
        centers = np.stack([points[labels == c].mean(axis=0) for c in range(clusters)])
    order = np.lexsort(centers.T[::-1])
    rank = np.empty(clusters, dtype=np.int64)
    rank[order] = np.arange(clusters)
    return rank[labels]


class KMeansObserver(_GroupCentroids):
    """Centroids of ``clusters`` k-means clusters of the rest particles (ChainQueen's walker).

    The clusters are fixed once from the default design's initial positions (seeded,
    deterministic); the observation is as for :class:`CentroidObserver`.
    """

    def __init__(self, *, simulator, clusters: int = 7, seed: int = 0, velocities: bool = True,
                 mean_velocity: bool = True, normalize: bool = False,
                 position_scale: float = 1.0, velocity_scale: float = 1.0):
        rest = _rest_positions(simulator)
        self.clusters = int(clusters)
        self._setup(kmeans_labels(rest, self.clusters, seed=seed), rest,
                    velocities=velocities, mean_velocity=mean_velocity, normalize=normalize,
                    position_scale=position_scale, velocity_scale=velocity_scale)


# -- terms ------------------------------------------------------------------------------------


class _ParticleTerm:
    """Shared set-up: dimension and the mask of particles a term looks at, those of
    ``group`` (every particle for ``None``)."""

    def __init__(self, simulator, group):
        self.dim = _rest_positions(simulator).shape[1]
        groups = _particle_groups(simulator)
        self.mask = np.ones(len(groups), dtype=bool) if group is None else groups == int(group)
        if not np.any(self.mask):
            raise ValueError(f"particle group {group} is empty; groups present: "
                             f"{sorted(set(groups.tolist()))}")
        self.count = int(self.mask.sum())


class MeanPosition(_ParticleTerm):
    """Final term: mean particle coordinate along ``axis`` [m] (of one group or all).

    Weight it −1 to reward walking along +axis.
    """

    kind = "final"

    def __init__(self, *, simulator, axis: int = 0, group: int | None = None):
        super().__init__(simulator, group)
        if not 0 <= int(axis) < self.dim:
            raise ValueError(f"axis must be in 0..{self.dim - 1} for a {self.dim}D scene, "
                             f"got {axis}")
        self.axis = int(axis)

    def value(self, state, action, design, control_step):
        """Mean of ``particle_x[mask, axis]`` [m]."""
        return float(np.mean(to_host(state.particle_x)[self.mask, self.axis]))

    def grad(self, state, action, design, control_step):
        """(∂/∂state, None, None)."""
        g_x = np.zeros((len(self.mask), self.dim))
        g_x[self.mask, self.axis] = 1.0 / self.count
        return tree_zeros_with(state, particle_x=g_x), None, None


class TargetDistance(_ParticleTerm):
    """Final term: distance [m] (``squared``: squared distance [m²]) from the centroid of a
    group (or of all particles) to ``target``, shape (dim,)."""

    kind = "final"

    def __init__(self, *, simulator, target: list[float], group: int | None = None,
                 squared: bool = False):
        super().__init__(simulator, group)
        self.target = np.asarray(target, dtype=np.float64).reshape(-1)
        if self.target.size != self.dim or not np.all(np.isfinite(self.target)):
            raise ValueError(f"target must be {self.dim} finite coordinates [m], got {target!r}")
        self.squared = bool(squared)

    def _offset(self, state):
        return to_host(state.particle_x)[self.mask].astype(np.float64).mean(0) - self.target

    def value(self, state, action, design, control_step):
        """‖centroid − target‖ (or its square)."""
        offset = self._offset(state)
        squared = float(offset @ offset)
        return squared if self.squared else float(np.sqrt(squared))

    def grad(self, state, action, design, control_step):
        """(∂/∂state, None, None); the unsquared distance has gradient 0 at the target."""
        offset = self._offset(state)
        if self.squared:
            g_centroid = 2.0 * offset
        else:
            norm = float(np.linalg.norm(offset))
            g_centroid = offset / norm if norm > 0 else np.zeros(self.dim)
        g_x = np.zeros((len(self.mask), self.dim))
        g_x[self.mask] = g_centroid / self.count
        return tree_zeros_with(state, particle_x=g_x), None, None


class VelocityPenalty(_ParticleTerm):
    """Mean squared particle speed ``mean_i ‖v_i‖²`` [m²/s²] of a group or all particles.

    ``kind`` "final" penalizes the end state (come to rest), "running" every control step.
    """

    def __init__(self, *, simulator, kind: str = "final", group: int | None = None):
        if kind not in TERM_KINDS:
            raise ValueError(f"velocity_penalty kind must be one of {TERM_KINDS}, got {kind!r}")
        super().__init__(simulator, group)
        self.kind = kind

    def value(self, state, action, design, control_step):
        """mean ‖v‖² over the particles."""
        v = to_host(state.particle_v)[self.mask].astype(np.float64)
        return float(np.sum(v * v) / self.count)

    def grad(self, state, action, design, control_step):
        """(∂/∂state, None, None)."""
        v = to_host(state.particle_v).astype(np.float64)
        g_v = np.where(self.mask[:, None], 2.0 * v / self.count, 0.0)
        return tree_zeros_with(state, particle_v=g_v), None, None


class Actuation:
    """Running term ``Σ_j u_j²`` over the action (or the listed ``indices`` of it)."""

    kind = "running"

    def __init__(self, *, simulator, indices: list[int] | None = None):
        size = int(simulator.action_size)
        self.indices = np.arange(size) if indices is None else np.asarray(indices, np.int64)
        if np.any((self.indices < 0) | (self.indices >= size)):
            raise ValueError(f"actuation indices {list(self.indices)} out of range for "
                             f"{size} action(s)")

    def value(self, state, action, design, control_step):
        """Σ u_j² over the chosen signals."""
        u = np.asarray(action, dtype=np.float64)[self.indices]
        return float(u @ u)

    def grad(self, state, action, design, control_step):
        """(None, ∂/∂action, None)."""
        action = np.asarray(action, dtype=np.float64)
        g = np.zeros_like(action)
        g[self.indices] = 2.0 * action[self.indices]
        return None, g, None
