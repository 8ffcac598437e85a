"""Sane-range limits on experiment files and run sizes, written down once.

Validation refuses anything beyond them, naming the limit in the message. They are generous
on purpose: far past any experiment that finishes in a day, well short of what would make
``codesign validate`` hang or exhaust memory (a YAML alias bomb, ``run.steps: 1e12``).

YAML documents (checked while loading, :mod:`codesign.config`):

- ``YAML_MAX_DEPTH``: nesting levels of mappings and lists;
- ``YAML_MAX_NODES``: keys, values and list items of the document with every alias
  expanded (an alias counts every node of the subtree it repeats, merge keys included), so
  a few hundred bytes cannot expand into millions of values (an alias bomb) and loading any
  document takes well under a second; per-particle data beyond it belongs in a file;
- ``YAML_MAX_INTEGER``: the magnitude of an integer literal (64 bits);

run sizes (checked by :mod:`codesign.validation`): ``RUN_RANGES`` and ``VIDEO_RANGES`` map a
key of ``run`` / ``run.video`` to its inclusive ``(lowest, highest)``; ``MAX_DT`` is the
largest ``run.dt`` [s], ``MAX_ITERATIONS`` the largest ``optimizer.iterations``,
``MAX_STARTS`` the largest ``optimizer.starts``, ``MAX_STAGES`` the most ``stages`` and
``MAX_BATCH_SIZE`` the largest ``identification.batch_size``; component sizes
(``MAX_POPULATION``: CMA-ES ``population_size``, ``MAX_RECORDINGS``: the synthetic source's
``count``) are annotated on their factory's keyword (:class:`codesign.options.Range`);

messages: ``MAX_ECHO_CHARS`` characters of a value (or a YAML path) shown in an error,
``MAX_MESSAGE_CHARS`` characters of one problem's message (a plugin's exception text),
``MAX_REPORTED_ISSUES`` problems listed in one :class:`~codesign.config.ConfigError`,
``MAX_UNKNOWN_KEYS_LISTED`` unknown keys of one mapping reported one by one (with a
"did you mean"), the rest together (a file of thousands of typos stays quick to check).
"""

from __future__ import annotations

__all__ = ["MAX_BATCH_SIZE", "MAX_DT", "MAX_ECHO_CHARS", "MAX_ITERATIONS", "MAX_MESSAGE_CHARS",
           "MAX_POPULATION", "MAX_RECORDINGS", "MAX_STARTS", "MAX_REPORTED_ISSUES", "MAX_STAGES",
           "MAX_STEPS",
           "MAX_UNKNOWN_KEYS_LISTED", "RUN_RANGES", "VIDEO_RANGES", "YAML_MAX_DEPTH",
           "YAML_MAX_INTEGER", "YAML_MAX_NODES"]

YAML_MAX_DEPTH = 100
YAML_MAX_NODES = 100_000
YAML_MAX_INTEGER = 2**64

MAX_STEPS = 1_000_000  # control steps of one rollout
RUN_RANGES = {
    "steps": (1, MAX_STEPS),
    "substeps": (1, 10_000),
    "checkpoint_every": (1, MAX_STEPS),
    "seed": (0, 2**32 - 1),  # every NumPy generator, legacy ones included, accepts it
    "workers": (1, 1024),
}
VIDEO_RANGES = {
    "fps": (1, 1000),
    "width": (16, 8192),  # pixels: 8K
    "height": (16, 8192),
    "every": (1, MAX_STEPS),
}
MAX_DT = 3600.0  # s: one hour
MAX_ITERATIONS = 1_000_000
MAX_BATCH_SIZE = 1_000_000
MAX_STARTS = 100_000  # starting points of one multi-start optimization
MAX_STAGES = 100  # stages of one run (each a whole optimization)
MAX_POPULATION = 100_000  # candidates of one evolution-strategy generation
MAX_RECORDINGS = 100_000  # trajectories a recording source makes

MAX_ECHO_CHARS = 200
MAX_MESSAGE_CHARS = 4000
MAX_REPORTED_ISSUES = 50
MAX_UNKNOWN_KEYS_LISTED = 20
