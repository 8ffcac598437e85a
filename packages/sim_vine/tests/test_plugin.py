import numpy as np
import pytest

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_registry
from codesign.validation import validate_config
from sim_vine import VineSimulator, plugin
from sim_vine.scene import make_simulator
from sim_vine.terms import GrowthEffort, KeypointObserver, TipObserver, TipTargetDistance


@pytest.fixture(scope="module")
def registry():
    return get_registry()


def test_plugin_declares_the_api_and_registers_components(registry):
    assert plugin.CODESIGN_API == (1, 1)
    assert registry.get("simulators", "vine").factory is make_simulator
    assert {"tip", "keypoints"} <= set(registry.names("observers"))
    assert {"tip_target_distance", "growth_effort"} <= set(registry.names("terms"))
    assert {"vine_runtime", "vine_cluttered", "vine_oscillation",
            "vine_wall"} <= set(registry.names("examples"))
    assert "vine_video" in registry.names("recordings")
    assert registry.default_example("vine").name == "vine_runtime"


@pytest.mark.parametrize("name", ["vine_runtime", "vine_cluttered"])
def test_examples_validate_and_build(registry, name):
    path = registry.get("examples", name).factory
    config = validate_config(load_config(path, quick=True), registry)
    experiment = build_experiment(config, registry)
    assert isinstance(experiment.problem.rollout.simulator, VineSimulator)


def test_terms_and_observers_values_and_gradients():
    sim = make_simulator(bodies=4, initial_angles=0.2)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    tip = TipObserver(simulator=sim).observe(state, design)
    points = KeypointObserver(simulator=sim, count=5).observe(state, design).reshape(5, 2)
    np.testing.assert_allclose(points[-1], tip)
    term = TipTargetDistance(simulator=sim, target=[tip[0] + 0.3, tip[1] + 0.4])
    assert term.value(state, None, design, 0) == pytest.approx(0.5)
    g_state, _, _ = term.grad(state, None, design, 0)
    assert np.linalg.norm(g_state.body_q[-1, :2]) == pytest.approx(1.0)
    squared = TipTargetDistance(simulator=sim, target=[tip[0] + 0.3, tip[1] + 0.4], squared=True)
    assert squared.value(state, None, design, 0) == pytest.approx(0.25)
    effort = GrowthEffort(simulator=sim)
    assert effort.value(state, np.array([0.2]), design, 0) == pytest.approx(0.04)
    _, g_action, g_design = effort.grad(state, np.array([0.2]), design, 0)
    assert g_action[0] == pytest.approx(0.4) and float(g_design["growth.offset"]) == 0.4
    with pytest.raises(ValueError, match="target"):
        TipTargetDistance(simulator=sim, target=[1.0])
    with pytest.raises(ValueError, match="count"):
        KeypointObserver(simulator=sim, count=1)
