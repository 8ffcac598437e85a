"""codesign plugin hooks: the ``vine`` simulator, its observers, terms, the ``vine_video``
recording source, the ``vine_keypoints`` recording source (CSV/NPZ files), the
``vine_centerline`` keypoint extractor and the examples."""

from __future__ import annotations

from codesign.examples import register_examples
from codesign.hookspecs import hookimpl

from .fit.keypoints_source import keypoints_recordings
from .fit.video_source import video_recordings
from .scene import make_simulator
from .terms import GrowthEffort, KeypointObserver, TipObserver, TipTargetDistance
from .vision.extractor import vine_centerline_extractor

CODESIGN_API = (1, 1)

EXAMPLES = {
    "vine_runtime": "vine growing toward one circular obstacle (the paper's runtime scene); "
                    "tune stiffness so the tip reaches a target (`codesign demo vine`)",
    "vine_cluttered": "40-body vine growing for 3 s through a cluttered environment with "
                      "passages",
    "vine_oscillation": "fit K and C of a released cantilever vine to a video of its "
                        "oscillation (paper Fig. 6)",
    "vine_wall": "fit K and C of a vine to a video of it growing into a wall and sliding "
                 "along it (paper Fig. 7)",
}
"""Example name -> description; each is ``sim_vine/examples/<name>.yaml`` (package data)."""

__all__ = ["CODESIGN_API", "EXAMPLES"]


@hookimpl
def codesign_register_simulators(register):
    register("vine", make_simulator,
             description="soft growing vine robot: rigid bodies, pin and prismatic joints, "
                         "one OSQP QP per step (Jitosho et al. 2023)")


@hookimpl
def codesign_register_observers(register):
    register("tip", TipObserver, description="vine tip position (x, y) [m]")
    register("keypoints", KeypointObserver,
             description="n points evenly spaced along the vine [m], flattened")


@hookimpl
def codesign_register_terms(register):
    register("tip_target_distance", TipTargetDistance,
             description="final distance from the vine tip to a target point [m]")
    register("growth_effort", GrowthEffort, description="running squared growth rate")


@hookimpl
def codesign_register_recordings(register):
    register("vine_video", video_recordings,
             description="keypoints extracted from a video of a vine (OpenCV), frames placed "
                         "on the run's control steps")
    register("vine_keypoints", keypoints_recordings,
             description="keypoints of a vine from a CSV/NPZ file (m, mm or px with a measured "
                         "scale), checked, frames placed on the run's control steps")


@hookimpl
def codesign_register_keypoint_extractors(register):
    register("vine_centerline", vine_centerline_extractor,
             description="keypoints [m] evenly spaced along the vine's centerline in one "
                         "image (colour or background segmentation, calibrated)")


@hookimpl
def codesign_register_examples(register):
    register_examples(register, __package__, EXAMPLES, default="vine_runtime")
