"""ROS tests: they run in the ROS environment of the README's command, where rclpy imports.

The workspace's main environment has no rclpy (its wheels re-execute every process of the
environment they are in), so its test run does not collect this folder.
"""

import importlib.util

if importlib.util.find_spec("rclpy") is None:
    collect_ignore_glob = ["test_*.py"]
