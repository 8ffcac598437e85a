"""The README's Python examples run as written, and its plane-stress recipe holds."""

import re
from pathlib import Path

import numpy as np
import pytest

from sim_mpm.materials import lame_parameters

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text under a heading of that title, up to the next heading."""
    return re.split(r"\n#{2,3} ", README.split(f" {title}\n", 1)[1], maxsplit=1)[0]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_model_level_example_initial_offset_and_a_checked_loop_run_as_written():
    namespace: dict = {}
    for title in ("Use from Python (model level)", "Initial velocity and initial offsets",
                  "Checks in a loop of your own"):
        (code,) = python_blocks(section(title))
        exec(compile(code, f"README: {title}", "exec"), namespace)
    sim, grad = namespace["sim"], namespace["grad"]
    # the launch offset moves the particles: the gradient with respect to v0 is positive in x
    g_v = grad.initial_state.particle_v
    assert g_v.shape == (sim.model.particle_count, 2) and np.all(g_v[:, 0] > 0)
    assert namespace["substep"] == 100


def test_documented_topics_are_in_the_readme():
    for topic in ("initial_offset", "`velocity`", "plane strain", "sim.check_state",
                  "compiling kernels (first run only)"):
        assert topic in README, topic


@pytest.mark.parametrize("nu", [0.1, 0.3, 0.45])
def test_the_plane_stress_recipe_gives_plane_stress_lame_parameters(nu):
    """E (1 + 2ν) / (1 + ν)² and ν / (1 + ν) through the plane-strain formulas give the
    plane-stress μ = E / (2(1 + ν)) and λ = E ν / (1 − ν²)."""
    E = 7.0
    mu, lam = lame_parameters(E * (1 + 2 * nu) / (1 + nu) ** 2, nu / (1 + nu))
    assert mu == pytest.approx(E / (2 * (1 + nu)))
    assert lam == pytest.approx(E * nu / (1 - nu**2))
