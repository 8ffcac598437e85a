"""Plugin discovery and the registry of components built from the registration hooks."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import warnings
from collections.abc import Callable
from typing import Any

import pluggy

from . import PLUGIN_API_VERSION, hookspecs

__all__ = [
    "COMPONENT_KINDS",
    "PluginWarning",
    "RegistryError",
    "distribution_of",
    "Registration",
    "Registry",
    "get_plugin_manager",
    "get_registry",
]

COMPONENT_KINDS = ("simulators", "terms", "observers", "controllers", "optimizers",
                   "recordings", "examples", "executors", "keypoint_extractors")


class PluginWarning(UserWarning):
    """A plugin was skipped; the message says which and why."""


class RegistryError(LookupError):
    """An unknown component name, or one registered twice."""


@dataclasses.dataclass(frozen=True)
class Registration:
    """One registered component: its name, factory (or example path), plugin and extra info."""

    kind: str
    name: str
    factory: Any
    plugin: str
    distribution: str | None
    version: str | None
    info: dict[str, Any]


class Registry:
    """Components by kind and name, collected from every registered plugin's hooks; a hook
    that codesign does not declare (a misspelled name) raises pluggy's
    ``PluginValidationError``."""

    def __init__(self, plugin_manager: pluggy.PluginManager):
        plugin_manager.check_pending()
        self._entries: dict[str, dict[str, Registration]] = {k: {} for k in COMPONENT_KINDS}
        for kind in COMPONENT_KINDS:
            hook = getattr(plugin_manager.hook, f"codesign_register_{kind}")
            for impl in hook.get_hookimpls():
                plugin_name = plugin_manager.get_name(impl.plugin) or repr(impl.plugin)
                dist = distribution_of(plugin_manager, impl.plugin)
                impl.function(register=self._registrar(kind, plugin_name, dist))

    def _registrar(self, kind: str, plugin: str, dist) -> Callable:
        def register(name: str, factory, **info) -> None:
            if name in self._entries[kind]:
                other = self._entries[kind][name].plugin
                raise RegistryError(
                    f"{kind[:-1]} {name!r} is registered by both {other!r} and {plugin!r}")
            self._entries[kind][name] = Registration(
                kind=kind, name=name, factory=factory, plugin=plugin,
                distribution=dist[0] if dist else None, version=dist[1] if dist else None,
                info=dict(info))

        return register

    def names(self, kind: str, *, ordered: bool = False) -> list[str]:
        """Registered names of one kind, sorted (``ordered``: in registration order, the
        core's first)."""
        return list(self._entries[kind]) if ordered else sorted(self._entries[kind])

    def get(self, kind: str, name: str) -> Registration:
        """The registration of ``name``; unknown names raise RegistryError listing the known."""
        if kind not in self._entries:
            raise RegistryError(f"unknown component kind {kind!r}; kinds: {COMPONENT_KINDS}")
        try:
            return self._entries[kind][name]
        except KeyError:
            known = ", ".join(self.names(kind)) or "none installed"
            raise RegistryError(f"unknown {kind[:-1]} {name!r}; available: {known}") from None

    def all(self) -> list[Registration]:
        """Every registration, grouped by kind."""
        return [r for kind in COMPONENT_KINDS for r in self._entries[kind].values()]

    def default_example(self, simulator: str | None = None) -> Registration | None:
        """The example registered with ``default=True`` by the plugin of ``simulator`` (an
        unknown name raises RegistryError), or, without one, by the first plugin by name
        that registers a default example; None when there is none."""
        plugin = None if simulator is None else self.get("simulators", simulator).plugin
        defaults = [r for r in self._entries["examples"].values()
                    if r.info.get("default") and plugin in (None, r.plugin)]
        return min(defaults, key=lambda r: r.plugin, default=None)


def distribution_of(plugin_manager: pluggy.PluginManager, plugin) -> tuple[str, str] | None:
    """``(distribution name, version)`` a registered plugin came from, if known: pluggy's
    record for entry-point plugins, codesign's own for the core's modules."""
    for loaded, dist in plugin_manager.list_plugin_distinfo():
        if loaded is plugin:
            return dist.project_name, dist.version
    if getattr(plugin, "__name__", "").startswith("codesign"):
        from . import __version__

        return "codesign", __version__
    return None


def _api_problem(plugin) -> str | None:
    """Why ``plugin`` does not support this codesign's plugin API, or None if it does."""
    declared = getattr(plugin, "CODESIGN_API", None)
    if declared is None:
        return "it does not declare CODESIGN_API = (low, high)"
    try:
        low, high = (int(v) for v in declared)
    except (TypeError, ValueError):
        return f"its CODESIGN_API {declared!r} is not a pair of integers"
    if not low <= PLUGIN_API_VERSION <= high:
        return (f"it supports plugin API {low}..{high} but this codesign provides "
                f"{PLUGIN_API_VERSION}; upgrade the plugin or codesign")
    return None


def _load(entry_point) -> tuple[Any, str | None]:
    """(plugin, None), or (None, why it cannot be used: it fails to import, or declares no
    supported API version)."""
    try:
        plugin = entry_point.load()
    except Exception as exc:  # any import failure of third-party code is reported
        return None, f"it failed to import ({entry_point.value}): {exc!r}"
    why = _api_problem(plugin)
    return (plugin, None) if why is None else (None, why)


def _skip(manager: pluggy.PluginManager, name: str, why: str) -> None:
    """Warn that plugin ``name`` is skipped and block it (unregistering what it added)."""
    warnings.warn(f"skipping codesign plugin {name!r}: {why}", PluginWarning, stacklevel=3)
    manager.set_blocked(name)


def get_plugin_manager(*, load_entry_points: bool = True,
                       only: list[str] | None = None) -> pluggy.PluginManager:
    """Build a fresh plugin manager with the core's own components and installed plugins.

    Entry points in group ``codesign`` are loaded unless ``load_entry_points`` is false.
    ``only`` (or the environment variable ``CODESIGN_PLUGINS=a,b``) restricts loading to
    those entry-point names. A plugin that fails to import, declares an unsupported API
    version, has a hook whose signature does not match its specification, or implements
    a hook that codesign does not declare (a misspelled name) is skipped with a
    :class:`PluginWarning` naming it and the reason. pluggy loads the rest and records
    their distributions (:func:`distribution_of`).
    """
    from . import _core_plugin

    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    manager.register(_core_plugin, name="core")
    if not load_entry_points:
        return manager
    if only is None and os.environ.get("CODESIGN_PLUGINS"):
        only = [n.strip() for n in os.environ["CODESIGN_PLUGINS"].split(",") if n.strip()]
    group = hookspecs.PROJECT_NAME
    loaded = {}  # entry-point name: plugin, to name one that pluggy finds invalid
    for dist in importlib.metadata.distributions():
        for entry_point in dist.entry_points:
            name = entry_point.name
            if entry_point.group != group or name in loaded or manager.is_blocked(name):
                continue
            if only is not None and name not in only:
                manager.set_blocked(name)  # not even imported
                continue
            plugin, why = _load(entry_point)
            if why is None:
                loaded[name] = plugin
            else:
                _skip(manager, name, why)
    while True:  # each invalid plugin is skipped; pluggy then loads the others again
        try:
            manager.load_setuptools_entrypoints(group)
            manager.check_pending()
            return manager
        except pluggy.PluginValidationError as exc:
            names = [name for name, plugin in loaded.items() if plugin is exc.plugin]
            if not names:  # the core's own hooks: a bug, not a plugin to skip
                raise
            _skip(manager, names[0], str(exc))


def get_registry(plugin_manager: pluggy.PluginManager | None = None) -> Registry:
    """The registry of every component the plugins (default: all installed) register."""
    return Registry(plugin_manager or get_plugin_manager())
