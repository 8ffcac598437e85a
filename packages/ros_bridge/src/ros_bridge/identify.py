"""``identify``: the core's identification from a YAML experiment and a bag, or live topics,
written as a design file the controller side can load.

    identify experiment.yaml --bag run.mcap --out runs/fit --design fitted.npz \
        [--set identification.recordings.options.start=2.5 ...]
    identify experiment.yaml --live --duration 5.0 [--wait 5.0] \
        [--topics /joint_states --types sensor_msgs/msg/JointState] \
        [--bag runs/fit.bag] --out runs/fit --design fitted.npz [--set ...]

``--bag`` (relative to the working directory) replaces
``identification.recordings.options.path`` (a ``rosbag`` source); the run directory is the
core's (``codesign run``); ``--design`` gets the fitted design, one array per parameter
(``numpy.load``); ``--set dotted.key=value`` (a YAML value) overrides one setting of the
experiment, e.g. the measured initial pose. No ROS needed.

``--live`` first records ``--topics`` (one of ``--types`` each) for ``--duration`` seconds
of ROS time from the first message received (:mod:`ros_bridge.live_recording`; at most
``--wait`` s of waiting for it) into a new bag, ``--bag`` or by default ``DIR.bag`` beside
``--out DIR``, then fits it exactly as ``--bag`` does. The bag is kept: the run's
config.yaml names it, so ``identify --bag DIR.bag`` refits the same data. A failed
recording leaves no bag; a failed fit leaves the complete bag and no run directory.
Needs the ``ros`` extra (rclpy), imported only then.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

from codesign.config import load_config, with_settings
from codesign.plugins import get_plugin_manager, get_registry
from codesign.runs import partial_dir, run_experiment
from codesign.validation import validate_config

from .bags import STORAGES
from .live_recording import LiveRecordingError, LiveWindow, record_window
from .recording_source import TOPIC_ROLES

__all__ = ["identify", "identify_live", "live_bag_path", "main", "parse_settings"]

BAG_SETTING = "identification.recordings.options.path"


def _plugins(registry):
    """(plugin manager or None, registry): the installed plugins unless ``registry`` is
    given."""
    if registry is not None:
        return None, registry
    manager = get_plugin_manager()
    return manager, get_registry(manager)


def identify(experiment: str | Path, *, out: str | Path, design: str | Path,
             bag: str | Path | None = None, registry=None,
             settings: dict | None = None) -> dict[str, np.ndarray]:
    """Run the identification of ``experiment`` into ``out`` and save the fitted design to
    ``design`` (``.npz``); return it (parameter name -> array). ``bag`` (relative to the
    working directory) replaces the experiment's bag path; ``settings``
    (``"dotted.key": value``) override the experiment's."""
    return _fit(experiment, out=out, design=design, plugins=_plugins(registry),
                settings=_with_bag(settings, bag))


def _with_bag(settings: dict | None, bag: str | Path | None) -> dict:
    """``settings`` with the bag path set (absolute: the source would read a relative one
    from the experiment's folder)."""
    settings = dict(settings or {})
    if bag is not None:
        settings[BAG_SETTING] = str(Path(bag).absolute())
    return settings


def _fit(experiment, *, out, design, plugins, settings) -> dict[str, np.ndarray]:
    """The run of :func:`identify` with ``plugins`` = (manager or None, registry)."""
    manager, registry = plugins
    run_experiment(experiment, registry, out=out, progress=False, plugin_manager=manager,
                   settings=settings)
    with np.load(Path(out) / "parameters.npz") as arrays:
        fitted = {k.removeprefix("design."): arrays[k] for k in arrays.files
                  if k.startswith("design.")}
    np.savez(design, **fitted)
    return fitted


def live_bag_path(out: str | Path) -> Path:
    """The default bag of a live run into ``out``: ``DIR.bag`` beside run directory ``DIR``
    (the run directory itself is created only when the fit is done)."""
    out = Path(out)
    return out.with_name(out.name + ".bag")


