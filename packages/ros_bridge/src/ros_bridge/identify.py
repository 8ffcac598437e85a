"""``identify``: the core's identification from a YAML experiment and a bag, written as a
design file the controller side can load.

    identify experiment.yaml --bag run.mcap --out runs/fit --design fitted.npz \
        [--set identification.recordings.options.start=2.5 ...]

``--bag`` replaces ``identification.recordings.options.path`` (a ``rosbag`` source); the
run directory is the core's (``codesign run``); ``--design`` gets the fitted design, one
array per parameter (``numpy.load``); ``--set dotted.key=value`` (a YAML value) overrides
one setting of the experiment, e.g. the measured initial pose. No ROS needed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml

from codesign.plugins import get_plugin_manager, get_registry
from codesign.runs import run_experiment

__all__ = ["identify", "main", "parse_settings"]


def identify(experiment: str | Path, *, out: str | Path, design: str | Path,
             bag: str | Path | None = None, registry=None,
             settings: dict | None = None) -> dict[str, np.ndarray]:
    """Run the identification of ``experiment`` into ``out`` and save the fitted design to
    ``design`` (``.npz``); return it (parameter name -> array). ``settings``
    (``"dotted.key": value``) override the experiment's."""
    manager = None if registry is not None else get_plugin_manager()
    registry = registry or get_registry(manager)
    settings = dict(settings or {})
    if bag is not None:
        settings["identification.recordings.options.path"] = str(bag)
    run_experiment(experiment, registry, out=out, progress=False, plugin_manager=manager,
                   settings=settings)
    with np.load(Path(out) / "parameters.npz") as arrays:
        fitted = {k.removeprefix("design."): arrays[k] for k in arrays.files
                  if k.startswith("design.")}
    np.savez(design, **fitted)
    return fitted


def parse_settings(items) -> dict:
    """``["dotted.key=yaml value", ...]`` as ``{"dotted.key": value}``; a missing ``=`` is a
    ValueError naming the item."""
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set takes KEY=VALUE (a dotted key and a YAML value), got "
                             f"{item!r}")
        settings[key.strip()] = yaml.safe_load(value)
    return settings


def main(argv: list[str] | None = None) -> int:
    """Console script ``identify``."""
    parser = argparse.ArgumentParser(prog="identify", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="a YAML experiment with an identification section")
    parser.add_argument("--bag", help="the bag to fit (replaces the experiment's path)")
    parser.add_argument("--out", required=True, help="the run directory to create")
    parser.add_argument("--design", required=True, help="where to write the fitted design (.npz)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting (dotted key, YAML value); repeatable")
    args = parser.parse_args(argv)
    fitted = identify(args.experiment, out=args.out, design=args.design, bag=args.bag,
                      settings=parse_settings(args.set))
    for name, value in fitted.items():
        print(f"{name}: {np.array2string(np.asarray(value), precision=4)}")
    return 0
