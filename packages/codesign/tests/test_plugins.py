import importlib.metadata
import sys
import types
import warnings

import pytest
from pluggy import PluginValidationError

from codesign import PLUGIN_API_VERSION
from codesign.examples import register_examples
from codesign.hookspecs import hookimpl
from codesign.plugins import PluginWarning, RegistryError, get_plugin_manager, get_registry


def make_plugin(name="fake", api=(1, 1), simulators=("toy",)):
    module = types.ModuleType(f"fake_codesign_plugin_{name}")
    if api is not None:
        module.CODESIGN_API = api

    @hookimpl
    def codesign_register_simulators(register):
        for sim in simulators:
            register(sim, dict, description="a toy")

    @hookimpl
    def codesign_register_examples(register):
        register(f"{name}_example", "/nowhere.yaml", default=True)

    module.codesign_register_simulators = codesign_register_simulators
    module.codesign_register_examples = codesign_register_examples
    return module


def test_core_components_register_through_the_hooks():
    registry = get_registry(get_plugin_manager(load_entry_points=False))
    assert {"mlp", "open_loop", "sinusoid", "pd"} <= set(registry.names("controllers"))
    assert {"action_l2", "parameter_regularizer"} <= set(registry.names("terms"))
    entry = registry.get("controllers", "mlp")
    assert entry.plugin == "core" and entry.distribution == "codesign"


def test_a_registered_fake_plugin_appears_and_disappears():
    manager = get_plugin_manager(load_entry_points=False)
    plugin = make_plugin()
    manager.register(plugin, name="fake")
    registry = get_registry(manager)
    assert registry.get("simulators", "toy").plugin == "fake"
    assert registry.default_example().name == "fake_example"
    manager.unregister(plugin)
    with pytest.raises(RegistryError, match="unknown simulator 'toy'"):
        get_registry(manager).get("simulators", "toy")


def test_the_default_example_of_a_simulator_is_its_plugins():
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(make_plugin("b", simulators=("tb",)), name="b")
    manager.register(make_plugin("a", simulators=("ta",)), name="a")
    registry = get_registry(manager)
    assert registry.default_example().name == "a_example"  # the first plugin by name
    assert registry.default_example("tb").name == "b_example"
    with pytest.raises(RegistryError, match="unknown simulator 'tc'"):
        registry.default_example("tc")


def test_register_examples_finds_the_yaml_files_of_a_package(tmp_path, monkeypatch):
    folder = tmp_path / "fake_examples_package" / "examples"
    folder.mkdir(parents=True)
    (folder.parent / "__init__.py").write_text("")
    (folder / "one.yaml").write_text("simulator: {name: toy}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registered = []
    register_examples(lambda *args, **info: registered.append((args, info)),
                      "fake_examples_package", {"one": "the first"}, default="one")
    assert registered == [(("one", str(folder / "one.yaml")),
                           {"description": "the first", "default": True})]


def test_duplicate_names_are_refused():
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(make_plugin("a"), name="a")
    manager.register(make_plugin("b"), name="b")
    with pytest.raises(RegistryError, match="registered by both"):
        get_registry(manager)


class FakeEntryPoint:
    """An entry point of group ``codesign`` whose ``load`` imports once, as a module does."""

    def __init__(self, name, loader):
        self.name, self.group, self.value, self._loader = name, "codesign", f"{name}:plugin", loader
        self._plugin = None

    def load(self):
        if self._plugin is None:
            self._plugin = self._loader()
        return self._plugin


class FakeDistribution:
    """An installed distribution with one entry point, as importlib.metadata lists it."""

    def __init__(self, entry_point, version="1.2"):
        self.entry_points = [entry_point]
        self.metadata = {"name": f"{entry_point.name}-dist"}
        self.version = version


def _broken():
    raise ImportError("numba is missing")


def _misspelled():
    plugin = make_plugin("typo", simulators=("t",))

    @hookimpl
    def codesign_register_simulator(register):  # no such hook: "simulators"
        register("t2", dict)

    plugin.codesign_register_simulator = codesign_register_simulator
    return plugin


def _wrong_signature():
    plugin = make_plugin("sig", simulators=("s",))

    @hookimpl
    def codesign_register_terms(register, extra):
        register("s_term", dict)

    plugin.codesign_register_terms = codesign_register_terms
    return plugin


@pytest.fixture
def fake_entry_points(monkeypatch):
    points = [
        FakeEntryPoint("good", lambda: make_plugin("good", simulators=("g",))),
        FakeEntryPoint("broken", _broken),
        FakeEntryPoint("old", lambda: make_plugin("old", api=(0, 0), simulators=("o",))),
        FakeEntryPoint("undeclared", lambda: make_plugin("u", api=None, simulators=("u",))),
        FakeEntryPoint("typo", _misspelled),
        FakeEntryPoint("signature", _wrong_signature),
    ]
    monkeypatch.setattr(importlib.metadata, "distributions",
                        lambda: [FakeDistribution(point) for point in points])
    return points


def test_broken_or_incompatible_plugins_are_skipped_with_clear_warnings(fake_entry_points):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry = get_registry(get_plugin_manager())
    messages = [str(w.message) for w in caught if issubclass(w.category, PluginWarning)]
    assert registry.names("simulators") == ["g"]
    assert any("'broken'" in m and "numba is missing" in m for m in messages)
    assert any("'old'" in m and f"provides {PLUGIN_API_VERSION}" in m for m in messages)
    assert any("'undeclared'" in m and "CODESIGN_API" in m for m in messages)
    assert any("'typo'" in m and "unknown hook 'codesign_register_simulator'" in m
               for m in messages)
    assert any("'signature'" in m and "extra" in m for m in messages)
    assert len(messages) == 5


def test_entry_point_plugins_carry_their_distribution(fake_entry_points, monkeypatch):
    monkeypatch.setenv("CODESIGN_PLUGINS", "good")
    entry = get_registry(get_plugin_manager()).get("simulators", "g")
    assert (entry.plugin, entry.distribution, entry.version) == ("good", "good-dist", "1.2")


def test_a_misspelled_hook_registered_by_hand_fails_loudly():
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(_misspelled(), name="typo")
    with pytest.raises(PluginValidationError, match="unknown hook 'codesign_register_simulator'"):
        get_registry(manager)


def test_codesign_plugins_variable_restricts_loading(fake_entry_points, monkeypatch):
    monkeypatch.setenv("CODESIGN_PLUGINS", "good")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the broken ones are not even imported
        registry = get_registry(get_plugin_manager())
    assert registry.names("simulators") == ["g"]
    assert "mlp" in registry.names("controllers")  # the core always loads


def test_no_import_time_globals():
    assert get_plugin_manager(load_entry_points=False) is not get_plugin_manager(
        load_entry_points=False)
    assert "codesign" in sys.modules
