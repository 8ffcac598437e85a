"""Hand-built models for the sim_pbd tests: pendulums, a prismatic chain, a 3D chain."""

from __future__ import annotations

import dataclasses
import importlib.util
import types
from pathlib import Path

import numpy as np
import pytest

from sim_pbd import JOINT_TYPES, PBDModel, PBDState
from sim_pbd.kinematics import forward_kinematics
from sim_pbd.rotations import (
    quat_conjugate,
    quat_from_axis_angle,
    quat_multiply,
    quat_to_matrix,
)

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def rod_inertia(mass: float, length: float, radius: float = 0.02) -> np.ndarray:
    """Inertia of a solid cylinder along its body z axis about its centre [kg m²]."""
    side = mass * (3 * radius**2 + length**2) / 12.0
    return np.diag([side, side, 0.5 * mass * radius**2])


def make_model(links, joints, *, gravity=(0.0, 0.0, -9.81)) -> PBDModel:
    """A PBDModel from ``links`` [(mass, inertia)] and ``joints`` [dict(type, parent, child,
    parent_x, child_x, axis, optional parent_q, child_q, lower, upper, damping, friction,
    compliance)]."""
    m = len(joints)

    def column(key, default):
        return np.array([np.asarray(j.get(key, default), dtype=np.float64) for j in joints])

    return PBDModel(
        link_names=tuple(f"link{i}" for i in range(len(links))),
        link_mass=np.array([mass for mass, _ in links], dtype=np.float64),
        link_inertia=np.array([inertia for _, inertia in links], dtype=np.float64),
        joint_names=tuple(f"joint{j}" for j in range(m)),
        joint_type=np.array([JOINT_TYPES.index(j["type"]) for j in joints], dtype=np.int64),
        joint_parent=np.array([j["parent"] for j in joints], dtype=np.int64),
        joint_child=np.array([j["child"] for j in joints], dtype=np.int64),
        joint_parent_x=column("parent_x", np.zeros(3)),
        joint_parent_q=column("parent_q", IDENTITY),
        joint_child_x=column("child_x", np.zeros(3)),
        joint_child_q=column("child_q", IDENTITY),
        joint_axis=column("axis", np.array([0.0, 1.0, 0.0])),
        joint_lower=column("lower", -np.inf),
        joint_upper=column("upper", np.inf),
        joint_damping=column("damping", 0.0),
        joint_friction=column("friction", 0.0),
        joint_compliance=column("compliance", 0.0),
        joint_rest=np.zeros(m),
        gravity=np.asarray(gravity, dtype=np.float64),
    )


def pendulum(length: float = 1.0, mass: float = 1.0, **joint) -> PBDModel:
    """A rod hanging from a world pivot at the origin, hinge about y, COM length/2 below."""
    return make_model([(mass, rod_inertia(mass, length))],
                      [dict(type="revolute", parent=-1, child=0, parent_x=np.zeros(3),
                            child_x=np.array([0.0, 0.0, length / 2]), **joint)])


def chain(count: int, length: float = 0.5, mass: float = 1.0, **joint) -> PBDModel:
    """``count`` rods hinged end to end about y, the first to a world pivot at the origin."""
    links = [(mass, rod_inertia(mass, length))] * count
    joints = [dict(type="revolute", parent=i - 1, child=i,
                   parent_x=np.zeros(3) if i == 0 else np.array([0.0, 0.0, -length / 2]),
                   child_x=np.array([0.0, 0.0, length / 2]), **joint) for i in range(count)]
    return make_model(links, joints)


def prismatic_chain() -> PBDModel:
    """World -> hinge about y -> rod -> slider along the rod's z axis -> block."""
    links = [(1.0, rod_inertia(1.0, 0.6)), (0.5, np.diag([0.002, 0.003, 0.004]))]
    joints = [dict(type="revolute", parent=-1, child=0, child_x=np.array([0.0, 0.0, 0.3])),
              dict(type="prismatic", parent=0, child=1, parent_x=np.array([0.0, 0.0, -0.3]),
                   child_x=np.array([0.0, 0.02, 0.05]), axis=np.array([0.0, 0.0, 1.0]))]
    return make_model(links, joints)


def _rotated_inertia(principal, axis, angle):
    rotation = quat_to_matrix(quat_from_axis_angle(np.asarray(axis) / np.linalg.norm(axis),
                                                   angle))
    return rotation @ np.diag(principal) @ rotation.T


