"""Observers and objective terms: values, exact gradients (gradcheck) and option errors."""

import types

import numpy as np
import pytest

from codesign import DesignSpace
from codesign.testing import gradcheck
from codesign.tree import tree_vdot
from sim_mpm.state import MPMState
from sim_mpm.terms import (
    Actuation,
    CentroidObserver,
    KMeansObserver,
    MeanPosition,
    TargetDistance,
    VelocityPenalty,
    kmeans_labels,
)


class FakeSimulator:
    """Just what observers and terms read: rest state, particle groups, action size."""

    def __init__(self, rest_x, groups, action_size=3):
        self.model = types.SimpleNamespace(particle_group=np.asarray(groups))
        self.action_size = action_size
        self._rest = np.asarray(rest_x, dtype=np.float64)

    def design_space(self):
        return DesignSpace([])

    def initial_state(self, design):
        n, d = self._rest.shape
        eye = np.broadcast_to(np.eye(d), (n, d, d)).copy()
        return MPMState(self._rest.copy(), np.zeros((n, d)), eye, np.zeros((n, d, d)))


def random_state(sim, seed=1):
    rng = np.random.default_rng(seed)
    state = sim.initial_state({})
    n, d = state.particle_x.shape
    return MPMState(state.particle_x + 0.01 * rng.normal(size=(n, d)), rng.normal(size=(n, d)),
                    state.particle_F + 0.1 * rng.normal(size=(n, d, d)),
                    rng.normal(size=(n, d, d)))


@pytest.fixture(params=[2, 3])
def sim(request):
    rng = np.random.default_rng(0)
    d = request.param
    rest = rng.uniform(0.2, 0.6, size=(60, d))
    groups = np.repeat([0, 1, 2, 5], 15)
    return FakeSimulator(rest, groups)


def check_state_gradient(fn, grad_state, state):
    report = gradcheck(lambda inputs: fn(inputs["state"]), {"state": state},
                       {"state": grad_state}, tolerance=1e-6)
    report.assert_ok()
    return report


def check_observer(observer, state):
    rng = np.random.default_rng(4)
    weights = rng.normal(size=observer.size)
    g_state, g_design = observer.observe_vjp(state, {}, weights)
    assert g_design is None
    check_state_gradient(lambda s: float(observer.observe(s, {}) @ weights), g_state, state)


def test_centroid_observer_values(sim):
    observer = CentroidObserver(simulator=sim)
    d = sim._rest.shape[1]
    assert observer.groups == [0, 1, 2, 5]
    assert observer.size == 4 * d * 2 + d
    state = random_state(sim)
    obs = observer.observe(state, {})
    x, v = state.particle_x, state.particle_v
    expected = x[45:60].mean(0) - x.mean(0)
    np.testing.assert_allclose(obs[3 * d:4 * d], expected, atol=1e-15)
    np.testing.assert_allclose(obs[-d:], v.mean(0), atol=1e-15)
    np.testing.assert_allclose(obs[4 * d:5 * d], v[:15].mean(0) - v.mean(0), atol=1e-15)


def test_centroid_observer_gradients(sim):
    state = random_state(sim)
    check_observer(CentroidObserver(simulator=sim), state)
    check_observer(CentroidObserver(simulator=sim, groups=[5, 1], mean_velocity=False,
                                    normalize=True, velocity_scale=2.0), state)
    check_observer(CentroidObserver(simulator=sim, velocities=False, mean_velocity=False), state)


def test_centroid_observer_rejects_missing_groups(sim):
    with pytest.raises(ValueError, match="no particles"):
        CentroidObserver(simulator=sim, groups=[3])
    with pytest.raises(ValueError, match="positive"):
        CentroidObserver(simulator=sim, velocity_scale=0.0)


def test_kmeans_is_deterministic_and_spatial():
    rng = np.random.default_rng(2)
    blobs = np.concatenate([rng.normal(c, 0.01, size=(30, 2)) for c in
                            ([0.8, 0.1], [0.1, 0.1], [0.5, 0.9])])
    labels = kmeans_labels(blobs, 3, seed=7)
    np.testing.assert_array_equal(labels, kmeans_labels(blobs, 3, seed=7))
    # clusters are numbered by ascending x: the blob at x=0.1 is 0, x=0.5 is 1, x=0.8 is 2.
    np.testing.assert_array_equal(labels, np.repeat([2, 0, 1], 30))
    np.testing.assert_array_equal(kmeans_labels(blobs, 3, seed=99), labels)
    with pytest.raises(ValueError, match="clusters"):
        kmeans_labels(blobs, 0)


