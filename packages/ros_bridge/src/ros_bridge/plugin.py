"""codesign plugin hooks: the ``rosbag`` recording source."""

from __future__ import annotations

from codesign.hookspecs import hookimpl

from .recording_source import rosbag_recordings

CODESIGN_API = (1, 1)

__all__ = ["CODESIGN_API"]


@hookimpl
def codesign_register_recordings(register):
    register("rosbag", rosbag_recordings,
             description="joint states (by name) and effort commands from rosbag2 bags "
                         "(.mcap or .db3), resampled on the run's control steps")
