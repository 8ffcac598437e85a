"""Each package installs alone with plain pip into a fresh virtual environment.

The core first, by itself; then each simulator plugin on top, resolving ``codesign`` by its
declared version range: the plugin and its examples (package data) show up in ``codesign
plugins``, an example copied elsewhere with its assets validates from another working
directory, and ``codesign demo <simulator> --quick`` runs there.
"""

import os
import shutil
import subprocess
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = [p.name for p in sorted((ROOT / "packages").iterdir())
           if p.name.startswith("sim_") and (p / "src" / p.name / "plugin.py").exists()]
ASSET_EXAMPLES = {"sim_mpm": "png_animal_2d", "sim_vine": "vine_oscillation"}
"""Per plugin, an example that reads an asset file beside it (an image, a video)."""


def run(args, **kwargs):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    return subprocess.run(args, check=True, capture_output=True, text=True, env=env, **kwargs)


def simulator_key(plugin: str) -> str:
    """The plugin's entry-point name, its simulator's key in YAML."""
    project = tomllib.loads((ROOT / "packages" / plugin / "pyproject.toml").read_text())
    (key,) = project["project"]["entry-points"]["codesign"]
    return key


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory):
    target = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(target)
    return str(target / ("Scripts" if os.name == "nt" else "bin") / "python")


def test_core_installs_alone_with_plain_pip(fresh_python):
    run([fresh_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(ROOT / "packages" / "codesign")])
    out = run([fresh_python, "-c", "import codesign; print(codesign.__version__)"]).stdout
    assert out.strip() == "0.1.0"


@pytest.mark.parametrize("plugin", PLUGINS)
def test_each_plugin_installs_on_the_core_with_its_examples(fresh_python, plugin, tmp_path):
    run([fresh_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(ROOT / "packages" / plugin)])
    codesign = str(Path(fresh_python).parent / "codesign")
    listing = run([codesign, "plugins"]).stdout
    assert plugin in listing
    examples = sorted((ROOT / "packages" / plugin / "src" / plugin / "examples").glob("*.yaml"))
    registered = {line.split()[1] for line in listing.splitlines() if line.startswith("example ")}
    assert {path.stem for path in examples} <= registered

    installed = run([fresh_python, "-c", f"import importlib.resources as r; "
                                         f"print(r.files({plugin!r}) / 'examples')"]).stdout
    copy = tmp_path / "copy"
    shutil.copytree(installed.strip(), copy)  # from site-packages: the wheel holds them
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    example = copy / f"{ASSET_EXAMPLES[plugin]}.yaml"
    out = run([codesign, "validate", str(example), "--quick"], cwd=elsewhere).stdout
    assert out.startswith(f"OK: {example}")
    out = run([codesign, "demo", simulator_key(plugin), "--quick", "--no-progress", "--out",
               "demo"], cwd=elsewhere, timeout=600).stdout
    assert "codesign demo: " in out and (elsewhere / "demo" / "summary.json").is_file()
