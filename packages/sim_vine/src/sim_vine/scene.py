"""Vine scenes from YAML, and ``make_simulator``, the factory registered as ``vine``.

A scene file is a YAML mapping of any of :func:`make_simulator`'s options
(:class:`~sim_vine.options.VineOptions`) (usually the
environment: ``obstacles``, ``base``, ``view``, and the vine's size), for example::

    bodies: 30
    length: 0.2
    obstacles:
      - {type: circle, center: [0.35, 0.02], radius: 0.05}
      - {type: rectangle, center: [0.5, -0.1], size: [0.1, 0.05], angle: 0.3}
      - {type: polygon, vertices: [[0.6, 0.1], [0.7, 0.1], [0.65, 0.2]]}
      - {type: wall, start: [0.8, -0.3], end: [0.8, 0.3], thickness: 0.01}

Options given to :func:`make_simulator` override the scene's. ``scene`` is a path (relative
to the experiment file's folder), or the name of a scene shipped in ``sim_vine/scenes``
(``runtime``, ``cluttered``, ``wall``, ``wall_vertical``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from codesign.options import check_options, options_factory
from codesign.tying import Tie, TiedSimulator

from .model import VineModel
from .options import VineOptions
from .qp import SolverSettings
from .simulator import VineSimulator

__all__ = ["SceneError", "load_scene", "make_simulator", "SCENE_DIRECTORY"]

SCENE_DIRECTORY = Path(__file__).parent / "scenes"

class SceneError(ValueError):
    """A scene file is missing, unreadable or holds an unknown option."""


def _scene_path(scene: str, base_dir: Path | None) -> Path:
    folder = Path(base_dir or ".")
    path = folder / scene
    if path.is_file():
        return path
    bundled = SCENE_DIRECTORY / (scene if scene.endswith((".yaml", ".yml")) else f"{scene}.yaml")
    if bundled.is_file():
        return bundled
    known = sorted(p.stem for p in SCENE_DIRECTORY.glob("*.yaml"))
    raise SceneError(f"scene {scene!r} is neither a file in {str(folder.resolve())!r} nor a "
                     f"bundled scene; bundled: {known}")


def load_scene(scene: str, *, base_dir: Path | None = None) -> dict[str, Any]:
    """The options a scene file sets: ``scene`` is a path relative to ``base_dir`` (default
    the working directory) or absolute, or a bundled scene's name."""
    path = _scene_path(scene, base_dir)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SceneError(f"scene file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SceneError(f"scene file {path} must hold a mapping of options, got "
                         f"{type(data).__name__}")
    known = [spec.name for spec in VineOptions.specs() if spec.name not in ("scene", "base_dir")]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise SceneError(f"scene file {path} sets unknown option(s) {unknown}; "
                         f"known: {sorted(known)}")
    # the same type checks (and messages) as options given in an experiment file
    _, problems = check_options(make_simulator, data, what=f"scene file {path}")
    if problems:
        raise SceneError("; ".join(message for _, message in problems))
    return data


@options_factory(VineOptions)
def make_simulator(options: VineOptions) -> VineSimulator | TiedSimulator:
    """Build a :class:`VineSimulator` from the options of
    :class:`~sim_vine.options.VineOptions` (as keywords; a ``scene`` file fills in the
    options not given); ``tie`` wraps it in a :class:`codesign.tying.TiedSimulator`."""
    o = options
    model = VineModel.from_options(o)
    settings = SolverSettings(eps_abs=o.eps_abs, eps_rel=o.eps_rel, max_iter=o.max_iter,
                              contact_smoothing=o.contact_smoothing)
    view = o.view
    if view is not None:
        view = np.asarray(view, dtype=np.float64)
        if view.shape != (4,) or not (view[0] < view[1] and view[2] < view[3]):
            raise SceneError(f"view must be [x_min, x_max, y_min, y_max] with min < max, "
                             f"got {o.view!r}")
    simulator = VineSimulator(model, settings=settings, view=view,
                              check_initial_pose=o.check_initial_pose)
    return TiedSimulator(simulator, ties=[Tie(name) for name in o.tie]) if o.tie else simulator
