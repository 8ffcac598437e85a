"""Options to simulator: :func:`build_model` turns :class:`~sim_pbd.options.PBDOptions` into
a :class:`~sim_pbd.model.PBDModel`, :func:`make_simulator` (the plugin's factory) into a
:class:`~sim_pbd.simulator.PBDSimulator`.

``urdf`` is a path (relative to the experiment file's folder, ``base_dir``) or the name of a
robot shipped in ``sim_pbd/examples/<name>/<name>.urdf``: ``baxter`` (Rethink Robotics'
URDF, with its LICENSE beside it) and ``double_pendulum`` (the paper's Sec. V-B arm).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from codesign.fields import view_window
from codesign.options import options_factory
from codesign.paths import named_file

from .model import JOINT_TYPES, PBDModel
from .options import PBDOptions
from .simulator import PBDSimulator
from .springs import springs_from
from .urdf import load_urdf

__all__ = ["ROBOT_DIRECTORY", "SceneError", "build_model", "make_simulator", "urdf_path"]

ROBOT_DIRECTORY = Path(__file__).parent / "examples"
"""Folder of the bundled robots, one subfolder each holding ``<name>.urdf``."""


class SceneError(ValueError):
    """Options that name no URDF or do not fit the robot loaded."""


def urdf_path(urdf: str, *, base_dir: str | Path | None = None) -> Path:
    """The URDF file ``urdf`` names: a path relative to ``base_dir`` (default the working
    directory) or absolute, else a bundled robot's name (``baxter``, ``double_pendulum``)."""
    bundled = {path.stem: path for path in ROBOT_DIRECTORY.glob("*/*.urdf")
               if path.stem == path.parent.name}
    return named_file("urdf", urdf, base_dir=base_dir, bundled=bundled, error=SceneError)


def build_model(options: PBDOptions) -> PBDModel:
    """The model of ``options``: the URDF loaded with the options' base, joints, initial
    positions, gravity and compliance; joint limits removed when ``joint_limits`` is off and
    the URDF's damping replaced by ``damping`` when given (one value or one per joint)."""
    o = options
    model = load_urdf(urdf_path(o.urdf, base_dir=o.base_dir), base_link=o.base_link,
                      floating_base=o.floating_base, joints=o.joints,
                      initial_positions=o.initial_positions, gravity=o.gravity,
                      compliance=o.compliance)
    changes = {}
    if not o.joint_limits:
        changes.update(joint_lower=np.full(model.joint_count, -np.inf),
                       joint_upper=np.full(model.joint_count, np.inf))
    if o.damping is not None:
        damping = np.asarray(o.damping, dtype=np.float64)
        if damping.ndim == 0:
            damping = np.full(model.joint_count, float(damping))
        if damping.shape != (model.joint_count,):
            raise SceneError(f"damping has {damping.size} values; give one, or one per joint "
                             f"({model.joint_count}: {list(model.joint_names)})")
        changes["joint_damping"] = damping
    return dataclasses.replace(model, **changes) if changes else model


@options_factory(PBDOptions)
def make_simulator(options: PBDOptions) -> PBDSimulator:
    """Build a :class:`~sim_pbd.simulator.PBDSimulator` from the options of
    :class:`~sim_pbd.options.PBDOptions` (as keywords)."""
    o = options
    model = build_model(o)
    try:
        springs = springs_from(o.springs, model.joint_names,
                               model.joint_type == JOINT_TYPES.index("revolute"))
    except ValueError as exc:
        raise SceneError(str(exc)) from exc
    return PBDSimulator(model, substeps=o.substeps, iterations=o.iterations, solver=o.solver,
                        scheme=o.scheme,
                        kernels=o.kernels, view=o.view,
                        window=view_window(o.view_window, error=SceneError),
                        springs=springs)
