"""The files a run reads, by content hash, and what changed since a journal recorded them.

An experiment names its assets and recordings by path (an image or a mesh of a scene, a
scene file, a video or a recording file), relative to the experiment file's folder (or to a
simulator's ``asset_dir`` option beside them). :func:`input_files` finds every such file in
the resolved experiment and hashes it; ``--resume`` compares them, and the plugin versions,
with what the interrupted run recorded (:func:`input_changes`, :func:`plugin_changes`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .config import ExperimentConfig, format_path

__all__ = ["file_sha256", "input_changes", "input_files", "plugin_changes"]

ASSET_DIR_KEY = "asset_dir"
"""An option of this name (a folder, relative to the experiment's) is where the relative
paths beside it, and below it, start too."""


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of the file at ``path`` as hex, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _strings(value: Any, path: tuple, folders: tuple[Path, ...]) -> Iterator[tuple]:
    """Every string leaf of ``value`` as (YAML path, text, folders it may be relative to)."""
    if isinstance(value, dict):
        asset_dir = value.get(ASSET_DIR_KEY)
        if isinstance(asset_dir, str):
            folders = (*folders, folders[0] / asset_dir)
        for key, item in value.items():
            yield from _strings(item, (*path, key), folders)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index), folders)
    elif isinstance(value, str):
        yield path, value, folders


def _existing_file(text: str, folders: Sequence[Path]) -> Path | None:
    """The first of ``folders / text`` that is a file (``text`` alone when absolute)."""
    for folder in folders:
        try:
            candidate = folder / text
            if candidate.is_file():
                return candidate.resolve()
        except (OSError, ValueError):  # a name too long or with a NUL byte names no file
            continue
    return None


def input_files(config: ExperimentConfig) -> list[dict[str, Any]]:
    """The files the experiment names, in YAML order: per file its YAML ``key``, the ``path``
    as written, the resolved ``file``, its ``sha256`` and its size in ``bytes``.

    A string value is taken for a file name when it names an existing file relative to the
    experiment's folder or to an ``asset_dir`` option beside or above it; names of bundled
    data (a package's scene by name) are not files and are covered by the plugin versions.
    """
    found = []
    for path, text, folders in _strings(config.data, (), (config.base_dir,)):
        file = _existing_file(text, folders)
        if file is not None:
            found.append({"key": format_path(path), "path": text, "file": str(file),
                          "sha256": file_sha256(file), "bytes": file.stat().st_size})
    return found


def input_changes(recorded: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[str]:
    """One line per input file that differs between ``recorded`` and ``current`` (both from
    :func:`input_files`): changed content (old and new hash), gone, or newly named."""
    before = {(row["key"], row["path"]): row for row in recorded}
    after = {(row["key"], row["path"]): row for row in current}
    changes = []
    for where, row in before.items():
        now = after.get(where)
        if now is None:
            changes.append(f"{row['key']}: {row['path']!r} ({row['file']}) is no longer read "
                           "(missing, or the experiment names another file)")
        elif now["sha256"] != row["sha256"]:
            changes.append(f"{row['key']}: {row['file']} changed: sha256 {row['sha256'][:16]} "
                           f"({row['bytes']} bytes) -> {now['sha256'][:16]} "
                           f"({now['bytes']} bytes)")
    changes += [f"{row['key']}: {row['path']!r} ({row['file']}) is read now but was not "
                "by the interrupted run" for where, row in after.items() if where not in before]
    return changes


def plugin_changes(recorded: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[str]:
    """One line per plugin that differs between two plugin tables
    (:func:`codesign.run_directory.plugin_table`): version changed, removed or added."""
    before = {row["name"]: row for row in recorded}
    after = {row["name"]: row for row in current}
    changes = []
    for name, row in before.items():
        now = after.get(name)
        if now is None:
            changes.append(f"plugin {name!r} ({row.get('distribution')} {row.get('version')}) "
                           "is no longer installed")
        elif (now.get("distribution"), now.get("version")) != (row.get("distribution"),
                                                               row.get("version")):
            changes.append(f"plugin {name!r}: {row.get('distribution')} {row.get('version')} "
                           f"-> {now.get('distribution')} {now.get('version')}")
    changes += [f"plugin {name!r} ({row.get('distribution')} {row.get('version')}) is new"
                for name, row in after.items() if name not in before]
    return changes
