"""sim_vine's layout: the physics at the package root, the wings ``vision`` and ``fit`` import
it and never the other way (``vision`` does not import ``fit`` either)."""

import ast
from pathlib import Path

import sim_vine

PACKAGE = Path(sim_vine.__file__).parent


def _imported_packages(path: Path) -> set[str]:
    """Absolute names of the sim_vine modules ``path`` imports, e.g. ``sim_vine.fit.shooting``."""
    own = ["sim_vine", *path.parent.relative_to(PACKAGE.parent).parts[1:]]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = own[:len(own) - node.level + 1] if node.level else []
            module = [*base, *node.module.split(".")] if node.module else base
            names.add(".".join(module))
            if node.module is None:  # from . import fit
                names |= {".".join([*module, alias.name]) for alias in node.names}
    return {name for name in names if name.startswith("sim_vine")}


def _importers_of(wing: str, modules) -> list[str]:
    return sorted(f"{path.relative_to(PACKAGE)} imports {name}" for path in modules
                  for name in _imported_packages(path)
                  if name == f"sim_vine.{wing}" or name.startswith(f"sim_vine.{wing}."))


def test_the_physics_imports_no_wing():
    # plugin.py wires every part into codesign's registries, so it alone may import a wing
    physics = [p for p in PACKAGE.glob("*.py") if p.name != "plugin.py"]
    assert len(physics) > 10
    assert _importers_of("vision", physics) == []
    assert _importers_of("fit", physics) == []


def test_vision_does_not_import_fit():
    vision = list((PACKAGE / "vision").glob("*.py"))
    assert vision and _importers_of("fit", vision) == []


def test_the_import_scan_sees_relative_imports_of_a_wing():
    shooting = _imported_packages(PACKAGE / "fit" / "shooting.py")
    assert {"sim_vine.state", "sim_vine.vision.keypoints", "sim_vine.fit.start_pose"} <= shooting
    assert "sim_vine.fit.video_source" in _imported_packages(PACKAGE / "plugin.py")
