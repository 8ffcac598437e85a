"""examples/pbd/double_pendulum_design.py end to end on the example's quick setting: the run
directory, the figure, the video and the table beside the paper's."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "pbd" / "double_pendulum_design.py"


def test_the_design_script_writes_its_figure_video_and_table(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("double_pendulum_design", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(["--quick", "--out", str(tmp_path)])
    assert (tmp_path / "run" / "summary.json").is_file()
    assert (tmp_path / "double_pendulum_design.png").stat().st_size > 10_000
    assert any((tmp_path / f"double_pendulum_design.{suffix}").is_file()
               for suffix in ("mp4", "gif"))
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith(("| initial", "| optimized"))]
    assert rows[0].startswith("| initial | 3.0000 | 0.1000 |")
    assert rows[0].endswith("| 3, 0.1, 51.716, 1.475 |")
    assert rows[1].endswith("| 2.7026, 0.3074, 14.448, 0.368 |")
    initial_loss, optimized_loss = (float(row.split("|")[4]) for row in rows)
    assert optimized_loss < initial_loss
