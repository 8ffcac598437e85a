"""colcon builds ros_bridge as a ROS 2 workspace does (the ament_python layout: package.xml,
the ament index marker, setup.py and setup.cfg beside pyproject.toml), in the ROS tests'
environment, whose ``colcon`` extra brings colcon without a ROS distribution."""

import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
SCRIPTS = ("fake_robot", "identify", "impedance_controller", "keypoints", "recorder")


def test_colcon_builds_the_package_where_ros2_run_finds_its_nodes(tmp_path):
    colcon = Path(sys.executable).parent / "colcon"
    assert colcon.is_file(), "colcon is missing: sync .venv-ros with the colcon extra (dev.py)"
    source = tmp_path / "src" / "ros_bridge"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns(
        ".venv*", "__pycache__", "*.egg-info", "build", "tests", "tests_ros"))
    done = subprocess.run([str(colcon), "build", "--base-paths", "src"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    install = tmp_path / "install" / "ros_bridge"
    assert (install / "share" / "ament_index" / "resource_index" / "packages"
            / "ros_bridge").is_file()
    assert (install / "share" / "ros_bridge" / "package.xml").is_file()
    for script in SCRIPTS:  # ros2 run looks in lib/<package>
        path = install / "lib" / "ros_bridge" / script
        assert path.is_file(), sorted(p.name for p in (install / "lib").rglob("*"))[:40]
        assert "console_scripts" in path.read_text() or "ros_bridge" in path.read_text()
    modules = list((install / "lib").glob("python3*/site-packages/ros_bridge/nodes/"
                                          "impedance_controller.py"))
    assert len(modules) == 1
