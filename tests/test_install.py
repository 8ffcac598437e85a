"""Each package installs alone with plain pip into a fresh virtual environment, with the
README's one command for it ("Install with pip"), read from the README itself.

The core by itself imports and its CLI runs, without Dask until its ``dask`` extra is
installed; each simulator plugin installed with the core
in one command shows up in ``codesign plugins`` with its examples (package data), an
example copied elsewhere with its assets validates from another working directory, and
``codesign demo <simulator> --quick`` runs there; a package that is not a plugin yet
imports. The README's git command installs a plugin and the core from this checkout's
repository.
"""

import os
import re
import shlex
import shutil
import subprocess
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
ASSET_EXAMPLES = {"sim_mpm": "png_animal_2d", "sim_vine": "vine_oscillation"}
"""Per plugin, an example that reads an asset file beside it (an image, a video); other
plugins validate their first example."""


def readme_commands() -> list[str]:
    """The ``pip install`` lines of the README's "Install with pip" section, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Install with pip", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()
            if line.startswith("pip install ")]


COMMANDS = readme_commands()
CHECKOUT = {shlex.split(c)[-1].removeprefix("./packages/"): c for c in COMMANDS
            if "git+" not in c}
"""Each package's command from a checkout, by the last path it names."""
(GIT_COMMAND,) = [c for c in COMMANDS if "git+" in c]


def run(args, **kwargs):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    return subprocess.run(args, check=True, capture_output=True, text=True,
                          env={**env, **kwargs.pop("env", {})}, **kwargs)


def fresh_python(directory: Path) -> str:
    venv.EnvBuilder(with_pip=True).create(directory)
    return str(directory / ("Scripts" if os.name == "nt" else "bin") / "python")


def pip_install(python: str, command: str, **variables) -> None:
    """Run a README ``pip install`` line with the environment's pip, from the checkout's
    root, with ``$NAME`` variables substituted as a shell would."""
    words = shlex.split(command.replace("$REPO", variables.get("REPO", "$REPO")))
    assert words[:2] == ["pip", "install"], command
    run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         *words[2:]], cwd=ROOT)


def simulator_key(plugin: str) -> str:
    """The plugin's entry-point name, its simulator's key in YAML."""
    project = tomllib.loads((ROOT / "packages" / plugin / "pyproject.toml").read_text())
    (key,) = project["project"]["entry-points"]["codesign"]
    return key


def is_plugin(package: str) -> bool:
    project = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())
    return "codesign" in project["project"].get("entry-points", {})


def test_the_readme_has_one_command_per_package_naming_the_core_first():
    assert sorted(CHECKOUT) == PACKAGES
    assert CHECKOUT["codesign"] == "pip install ./packages/codesign"
    for package, command in CHECKOUT.items():
        if package != "codesign":
            assert command == f"pip install ./packages/codesign ./packages/{package}"


def test_core_installs_alone_with_plain_pip(tmp_path):
    python = fresh_python(tmp_path / "venv")
    pip_install(python, CHECKOUT["codesign"])
    out = run([python, "-c", "import codesign; print(codesign.__version__)"]).stdout
    assert out.strip() == "0.1.0"
    assert "codesign" in run([str(Path(python).parent / "codesign"), "plugins"]).stdout
    # Dask comes only with the dask extra; without it the dask executor says how to get it.
    hint = subprocess.run([python, "-c", "from codesign.executors import get_executor; "
                                         "get_executor('dask')"], capture_output=True, text=True)
    assert hint.returncode != 0 and "pip install 'codesign[dask]'" in hint.stderr
    pip_install(python, "pip install ./packages/codesign[dask]")
    run([python, "-c", "import distributed"])


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "codesign"])
def test_each_package_installs_with_the_core_in_one_command(package, tmp_path):
    python = fresh_python(tmp_path / "venv")
    pip_install(python, CHECKOUT[package])
    run([python, "-c", f"import {package}"])
    if not is_plugin(package):
        return
    codesign = str(Path(python).parent / "codesign")
    listing = run([codesign, "plugins"]).stdout
    assert package in listing
    examples = sorted((ROOT / "packages" / package / "src" / package / "examples").glob("*.yaml"))
    if not examples:  # a plugin without a simulator (ros_bridge: a recording source)
        assert "rosbag" in listing and package == "ros_bridge"
        return
    registered = {line.split()[1] for line in listing.splitlines() if line.startswith("example ")}
    assert {path.stem for path in examples} <= registered

    installed = run([python, "-c", f"import importlib.resources as r; "
                                   f"print(r.files({package!r}) / 'examples')"]).stdout
    copy = tmp_path / "copy"
    shutil.copytree(installed.strip(), copy)  # from site-packages: the wheel holds them
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    example = copy / f"{ASSET_EXAMPLES.get(package, examples[0].stem)}.yaml"
    out = run([codesign, "validate", str(example), "--quick"], cwd=elsewhere).stdout
    assert out.startswith(f"OK: {example}")
    out = run([codesign, "demo", simulator_key(package), "--quick", "--no-progress", "--out",
               "demo"], cwd=elsewhere, timeout=600).stdout
    assert "codesign demo: " in out and (elsewhere / "demo" / "summary.json").is_file()


def test_the_git_command_installs_from_the_repository(tmp_path):
    """The README's command for installs without a checkout, with this checkout's
    repository as REPO (its committed HEAD)."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                      capture_output=True).returncode != 0:
        pytest.skip("the checkout is not a git repository")
    python = fresh_python(tmp_path / "venv")
    # file://localhost/...: PEP 508 refuses a git+file URL with an empty host
    pip_install(python, GIT_COMMAND, REPO=f"file://localhost{ROOT.as_posix()}")
    plugin = re.search(r'"(\w+) @ git\+\$REPO#subdirectory=packages/\1"$', GIT_COMMAND)[1]
    listing = run([str(Path(python).parent / "codesign"), "plugins"]).stdout
    assert plugin in listing
