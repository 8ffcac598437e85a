"""codesign plugin: the ``mpm`` simulator, its observers, terms and example experiments."""

from __future__ import annotations

from codesign.examples import register_examples
from codesign.hookspecs import hookimpl

from .scene import make_simulator
from .terms import (
    Actuation,
    CentroidObserver,
    KMeansObserver,
    MeanPosition,
    TargetDistance,
    VelocityPenalty,
)

__all__ = ["CODESIGN_API", "EXAMPLES"]

CODESIGN_API = (1, 1)

EXAMPLES = {
    "walker_2d": "2D biped of eight blocks and four pneumatic actuators; MLP controller and "
                 "per-particle E, ν, ρ co-designed (the default demo)",
    "cable_walker_2d": "2D biped driven open-loop by two contracting cables",
    "terrain_walker_2d": "2D biped walking up graded terrain",
    "png_animal_2d": "a four-legged animal loaded from a PNG, four actuators marked by color",
    "quadruped_3d": "3D quadruped with pressure chambers in its legs",
    "hexapod_3d": "the 3D quadruped with six legs (24 pressure chambers)",
    "octoped_3d": "the 3D quadruped with eight legs (32 pressure chambers)",
    "hanging_arm_3d_fixed": "3D arm hanging from a sticky ceiling swings its tip to a goal "
                            "and stops (SLSQP, equality constraints), fixed stiffness",
    "hanging_arm_3d_cooptimized": "the hanging arm with its per-particle stiffness "
                                  "co-optimized with the actuation",
    "stl_robot_3d": "a soft starfish from a binary STL mesh, four actuated arm regions, "
                    "crawling along +x",
    "arm_length_2d": "an arm whose length (geometry.scale) is the only design parameter, "
                     "reaching a target beyond its reach",
    "finger_identification": "identification of a two-cable finger's Young's modulus, density "
                             "and Poisson's ratio from ten noisy synthetic trajectories",
    "ball_density_2d": "the density of ball A that makes ball B, hit by A, reach a target",
}
"""Example name -> description; each is ``sim_mpm/examples/<name>.yaml`` (package data)."""


@hookimpl
def codesign_register_simulators(register):
    register("mpm", make_simulator,
             description="differentiable MLS-MPM soft bodies (ChainQueen), 2D and 3D")


@hookimpl
def codesign_register_observers(register):
    register("centroids", CentroidObserver,
             description="particle-group centroids (positions and velocities) of an MPM body")
    register("kmeans", KMeansObserver,
             description="centroids of k-means clusters of an MPM body's rest particles")


@hookimpl
def codesign_register_terms(register):
    register("mean_position", MeanPosition, description="final mean particle coordinate")
    register("target_distance", TargetDistance,
             description="final distance of a particle group's centroid to a target")
    register("velocity_penalty", VelocityPenalty,
             description="mean squared particle speed (final or running)")
    register("actuation", Actuation, description="running Σ u² of the actuation signals")


@hookimpl
def codesign_register_examples(register):
    register_examples(register, __package__, EXAMPLES, default="walker_2d")
