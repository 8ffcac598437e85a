"""Models for the sim_rigid tests: the bundled 4-link arm and a branching tree with every
joint type, as descriptions (dicts), and Pinocchio's reference where it is installed."""

from __future__ import annotations

import importlib.util
import itertools
import types
from pathlib import Path

import numpy as np
import pytest

from sim_rigid import RigidState
from sim_rigid.description import load_description
from sim_rigid.scene import robot_path
from sim_rigid.step import step, step_vjp


def arm4():
    """The bundled 4-link arm (yaw, then three pitch joints)."""
    return load_description(robot_path("arm4"))


def mixed_tree_description(*, damping: float = 0.1) -> dict:
    """A floating torso (free joint) carrying two branches: a revolute-prismatic arm and a
    fixed plate with a revolute flap. Tilted joint frames, off-centre centres of mass, full
    inertia tensors."""
    def link(name, mass, com, inertia):
        return {"name": name, "mass": mass, "com": com, "inertia": inertia}
    return {
        "links": [
            link("torso", 2.0, [0.02, -0.01, 0.05], [0.04, 0.05, 0.03, 0.002, -0.001, 0.003]),
            link("upper", 0.7, [0.1, 0.0, 0.01], [0.002, 0.006, 0.0055, 0.0, 0.0005, 0.0]),
            link("slider", 0.3, [0.0, 0.02, 0.03], [0.001, 0.0012, 0.0009]),
            link("plate", 0.5, [0.0, 0.05, 0.0], [0.003, 0.002, 0.004]),
            link("flap", 0.2, [0.03, 0.0, -0.02], [0.0004, 0.0005, 0.0003, 0.00005, 0.0,
                                                  0.00002]),
        ],
        "joints": [
            {"name": "float", "type": "free", "parent": "world", "child": "torso",
             "origin": [0.1, 0.0, 1.0], "rpy": [0.1, -0.2, 0.3], "damping": damping,
             "initial": [0.05, -0.02, 0.1, 0.3, -0.4, 0.2]},
            {"name": "shoulder", "type": "revolute", "parent": "torso", "child": "upper",
             "origin": [0.1, 0.05, 0.1], "rpy": [0.3, 0.0, -0.2], "axis": [0.2, 1.0, 0.1],
             "damping": damping, "initial": 0.4},
            {"name": "extend", "type": "prismatic", "parent": "upper", "child": "slider",
             "origin": [0.2, 0.0, 0.0], "axis": [1.0, 0.0, 0.3], "damping": damping,
             "initial": 0.05},
            {"name": "mount", "type": "fixed", "parent": "torso", "child": "plate",
             "origin": [-0.1, 0.0, 0.05], "rpy": [0.0, 0.5, 0.0]},
            {"name": "hinge", "type": "revolute", "parent": "plate", "child": "flap",
             "origin": [0.0, 0.1, 0.0], "axis": [1.0, 0.0, 0.0], "damping": damping,
             "initial": -0.3},
        ],
    }


def box_description(*, half: float = 0.1, mass: float = 1.0) -> dict:
    """A solid cube of side 2 ``half`` [m] on a free joint, its eight corners contact
    points, resting on its bottom face at z = half."""
    corners = [[sx * half, sy * half, sz * half]
               for sx, sy, sz in itertools.product((-1.0, 1.0), repeat=3)]
    moment = mass * (2 * half) ** 2 / 6.0
    return {"links": [{"name": "box", "mass": mass, "inertia": [moment] * 3,
                       "contacts": corners}],
            "joints": [{"name": "free", "type": "free", "parent": "world", "child": "box",
                        "initial": [0.0, 0.0, half, 0.0, 0.0, 0.0]}]}


def cuboid_mesh(half=(0.1, 0.2, 0.3)):
    """(vertices (8, 3) [m], faces (12, 3)): a closed outward triangle mesh of the box
    |z_i| <= half_i."""
    vertices = np.array(list(itertools.product((-1.0, 1.0), repeat=3))) * np.asarray(half)
    faces = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7],
             [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]
    return vertices, np.array(faces)


def mixed_tree(**options):
    """:func:`mixed_tree_description` as a model."""
    return load_description(mixed_tree_description(**options))


