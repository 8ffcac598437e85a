"""Hostile experiment files: mutations of every example through ``codesign validate``.

Each mutant is an example's YAML node graph with one to three mutations (huge, non-finite
and wrong-typed values, deletions, deep nesting, long strings and keys, aliases, recursive
aliases, alias bombs, merge keys with overrides and lists of bases, duplicate keys),
serialized by PyYAML, which writes anchors and aliases for shared nodes. Every mutant must
validate or fail with a :class:`ConfigError` whose every problem names a YAML path and a
line: no traceback, whatever the file holds.
"""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path

import pytest
import yaml

from codesign.cli import main
from codesign.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "packages").glob("*/src/*/examples/*.yaml"))
MUTANTS_PER_EXAMPLE = 30  # 17 examples: 510 files
SEED = 13

STR, INT, FLOAT, BOOL, NULL = (f"tag:yaml.org,2002:{t}" for t in
                               ("str", "int", "float", "bool", "null"))
MAP, SEQ, MERGE = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:merge"
HOSTILE_SCALARS = [
    (INT, "1000000000000"), (INT, "-1"), (INT, "0"), (INT, "1" + "0" * 30),
    (INT, "1" + "0" * 400), (FLOAT, "1.0e+12"), (FLOAT, "1.0e+308"), (FLOAT, "-1.0e+308"),
    (FLOAT, "1e400"), (FLOAT, ".nan"), (FLOAT, ".inf"), (FLOAT, "-.inf"), (FLOAT, "1.0e-320"),
    (FLOAT, "2.5"), (STR, "text"), (STR, "x" * 100_000), (BOOL, "true"), (NULL, "~"),
]


def scalar(tag: str, value: str) -> yaml.ScalarNode:
    return yaml.ScalarNode(tag, value)


