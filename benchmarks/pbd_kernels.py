"""sim_pbd's compiled step against its NumPy reference, and the URDF reader against other
XML/URDF readers: the measurements behind the sim_pbd README's "Speed" and "Parser choice"
tables.

1. Baxter's left arm (7 joints), Δt 0.01 s: ms per ``sim_pbd.step.step`` and ``step_vjp``
   with ``kernels="numba"`` and ``"numpy"``: the second-order scheme at 100 substeps × 4
   iterations (the defaults) and 10 × 2, the first-order scheme at 10 × 2 (both solvers)
   and 1 × 30 (the paper's); best of ``--rounds`` rounds of ``--calls`` calls (the NumPy
   reference: of 3 calls).
2. Baxter's URDF (52 kB): ms per parse with the standard library's ElementTree, sim_pbd's
   expat reader and whichever of lxml, defusedxml, yourdfpy and urdf_parser_py are
   installed (median of ``--parses``), and the whole ``load_urdf`` of the left arm.

Usage: ``python benchmarks/pbd_kernels.py [--rounds 5] [--calls 2000] [--parses 200]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pbd_step import LEFT_ARM  # noqa: E402

from sim_pbd.scene import make_simulator, urdf_path  # noqa: E402
from sim_pbd.step import step, step_vjp  # noqa: E402
from sim_pbd.urdf import _parse_xml, load_urdf  # noqa: E402

SETTINGS = {"second order, GS, 100 x 4 (default)": (100, 4, "gauss_seidel", "second_order"),
            "second order, GS, 10 x 2": (10, 2, "gauss_seidel", "second_order"),
            "first order, GS, 10 x 2": (10, 2, "gauss_seidel", "first_order"),
            "first order, Jacobi, 10 x 2": (10, 2, "jacobi", "first_order"),
            "first order, Jacobi, 1 x 30 (paper)": (1, 30, "jacobi", "first_order")}


def best_ms(call, rounds: int, calls: int) -> float:
    """The best over ``rounds`` of the mean ms per call of ``calls`` calls."""
    call()
    best = np.inf
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, 1e3 * (time.perf_counter() - start) / calls)
    return best


def time_steps(rounds: int, calls: int) -> None:
    sim = make_simulator(urdf="baxter", joints=LEFT_ARM)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(20):
        state = sim.step(state, np.zeros(7), design, 0.01)
    params, action = sim.parameters(design), np.full(7, 0.5)
    g_next = type(state)(*(np.ones_like(a) for a in vars(state).values()))
    print("ms per call: numba step, numba step_vjp, NumPy step, NumPy step_vjp")
    for label, (substeps, iterations, solver, scheme) in SETTINGS.items():
        row = []
        for kernels, count in (("numba", calls), ("numpy", 3)):
            kw = dict(substeps=substeps, iterations=iterations, solver=solver, scheme=scheme,
                      kernels=kernels)
            row.append(best_ms(lambda kw=kw: step(sim.model, state, action, params, 0.01, **kw),
                               rounds, count))
            row.append(best_ms(lambda kw=kw: step_vjp(sim.model, state, action, params, 0.01,
                                                      g_next, **kw), rounds, count))
        print(f"  {label:36s} " + "  ".join(f"{ms:9.4g}" for ms in row), flush=True)
    print(f"  PBDSimulator.step (default settings, input checks included): "
          f"{best_ms(lambda: sim.step(state, action, design, 0.01), rounds, calls):.4g} ms")


def time_parsers(parses: int) -> None:
    path = urdf_path("baxter")
    text = path.read_bytes()
    readers = {"xml.etree.ElementTree.fromstring": lambda: ET.fromstring(text),
               "sim_pbd.urdf expat reader": lambda: _parse_xml(text, str(path))}
    if importlib.util.find_spec("lxml"):
        from lxml import etree

        parser = etree.XMLParser(resolve_entities=False, no_network=True)
        readers["lxml.etree.fromstring, entities off"] = lambda: etree.fromstring(text, parser)
    if importlib.util.find_spec("defusedxml"):
        from defusedxml import ElementTree as defused

        readers["defusedxml.ElementTree.fromstring"] = lambda: defused.fromstring(text)
    if importlib.util.find_spec("yourdfpy"):
        import yourdfpy

        readers["yourdfpy.URDF.load (no meshes)"] = lambda: yourdfpy.URDF.load(
            str(path), load_meshes=False, build_scene_graph=False)
    if importlib.util.find_spec("urdf_parser_py"):
        from urdf_parser_py.urdf import URDF

        readers["urdf_parser_py URDF.from_xml_string"] = lambda: URDF.from_xml_string(text)
    readers["sim_pbd.urdf.load_urdf, left arm"] = lambda: load_urdf(path, joints=LEFT_ARM)
    print(f"\nms per parse of {path.name} ({len(text) / 1000:.0f} kB), median of {parses}:")
    for label, read in readers.items():
        read()
        times = []
        for _ in range(parses):
            start = time.perf_counter()
            read()
            times.append(1e3 * (time.perf_counter() - start))
        print(f"  {label:40s} {np.median(times):.3g}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--parses", type=int, default=200)
    args = parser.parse_args(argv)
    time_steps(args.rounds, args.calls)
    time_parsers(args.parses)


if __name__ == "__main__":
    main()
