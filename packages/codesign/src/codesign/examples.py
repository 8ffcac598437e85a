"""Example experiments shipped as package data, registered by a plugin's examples hook."""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable, Mapping

__all__ = ["register_examples"]


def register_examples(register: Callable, package: str, descriptions: Mapping[str, str], *,
                      default: str | None = None) -> None:
    """Register ``package``'s examples, ``<package>/examples/<name>.yaml`` for each name of
    ``descriptions`` (name -> one-line description); ``default`` names the one ``codesign
    demo`` runs. The folder is package data, so an installed wheel has the examples and
    their assets (images, meshes, videos) beside them, where their relative paths start."""
    folder = importlib.resources.files(package) / "examples"
    for name, description in descriptions.items():
        register(name, str(folder / f"{name}.yaml"), description=description,
                 default=name == default)