def nodes_of(root: yaml.Node) -> list[tuple[yaml.Node, yaml.Node | None, int]]:
    """Every ``(node, parent, position)`` reachable once from ``root``, keys excluded;
    ``position`` indexes the parent's items (sequence) or pairs (mapping)."""
    found, stack, seen = [], [(root, None, 0)], set()
    while stack:
        node, parent, position = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        found.append((node, parent, position))
        if isinstance(node, yaml.SequenceNode):
            stack += [(child, node, i) for i, child in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            stack += [(value, node, i) for i, (_, value) in enumerate(node.value)]
    return found


def replace(parent: yaml.Node, position: int, new: yaml.Node) -> None:
    if isinstance(parent, yaml.SequenceNode):
        parent.value[position] = new
    else:
        parent.value[position] = (parent.value[position][0], new)


def alias_bomb(levels: int) -> yaml.Node:
    """Nine references to the level below, ``levels`` deep: 9**levels leaves in few bytes."""
    node = yaml.SequenceNode(SEQ, [scalar(STR, "lol")] * 9)
    for _ in range(levels):
        node = yaml.SequenceNode(SEQ, [node] * 9)
    return node


def mutate(root: yaml.MappingNode, rng: random.Random) -> str:
    """Apply one random mutation to the node graph under ``root``; returns its name."""
    entries = [e for e in nodes_of(root) if e[1] is not None]
    node, parent, position = rng.choice(entries)
    mappings = [e[0] for e in entries if isinstance(e[0], yaml.MappingNode)] or [root]
    kind = rng.choice(["value", "value", "value", "type", "delete", "nest", "alias", "bomb",
                       "merge", "merge_list", "duplicate", "long_key", "variant"])
    if kind == "value":
        replace(parent, position, scalar(*rng.choice(HOSTILE_SCALARS)))
    elif kind == "type":
        replace(parent, position, rng.choice([
            yaml.MappingNode(MAP, [(scalar(STR, "a"), scalar(INT, "1"))]),
            yaml.SequenceNode(SEQ, [scalar(INT, "1"), scalar(STR, "b")]),
            scalar(STR, "wrong"), scalar(NULL, "~")]))
    elif kind == "delete":
        del parent.value[position]
    elif kind == "nest":
        for _ in range(rng.choice([3, 60, 150])):
            node = yaml.SequenceNode(SEQ, [node])
        replace(parent, position, node)
    elif kind == "alias":  # any node, an ancestor included (a recursive alias)
        replace(parent, position, rng.choice(entries)[0])
    elif kind == "bomb":
        replace(parent, position, alias_bomb(rng.choice([2, 5, 8])))
    elif kind in ("merge", "merge_list"):
        target = rng.choice(mappings)
        bases = [rng.choice(mappings) for _ in range(1 if kind == "merge" else 2)]
        base = bases[0] if kind == "merge" else yaml.SequenceNode(SEQ, bases)
        overrides = [(k, scalar(*rng.choice(HOSTILE_SCALARS))) for k, _ in bases[0].value[:1]]
        target.value[:0] = [(scalar(MERGE, "<<"), base), *overrides]
    elif kind == "duplicate":
        target = rng.choice(mappings)
        if target.value:
            target.value.append(rng.choice(target.value))
    elif kind == "long_key":
        rng.choice(mappings).value.append((scalar(STR, "k" * 5000), scalar(INT, "1")))
    else:  # a variant: quick.run merges run and overrides its steps, as people write it
        run = next((v for k, v in root.value if k.value == "run"), None)
        if isinstance(run, yaml.MappingNode):
            variant = yaml.MappingNode(MAP, [(scalar(MERGE, "<<"), run),
                                             (scalar(STR, "steps"), scalar(INT, "2"))])
            quick = yaml.MappingNode(MAP, [(scalar(STR, "run"), variant)])
            root.value = [(k, v) for k, v in root.value if k.value != "quick"]
            root.value.append((scalar(STR, "quick"), quick))
    return kind


def mutants(example: Path, count: int, rng: random.Random) -> list[tuple[str, str]]:
    """``count`` mutants of ``example``: (the mutations' names, the YAML text)."""
    out = []
    for _ in range(count):
        root = yaml.compose(example.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        kinds = [mutate(root, rng) for _ in range(rng.choice([1, 1, 2, 3]))]
        out.append(("+".join(kinds), yaml.serialize(root, Dumper=yaml.SafeDumper, width=100)))
    return out


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[Path, Path]:
    """A folder per examples folder holding links to its assets (images, meshes, videos), so
    a mutant finds the files its example names."""
    out = {}
    for source in sorted({path.parent for path in EXAMPLES}):
        folder = tmp_path_factory.mktemp(source.parents[1].name)
        for asset in source.iterdir():
            if asset.suffix != ".yaml":
                (folder / asset.name).symlink_to(asset)
        out[source] = folder
    return out


def validate(path: Path, *, quick: bool) -> ConfigError | None:
    """What ``codesign validate [--quick] PATH`` does, its tracebacks let through."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            status = main(["validate", str(path), "--debug", *(["--quick"] if quick else [])])
        except ConfigError as exc:
            return exc
    assert status == 0 and out.getvalue().startswith("OK: "), out.getvalue()
    return None


def test_every_mutant_of_every_example_validates_or_names_key_and_line(folders):
    rng = random.Random(SEED)
    outcomes = {"ok": 0, "refused": 0}
    for example in EXAMPLES:
        for index, (kinds, text) in enumerate(mutants(example, MUTANTS_PER_EXAMPLE, rng)):
            path = folders[example.parent] / f"{example.stem}-{index:02d}.yaml"
            path.write_text(text, encoding="utf-8")
            error = validate(path, quick=index % 4 == 3 and "\nquick:" in text)
            outcomes["ok" if error is None else "refused"] += 1
            for issue in [] if error is None else error.errors:
                where = f"{path.name} ({kinds}): {issue}"
                assert issue.line is not None, where
                assert issue.path != "(file)" or "line" in str(issue), where
    assert sum(outcomes.values()) >= 500
    assert outcomes["ok"] and outcomes["refused"], outcomes


def test_a_large_legitimate_experiment_of_1_mb_validates(tmp_path):
    """The octoped with every per-particle material field written out, for the run and again
    for its quick setting, under a provenance comment: just under 1 MB, within every limit."""
    example = ROOT / "packages/sim_mpm/src/sim_mpm/examples/octoped_3d.yaml"
    particles = 1756
    fields = ""
    for name, typical in [("youngs_modulus", 9.0), ("poissons_ratio", 0.25),
                          ("density", 1.0), ("volume", 8.0e-6)]:
        init = [typical * (1.0 + 0.2 * ((i * 7919) % 1000) / 1000) for i in range(particles)]
        fields += (f"  particle.{name}:\n"
                   f"    init: [{', '.join(f'{v:.17g}' for v in init)}]\n"
                   f"    lower: [{', '.join(f'{v * 0.731:.17g}' for v in init)}]\n"
                   f"    upper: [{', '.join(f'{v * 1.377:.17g}' for v in init)}]\n")
    text = example.read_text(encoding="utf-8")
    text = text.replace("design:\n  particle.youngs_modulus: {lower: 7.0, upper: 20.0}\n",
                        "design:\n" + fields)
    text = text.replace("\nquick:\n", "\nquick:\n  design:\n" + fields.replace("\n  ", "\n    ")
                        .replace("  particle.", "    particle.", 1))
    note = "# particle {0:05d}: material from row {0:05d} of the calibration table\n"
    lines = (1_000_000 - len(text.encode())) // len(note.format(0))
    path = tmp_path / "octoped_fields.yaml"
    path.write_text("".join(note.format(i) for i in range(lines)) + text, encoding="utf-8")
    assert 990_000 < path.stat().st_size < 1_000_000
    assert validate(path, quick=False) is None and validate(path, quick=True) is None