def test_kmeans_observer_gradients(sim):
    observer = KMeansObserver(simulator=sim, clusters=7, seed=0)
    d = sim._rest.shape[1]
    assert observer.size == 7 * d * 2 + d
    assert sorted(set(observer.labels.tolist())) == list(range(7))
    check_observer(observer, random_state(sim))


def test_mean_position(sim):
    state = random_state(sim)
    term = MeanPosition(simulator=sim, axis=1)
    assert term.kind == "final"
    assert term.value(state, None, {}, 0) == pytest.approx(state.particle_x[:, 1].mean())
    g_state, g_action, g_design = term.grad(state, None, {}, 0)
    assert g_action is None and g_design is None
    check_state_gradient(lambda s: term.value(s, None, {}, 0), g_state, state)
    grouped = MeanPosition(simulator=sim, axis=0, group=2)
    assert grouped.value(state, None, {}, 0) == pytest.approx(state.particle_x[30:45, 0].mean())
    check_state_gradient(lambda s: grouped.value(s, None, {}, 0),
                         grouped.grad(state, None, {}, 0)[0], state)
    with pytest.raises(ValueError, match="axis"):
        MeanPosition(simulator=sim, axis=3)
    with pytest.raises(ValueError, match="group 4 is empty"):
        MeanPosition(simulator=sim, group=4)


@pytest.mark.parametrize("squared", [False, True])
def test_target_distance(sim, squared):
    state = random_state(sim)
    d = sim._rest.shape[1]
    target = [0.9] * d
    term = TargetDistance(simulator=sim, target=target, group=1, squared=squared)
    distance = np.linalg.norm(state.particle_x[15:30].mean(0) - target)
    assert term.value(state, None, {}, 0) == pytest.approx(distance**2 if squared else distance)
    check_state_gradient(lambda s: term.value(s, None, {}, 0), term.grad(state, None, {}, 0)[0],
                         state)
    with pytest.raises(ValueError, match="target"):
        TargetDistance(simulator=sim, target=[1.0] * (d + 1))


@pytest.mark.parametrize("kind", ["final", "running"])
def test_velocity_penalty(sim, kind):
    state = random_state(sim)
    term = VelocityPenalty(simulator=sim, kind=kind, group=0)
    assert term.kind == kind
    v = state.particle_v[:15]
    assert term.value(state, None, {}, 0) == pytest.approx(np.sum(v * v) / 15)
    check_state_gradient(lambda s: term.value(s, None, {}, 0), term.grad(state, None, {}, 0)[0],
                         state)
    with pytest.raises(ValueError, match="kind"):
        VelocityPenalty(simulator=sim, kind="sometimes")


def test_actuation(sim):
    action = np.array([0.5, -0.25, 1.0])
    term = Actuation(simulator=sim)
    assert term.kind == "running"
    assert term.value(None, action, {}, 0) == pytest.approx(1.3125)
    _, g_action, _ = term.grad(None, action, {}, 0)
    report = gradcheck(lambda inputs: term.value(None, inputs["action"], {}, 0),
                       {"action": action}, {"action": g_action})
    report.assert_ok()
    partial = Actuation(simulator=sim, indices=[2])
    assert partial.value(None, action, {}, 0) == pytest.approx(1.0)
    np.testing.assert_array_equal(partial.grad(None, action, {}, 0)[1], [0.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="out of range"):
        Actuation(simulator=sim, indices=[3])


def test_gradients_are_full_states(sim):
    """The rollout adds term gradients to state adjoints leafwise: every field must exist."""
    state = random_state(sim)
    g_state = MeanPosition(simulator=sim).grad(state, None, {}, 0)[0]
    assert isinstance(g_state, MPMState)
    assert tree_vdot(g_state, g_state) == pytest.approx(1 / 60)  # Σ (1/n)² over n = 60