@pytest.fixture
def models():
    """The builders above: ``models.arm4()``, ``models.mixed_tree()``,
    ``models.random_point(model)``, ..."""
    return types.SimpleNamespace(arm4=arm4, mixed_tree=mixed_tree,
                                 mixed_tree_description=mixed_tree_description,
                                 box_description=box_description, random_point=random_point,
                                 cuboid_mesh=cuboid_mesh, tilted=tilted)


@pytest.fixture(params=["arm4", "mixed_tree"])
def any_model(request):
    """Each test model in turn."""
    return {"arm4": arm4, "mixed_tree": mixed_tree}[request.param]()


@pytest.fixture(scope="session")
def paths_agree():
    """``paths_agree(model, state, action, steps, dt, *, params=None, **settings)``: the
    compiled step and VJP (``kernels="numba"``) equal the NumPy reference over ``steps``
    steps (at the model's parameters, those in ``params`` replaced); returns the last
    state."""
    return _paths_agree


def _paths_agree(model, state, action, steps, dt, *, params=None, **settings):
    """Take ``steps`` steps by both paths (SDIRK2's start, then BDF2), comparing the states
    and every VJP to round-off; ``params`` replace the model's parameters by name."""
    params = model.parameters() | (params or {})
    d = model.coordinate_count
    g_next = RigidState(*(np.linspace(-1.0, 2.0, d) * (k + 1) for k in range(4)), None)
    for _ in range(steps):
        compiled = step(model, state, action, params, dt, kernels="numba", **settings)
        reference = step(model, state, action, params, dt, kernels="numpy", **settings)
        for field in ("joint_q", "joint_qd"):
            np.testing.assert_allclose(getattr(compiled, field), getattr(reference, field),
                                       rtol=0, atol=1e-12)
        g_compiled = step_vjp(model, state, action, params, dt, g_next, kernels="numba",
                              **settings)
        g_reference = step_vjp(model, state, action, params, dt, g_next, kernels="numpy",
                               **settings)
        for field in ("joint_q", "joint_qd", "joint_q_prev", "joint_qd_prev"):
            want = getattr(g_reference[0], field)
            np.testing.assert_allclose(getattr(g_compiled[0], field), want, rtol=1e-10,
                                       atol=1e-12 * np.abs(want).max(initial=1.0))
        np.testing.assert_allclose(g_compiled[1], g_reference[1], rtol=1e-10)
        assert set(g_compiled[2]) == set(g_reference[2])
        for name, value in g_reference[2].items():
            np.testing.assert_allclose(g_compiled[2][name], value, rtol=1e-9,
                                       atol=1e-11 * np.abs(value).max(initial=0.0),
                                       err_msg=name)
        state = compiled
    return state


@pytest.fixture(scope="session")
def reference():
    """The reference library's helpers (``reference.py``: our models rebuilt in Pinocchio);
    skips where Pinocchio is not installed."""
    pytest.importorskip("pinocchio", reason="the reference library pin (Pinocchio) is a dev "
                                            "dependency: uv sync installs it")
    spec = importlib.util.spec_from_file_location("sim_rigid_reference",
                                                  Path(__file__).with_name("reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def pressing_gradcheck():
    """``check_pressing_gradients(simulator, action, *, eps)`` of
    ``rigid_contact_gradcheck.py``: the task scenes' gradient check through contact."""
    spec = importlib.util.spec_from_file_location(
        "sim_rigid_contact_gradcheck", Path(__file__).with_name("rigid_contact_gradcheck.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check_pressing_gradients


def tilted(model, seed: int = 0) -> dict:
    """Parameters off the model's: its joint axis directions turned and scaled off unit
    length (the dynamics normalize them) and every centre of mass moved, by name."""
    rng = np.random.default_rng(seed)
    axes = model.joint_axis + 0.3 * rng.standard_normal(model.joint_axis.shape)
    return {"joint_axis": axes * rng.uniform(0.5, 2.0, (model.link_count, 1)),
            "link_com": model.link_com + 0.02 * rng.standard_normal(model.link_com.shape)}


def random_point(model, seed: int = 0):
    """Coordinates near the rest pose, rates and accelerations, each (d,)."""
    rng = np.random.default_rng(seed)
    d = model.coordinate_count
    return (model.joint_rest + 0.3 * rng.standard_normal(d), rng.standard_normal(d),
            rng.standard_normal(d))
