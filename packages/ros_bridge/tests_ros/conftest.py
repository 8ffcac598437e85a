"""ROS tests: they run in the ROS environment of the README's command, where rclpy imports.

The workspace's main environment has no rclpy (its wheels re-execute every process of the
environment they are in), so its test run does not collect this folder.
"""

import importlib.util
import time

import pytest

if importlib.util.find_spec("rclpy") is None:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def context(request):
    """An rclpy context in the test module's own DDS domain (its ``DOMAIN_ID``), shut down
    after the test."""
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=request.module.DOMAIN_ID)
    yield context
    rclpy.shutdown(context=context)


@pytest.fixture
def spin_until():
    """``spin_until(executor, done, seconds=8.0)``: spin ``executor`` until ``done()`` or
    ``seconds`` have passed (a discovery margin, not a timing assertion); ``done()``'s last
    value."""

    def spin(executor, done, seconds=8.0):
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.01)
        return done()

    return spin
