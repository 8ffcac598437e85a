"""Every example experiment validates, and its quick setting runs end to end through the CLI.

The examples are each simulator package's package data (``src/<package>/examples``), and
every one is registered by its plugin. Runs in-process so numba compiles each kernel once
for the whole module.
"""

import json
from pathlib import Path

import pytest
import yaml

from codesign.cli import main
from codesign.plugins import get_registry

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "packages").glob("*/src/*/examples/*.yaml"))
INSTALLED = set(get_registry().names("simulators"))


def simulator_of(path: Path) -> str:
    return yaml.safe_load(path.read_text())["simulator"]["name"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parents[1].name}/{p.stem}")
def test_example_validates_and_its_quick_run_writes_a_complete_run_directory(path, tmp_path,
                                                                              capsys):
    if simulator_of(path) not in INSTALLED:
        pytest.fail(f"{path} needs simulator {simulator_of(path)!r}, which is not installed")
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    out = tmp_path / "run"
    status = main(["run", str(path), "--quick", "--out", str(out), "--no-progress"])
    assert status == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    if yaml.safe_load(path.read_text())["optimizer"]["name"] == "none":  # only simulates
        assert (summary["iterations"], summary["evaluations"]) == (0, 1)
    else:
        assert summary["iterations"] >= 1
    for name in ("config.yaml", "plugins.json", "history.json", "parameters.npz", "loss.png"):
        assert (out / name).is_file(), name
    assert (out / "result.mp4").is_file() or (out / "result.gif").is_file()


def test_every_example_is_registered_and_every_registered_example_exists_on_disk():
    registry = get_registry()
    registered = {Path(registry.get("examples", name).factory).resolve()
                  for name in registry.names("examples")}
    assert registered == {path.resolve() for path in EXAMPLES}
    assert registry.default_example() is not None
