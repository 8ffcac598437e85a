"""Vine scenes from YAML, and ``make_simulator``, the factory registered as ``vine``.

A scene file is a YAML mapping of any of :func:`make_simulator`'s options (usually the
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
from typing import Any, Literal

import numpy as np
import yaml

from .fitting import TiedSimulator
from .model import VineModel
from .obstacles import obstacle_from_dict
from .qp import SolverSettings
from .simulator import VineSimulator

__all__ = ["SceneError", "load_scene", "make_simulator", "SCENE_DIRECTORY", "DEFAULTS"]

SCENE_DIRECTORY = Path(__file__).parent / "scenes"

DEFAULTS: dict[str, Any] = {
    "bodies": 10, "length": 0.2, "total_mass": 0.01, "gyration_radius": None,
    "base": [0.0, 0.0, 0.0], "stiffness": 0.05, "damping": 0.002, "friction": 0.0,
    "gravity": [0.0, 0.0], "growth": "every_prismatic", "contact": "pins", "obstacles": [],
    "initial_angles": 0.0, "implicit_springs": True, "eps_abs": 1e-4, "eps_rel": 1e-4,
    "max_iter": 10000, "view": None,
}
"""Built-in value of every option that neither the call nor the scene sets."""


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
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise SceneError(f"scene file {path} sets unknown option(s) {unknown}; "
                         f"known: {sorted(DEFAULTS)}")
    return data


def make_simulator(
    *,
    scene: str | None = None,
    bodies: int | None = None,
    length: float | None = None,
    total_mass: float | None = None,
    gyration_radius: float | None = None,
    base: list[float] | None = None,
    stiffness: float | list[float] | None = None,
    damping: float | list[float] | None = None,
    friction: float | None = None,
    gravity: list[float] | None = None,
    growth: Literal["every_prismatic", "tip"] | None = None,
    contact: str | list[list[float]] | None = None,
    obstacles: list[dict] | None = None,
    initial_angles: float | list[float] | None = None,
    implicit_springs: bool | None = None,
    eps_abs: float | None = None,
    eps_rel: float | None = None,
    max_iter: int | None = None,
    view: list[float] | None = None,
    tie: list[str] | None = None,
    base_dir: Path | None = None,
) -> VineSimulator | TiedSimulator:
    """Build a :class:`VineSimulator` from options, a scene file, and built-in defaults.

    Args:
        scene: a scene YAML path or bundled scene name; its options fill in unset ones.
        bodies: number of rigid bodies N (default 10).
        length: initial vine length [m] (0.2).
        total_mass: vine mass [kg] (0.01), split equally over the bodies.
        gyration_radius: body radius of gyration [m] (a slender rod's when unset).
        base: base pose [x m, y m, angle rad] ([0, 0, 0]).
        stiffness, damping: pin spring [N m/rad] (0.05) and damper [N m s/rad] (0.002),
            a number or one per pin.
        friction: Coulomb friction coefficient (0).
        gravity: [gx, gy] [m/s²] ([0, 0]).
        growth: ``every_prismatic`` (default) or ``tip``.
        contact: ``pins`` (default), ``bodies`` or a list of [body, offset m].
        obstacles: list of obstacle mappings (see :func:`obstacle_from_dict`).
        initial_angles: pin angles at t = 0 [rad], a number or one per pin (0).
        implicit_springs: implicit spring and damper torques (true).
        eps_abs, eps_rel: OSQP tolerances (1e-4; OSQP only has to find the active set,
            whose KKT system is then solved exactly).
        max_iter: OSQP iteration limit (10000).
        view: render window [x_min, x_max, y_min, y_max] [m] (framed automatically).
        tie: per-pin design parameters to expose as one scalar shared by every pin (for
            example ``[joint.stiffness, joint.damping]``, the paper's scalar K and C); the
            simulator is then wrapped in a :class:`~sim_vine.fitting.TiedSimulator`.
        base_dir: the experiment file's folder, supplied by the run: a relative ``scene``
            path starts there (default the working directory).
    """
    given = {k: v for k, v in locals().items()
             if k not in ("scene", "tie", "base_dir") and v is not None}
    options = dict(DEFAULTS)
    if scene is not None:
        options.update(load_scene(scene, base_dir=base_dir))
    options.update(given)
    obstacles = [obstacle_from_dict(spec) for spec in options["obstacles"] or []]
    model = VineModel(
        body_count=options["bodies"], length=options["length"],
        total_mass=options["total_mass"], gyration_radius=options["gyration_radius"],
        base=options["base"], stiffness=options["stiffness"], damping=options["damping"],
        friction=options["friction"], gravity=options["gravity"], growth=options["growth"],
        contact=options["contact"], obstacles=tuple(obstacles),
        initial_angles=options["initial_angles"], implicit_springs=options["implicit_springs"],
    )
    settings = SolverSettings(eps_abs=options["eps_abs"], eps_rel=options["eps_rel"],
                              max_iter=options["max_iter"])
    view = options["view"]
    if view is not None:
        view = np.asarray(view, dtype=np.float64)
        if view.shape != (4,) or not (view[0] < view[1] and view[2] < view[3]):
            raise SceneError(f"view must be [x_min, x_max, y_min, y_max] with min < max, "
                             f"got {options['view']!r}")
    simulator = VineSimulator(model, settings=settings, view=view)
    return TiedSimulator(simulator, tied=tie) if tie else simulator