def chain_3d() -> PBDModel:
    """Three links with full inertia tensors, tilted joint frames and mixed axes; the last
    joint is prismatic."""
    links = [(1.2, _rotated_inertia([0.02, 0.03, 0.01], [1, 2, 3], 0.4)),
             (0.8, _rotated_inertia([0.01, 0.015, 0.006], [-1, 0, 2], 0.7)),
             (0.4, _rotated_inertia([0.002, 0.003, 0.0025], [0, 1, 1], 0.3))]
    tilt = quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), 0.3)
    turn = quat_from_axis_angle(np.array([0.0, 0.6, 0.8]), -0.5)
    joints = [
        dict(type="revolute", parent=-1, child=0, parent_x=np.array([0.0, 0.1, 0.2]),
             parent_q=tilt, child_x=np.array([0.05, 0.0, 0.2]), axis=np.array([0.0, 0.0, 1.0])),
        dict(type="revolute", parent=0, child=1, parent_x=np.array([0.1, 0.0, -0.2]),
             parent_q=turn, child_x=np.array([0.0, 0.03, 0.15]),
             child_q=quat_conjugate(tilt), axis=np.array([0.6, 0.0, 0.8])),
        dict(type="prismatic", parent=1, child=2, parent_x=np.array([0.0, 0.0, -0.15]),
             parent_q=quat_multiply(turn, tilt), child_x=np.array([0.01, 0.0, 0.04]),
             axis=np.array([0.0, 1.0, 0.0])),
    ]
    return make_model(links, joints)


def state_at(model: PBDModel, joint_q, joint_qd=None) -> PBDState:
    """The state at joint positions ``joint_q`` moving with joint rates ``joint_qd`` (link
    velocities by central differences of the forward kinematics along ``joint_qd``)."""
    params = model.parameters()
    joint_q = np.asarray(joint_q, dtype=np.float64)
    joint_qd = np.zeros_like(joint_q) if joint_qd is None else np.asarray(joint_qd, float)
    link_x, link_q = forward_kinematics(model, params, joint_q)
    eps = 1e-6
    x_plus, q_plus = forward_kinematics(model, params, joint_q + eps * joint_qd)
    x_minus, q_minus = forward_kinematics(model, params, joint_q - eps * joint_qd)
    link_v = (x_plus - x_minus) / (2 * eps)
    link_w = np.array([2 * quat_multiply((qp - qm) / (2 * eps), quat_conjugate(q))[1:]
                       for qp, qm, q in zip(q_plus, q_minus, link_q, strict=True)])
    return PBDState(link_x=link_x, link_q=link_q, link_v=link_v, link_w=link_w)


MODELS = {
    "pendulum": lambda: pendulum(),
    "double_pendulum": lambda: chain(2),
    "prismatic_chain": prismatic_chain,
    "chain_3d": chain_3d,
}


def floating(model: PBDModel) -> PBDModel:
    """``model`` with the joint of its root link to the world removed: a floating base."""
    keep = slice(1, None)
    joint_fields = {f.name: getattr(model, f.name)[keep] for f in dataclasses.fields(model)
                    if f.name.startswith("joint_")}
    return type(model)(**{**vars(model), **joint_fields, "floating_base": True})


@pytest.fixture
def models():
    """The builders above: ``models.pendulum()``, ``models.chain(3)``, ``models.state_at``."""
    return types.SimpleNamespace(make_model=make_model, pendulum=pendulum, chain=chain,
                                 prismatic_chain=prismatic_chain, chain_3d=chain_3d,
                                 floating=floating, state_at=state_at, rod_inertia=rod_inertia)


@pytest.fixture(params=sorted(MODELS))
def any_model(request) -> PBDModel:
    """Each hand-built model in turn."""
    return MODELS[request.param]()


@pytest.fixture(scope="session")
def reference():
    """The reference library's helpers (``reference.py``: Pinocchio's Baxter models and
    their integration); skips where Pinocchio is not installed."""
    pytest.importorskip("pinocchio", reason="the reference library pin (Pinocchio) is a dev "
                                            "dependency: uv sync installs it")
    spec = importlib.util.spec_from_file_location("sim_pbd_reference",
                                                  Path(__file__).with_name("reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
