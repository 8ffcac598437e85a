"""The plugin registers the mpm simulator, its observers, terms and examples with codesign."""

import os

import pytest

from codesign.plugins import get_plugin_manager, get_registry
from sim_mpm import plugin
from sim_mpm.scene import make_simulator
from sim_mpm.terms import (
    Actuation,
    CentroidObserver,
    KMeansObserver,
    MeanPosition,
    TargetDistance,
    VelocityPenalty,
)


@pytest.fixture(scope="module")
def registry():
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(plugin, name="mpm")
    return get_registry(manager)


def test_api_version():
    assert plugin.CODESIGN_API == (1, 1)


def test_components_are_registered(registry):
    assert registry.get("simulators", "mpm").factory is make_simulator
    assert registry.get("observers", "centroids").factory is CentroidObserver
    assert registry.get("observers", "kmeans").factory is KMeansObserver
    expected = {"mean_position": MeanPosition, "target_distance": TargetDistance,
                "velocity_penalty": VelocityPenalty, "actuation": Actuation}
    for name, factory in expected.items():
        assert registry.get("terms", name).factory is factory
        assert registry.get("terms", name).info["description"]


def test_examples_are_registered_with_walker_as_default(registry):
    names = registry.names("examples")
    assert "walker_2d" in names
    for name in names:
        assert os.path.isfile(registry.get("examples", name).factory)
    default = registry.default_example()
    assert default is not None and default.name == "walker_2d"
    assert registry.default_example("mpm") == default


def test_entry_point_is_discovered():
    """The installed distribution's entry point loads this plugin under the name mpm."""
    manager = get_plugin_manager(only=["mpm"])
    assert manager.has_plugin("mpm")
    assert "mpm" in get_registry(manager).names("simulators")
