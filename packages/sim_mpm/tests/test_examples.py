"""Every example experiment parses, validates against the registry and builds its parts.

Running the examples (full or quick) is the job of the cross-package tests; building checks
the scene, the design section against the simulator's design space, observers, terms and
the time step, without stepping.
"""

import importlib.resources

import pytest
import yaml

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_plugin_manager, get_registry
from codesign.validation import validate_config
from sim_mpm import plugin

EXAMPLES_DIR = importlib.resources.files("sim_mpm") / "examples"
EXAMPLE_FILES = sorted(EXAMPLES_DIR.glob("*.yaml"))


@pytest.fixture(scope="module")
def registry():
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(plugin, name="mpm")
    return get_registry(manager)


def test_every_registered_example_exists():
    assert {path.stem for path in EXAMPLE_FILES} == set(plugin.EXAMPLES)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_parses_with_safe_load(path):
    tree = yaml.safe_load(path.read_text())
    assert tree["simulator"]["name"] == "mpm"
    sections = ("simulator", "identification", "optimizer", "run", "quick") \
        if "identification" in tree else ("simulator", "controller", "observer", "objective",
                                          "optimizer", "run", "quick")
    for section in sections:
        assert section in tree, f"{path.name} lacks the {section} section"
    assert "Runtime:" in path.read_text().split("simulator:")[0]


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_builds(path, quick, registry):
    config = validate_config(load_config(path, quick=quick), registry)
    experiment = build_experiment(config, registry)
    simulator = experiment.simulator
    assert simulator.model.particle_count > 0
    if config.identification:
        assert all(r.actions.shape[1] == simulator.action_size
                   for r in experiment.problem.recordings)
    else:
        assert simulator.action_size == experiment.controller.action_size
    frame = simulator.render(simulator.initial_state(simulator.design_space().defaults()), {},
                             width=64, height=48)
    assert frame.shape == (48, 64, 3)


def test_walker_is_the_documented_demo(registry):
    config = validate_config(load_config(EXAMPLES_DIR / "walker_2d.yaml"), registry)
    experiment = build_experiment(config, registry)
    model = experiment.simulator.model
    assert model.stress_actuator_count == 4
    assert len(set(model.particle_group.tolist())) == 8
    assert experiment.observer.clusters == 7
    assert experiment.controller.hidden == [64, 64]
    free = {p.name for p in experiment.problem.space}
    assert {"design.particle.youngs_modulus", "design.particle.poissons_ratio",
            "design.particle.density"} <= free
    assert any(name.startswith("controller.") for name in free)
