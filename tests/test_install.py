"""Each package installs alone with plain pip into a fresh virtual environment.

The core first, by itself; then each simulator plugin on top, resolving ``codesign`` by its
declared version range, and the plugin shows up in ``codesign plugins``.
"""

import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = [p.name for p in sorted((ROOT / "packages").iterdir())
           if p.name.startswith("sim_") and (p / "src" / p.name / "plugin.py").exists()]


def run(args, **kwargs):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    return subprocess.run(args, check=True, capture_output=True, text=True, env=env, **kwargs)


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
def test_each_plugin_installs_on_the_core_with_plain_pip(fresh_python, plugin):
    run([fresh_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(ROOT / "packages" / plugin)])
    bin_dir = Path(fresh_python).parent
    listing = run([str(bin_dir / "codesign"), "plugins"]).stdout
    assert plugin in listing

