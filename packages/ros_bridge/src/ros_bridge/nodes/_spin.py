"""Running one node as a process: init, spin, and a clean last word on SIGINT or SIGTERM."""

from __future__ import annotations

import signal
from collections.abc import Callable

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

__all__ = ["run_node"]


class _Stop(Exception):
    """SIGTERM, turned into an exception so ``finally`` blocks run."""


def _raise_stop(signum, frame):
    raise _Stop


def run_node(make_node: Callable[[], object], argv: list[str] | None = None) -> int:
    """Spin ``make_node()`` until SIGINT or SIGTERM, then call its ``close()`` (while the
    context is still up, so a controller can still publish its zero command)."""
    # rclpy's own handlers would shut the context down before close() could publish
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGTERM, _raise_stop)
    node = None
    try:
        node = make_node()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
