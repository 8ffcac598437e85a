"""The file an option names: a path relative to the experiment file's folder, or the name of
a file a package ships (sim_rigid's robots, sim_pbd's URDFs)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["named_file"]


def named_file(option: str, name: str, *, base_dir: str | Path | None,
               bundled: Mapping[str, Path], error: type[Exception]) -> Path:
    """The file ``name`` names: a path relative to ``base_dir`` (default the working
    directory) or absolute when it is a file, else ``bundled[name]`` (bundled files by name).

    Raises ``error`` naming ``option``, the folder searched and the bundled names otherwise.
    """
    folder = Path(base_dir or ".")
    path = folder / name
    if path.is_file():
        return path
    if name in bundled:
        return bundled[name]
    raise error(f"{option} {name!r} is neither a file in {str(folder.resolve())!r} nor a "
                f"bundled robot; bundled: {sorted(bundled)}")
