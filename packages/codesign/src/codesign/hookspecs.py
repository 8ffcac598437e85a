"""Plugin hook specifications (pluggy project name and entry-point group: ``codesign``).

Each registration hook receives a ``register(name, factory, **info)`` callback. Factories
take keyword-only options; their signatures (names, annotations, defaults) are what a YAML
experiment may set, and the config validator checks YAML against them.

- simulators: ``factory(**options) -> Simulator``; one that takes ``base_dir: pathlib.Path``
  receives the experiment file's folder (not a YAML option), where its relative paths start.
- observers and terms: ``factory(*, simulator, **options)``; a term factory may also
  take ``dt: float`` and ``substeps: int``, the run's substep length [s] and substeps per
  control step (a term that reads time or steps the simulator itself)
- controllers: ``factory(*, observation_size, action_size, control_steps, control_dt, **options)``
  (a factory may omit the size arguments it does not use only by accepting ``**_``); one
  that takes ``simulator`` receives the run's simulator (a law whose model is built through
  it, such as sim_pbd's impedance map)
- optimizers: ``factory(**options) -> Optimizer``; one whose ``needs_parameters`` is False
  (the core's ``none``) runs an experiment that has nothing to optimize
- recordings (identification data sources): ``factory(*, simulator, measurement, dt: float,
  substeps: int, base_dir: pathlib.Path, **options) -> list[codesign.identification.Recording]``;
  ``measurement`` is the built observer of the experiment's identification section,
  ``base_dir`` the folder of the experiment file (for relative paths). A source that knows
  the parameters behind its data returns a :class:`codesign.recordings.RecordingSet` (a list
  with a ``truth`` dict) so runs report truth against recovered values.
- examples: ``register(name, path_to_yaml, description=..., default=False)``, a plugin's
  default is what ``codesign demo <simulator>`` runs; examples and assets are package data
  registered by :func:`codesign.examples.register_examples`.
- executors (engines that run batches of rollouts): ``factory(*, workers=None, **options) ->
  concurrent.futures.Executor``; an executor may offer ``share(obj)`` to ship an object to
  its workers once (:mod:`codesign.executors`).
- keypoint extractors (images to keypoints, for live video): ``factory(**options) ->
  extract``, where ``extract(image)`` takes a BGR ``uint8`` image, shape (height, width, 3),
  and returns keypoints, shape (n, 2), all NaN when the object is not in the image.

A plugin module declares the hook API versions it supports as ``CODESIGN_API = (low, high)``.
"""

from __future__ import annotations

import pluggy

__all__ = ["hookspec", "hookimpl", "PROJECT_NAME"]

PROJECT_NAME = "codesign"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def codesign_register_simulators(register) -> None:
    """Register simulator factories: ``register("mpm", MPMSimulator)``."""


@hookspec
def codesign_register_terms(register) -> None:
    """Register objective-term factories: ``register("mean_position", MeanPosition)``."""


@hookspec
def codesign_register_observers(register) -> None:
    """Register observer factories: ``register("centroids", CentroidObserver)``."""


@hookspec
def codesign_register_controllers(register) -> None:
    """Register controller factories: ``register("mlp", MLPController)``."""


@hookspec
def codesign_register_optimizers(register) -> None:
    """Register optimizer factories: ``register("adam", Adam)``."""


@hookspec
def codesign_register_recordings(register) -> None:
    """Register recording sources of identification runs: ``register("file", load_npz)``."""


@hookspec
def codesign_register_examples(register) -> None:
    """Register example experiments: ``register_examples(register, __package__, {name:
    description}, default="walker_2d")``."""


@hookspec
def codesign_register_executors(register) -> None:
    """Register executors that run batches: ``register("dask", dask_executor)``."""


@hookspec
def codesign_register_keypoint_extractors(register) -> None:
    """Register keypoint extractors of images: ``register("vine_centerline", factory)``."""