def identify_live(experiment: str | Path, *, out: str | Path, design: str | Path,
                  window: LiveWindow, bag: str | Path | None = None, registry=None,
                  settings: dict | None = None, context=None,
                  log: Callable[[str], None] | None = None) -> dict[str, np.ndarray]:
    """Record ``window`` from live topics into the new bag ``bag`` (default
    :func:`live_bag_path`), then :func:`identify` on it; return the fitted design.

    Before recording it checks what would fail after it: the experiment (ConfigError),
    that ``window`` records every topic its ``rosbag`` source reads, and that ``out``, its
    journal and ``bag`` do not exist (LiveRecordingError).
    ``context`` is an initialized rclpy context to record in (default: one of its own);
    ``log`` hears the recording's progress.
    """
    bag = Path(bag) if bag is not None else live_bag_path(out)
    plugins = _plugins(registry)
    settings = _with_bag(settings, bag)
    config = validate_config(with_settings(load_config(experiment), settings), plugins[1])
    _check_recorded_topics(config.data, window)
    for path, flag in ((Path(out), "--out"), (partial_dir(out), "--out"), (bag, "--bag")):
        if path.exists():
            raise LiveRecordingError(f"{str(path)!r} already exists; choose another {flag} or "
                                     "delete it (checked before recording)")
    record_window(bag, window, context=context, log=log)
    return _fit(experiment, out=out, design=design, plugins=plugins, settings=settings)


def _check_recorded_topics(experiment: dict, window: LiveWindow) -> None:
    """LiveRecordingError if the experiment's ``rosbag`` source reads a topic that
    ``window`` does not record (found before recording, not after)."""
    recordings = experiment.get("identification", {}).get("recordings", {})
    if recordings.get("source") != "rosbag":
        return
    roles = TOPIC_ROLES | (recordings["options"].get("topics") or {})
    unrecorded = {role: topic for role, topic in roles.items()
                  if topic is not None and topic not in window.topics}
    if unrecorded:
        raise LiveRecordingError(
            f"the experiment reads {unrecorded} (identification.recordings.options.topics) "
            f"but --topics records only {list(window.topics)}; add them with their types "
            "(--topics ... --types ...), or drop a role with --set")


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


_LIVE_OPTIONS = ("topics", "types", "duration", "wait", "storage")


def build_parser() -> argparse.ArgumentParser:
    """The ``identify`` command line."""
    parser = argparse.ArgumentParser(prog="identify", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="a YAML experiment with an identification section")
    parser.add_argument("--bag", help="the bag to fit (replaces the experiment's path); with "
                        "--live, the new bag to record into (default: DIR.bag beside --out)")
    parser.add_argument("--out", required=True, help="the run directory to create")
    parser.add_argument("--design", required=True, help="where to write the fitted design (.npz)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting (dotted key, YAML value); repeatable")
    live = parser.add_argument_group("live mode (needs the ros extra: rclpy)")
    live.add_argument("--live", action="store_true",
                      help="record the topics over a time window first, then fit that bag")
    live.add_argument("--topics", nargs="+", metavar="TOPIC",
                      help="topics to record (default: /joint_states)")
    live.add_argument("--types", nargs="+", metavar="TYPE",
                      help="their message types, one per topic (default: "
                      "sensor_msgs/msg/JointState, for one topic)")
    live.add_argument("--duration", type=float, metavar="SECONDS",
                      help="the window: seconds of ROS time from the first message; required")
    live.add_argument("--wait", type=float, metavar="SECONDS",
                      help="how long to wait for the first message (default: 5)")
    live.add_argument("--storage", choices=sorted(STORAGES), help="the bag's storage "
                      "(default: mcap)")
    return parser


def _live_window(parser: argparse.ArgumentParser, args: argparse.Namespace) -> LiveWindow | None:
    """The :class:`LiveWindow` of parsed ``args`` (``None`` without ``--live``); a live
    option without ``--live``, a missing ``--duration`` or a bad value exits through
    ``parser.error``."""
    given = {name: getattr(args, name) for name in _LIVE_OPTIONS
             if getattr(args, name) is not None}
    if not args.live:
        if given:
            parser.error(f"live-mode option(s) {', '.join('--' + name for name in given)} "
                         "given without --live")
        return None
    if "duration" not in given:
        parser.error("--live needs --duration SECONDS (the recording window)")
    try:
        return LiveWindow(**{name: tuple(value) if isinstance(value, list) else value
                             for name, value in given.items()})
    except ValueError as exc:
        parser.error(str(exc))


def main(argv: list[str] | None = None) -> int:
    """Console script ``identify``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    window = _live_window(parser, args)
    try:
        settings = parse_settings(args.set)
    except ValueError as exc:
        parser.error(str(exc))
    if window is None:
        fitted = identify(args.experiment, out=args.out, design=args.design, bag=args.bag,
                          settings=settings)
    else:
        try:
            fitted = identify_live(args.experiment, out=args.out, design=args.design,
                                   window=window, bag=args.bag, settings=settings,
                                   log=lambda message: print(f"identify: {message}",
                                                             file=sys.stderr))
        except LiveRecordingError as exc:
            print(f"identify: error: {exc}", file=sys.stderr)
            return 1
    for name, value in fitted.items():
        print(f"{name}: {np.array2string(np.asarray(value), precision=4)}")
    return 0
