"""The cage-based morphology's three layers and their VJPs (sim_rigid.morphology), and the
design gradient of a finger rollout reaching the high-level parameters."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from codesign.tree import tree_vdot
from sim_rigid import RigidState
from sim_rigid import morphology as mo
from sim_rigid.components import check_sizes
from sim_rigid.scene import make_simulator

FIELDS = ("joint_q", "joint_qd", "joint_q_prev", "joint_qd_prev")


@pytest.fixture(scope="module")
def finger():
    return mo.assemble_finger(2)


def _moved(finger, seed=0):
    """θ moved off the rest values by up to 20 %, so the cages are not boxes."""
    rng = np.random.default_rng(seed)
    return finger.parameter_defaults * (1 + 0.2 * rng.uniform(-1, 1, len(
        finger.parameter_defaults)))


def test_assembly_by_number_of_phalanges():
    finger = mo.assemble_finger(3)
    assert finger.link_names == ("base", "phalanx1", "phalanx2", "phalanx3", "tip")
    assert finger.joint_types == ("fixed", "revolute", "revolute", "revolute", "fixed")
    assert len(finger.parameter_names) == 5 + 6 + 1
    model = make_simulator(robot=mo.description(finger, finger.parameter_defaults)).model
    assert model.link_names == finger.link_names
    assert len(model.actuated) == 3
    with pytest.raises(ValueError, match="phalanges >= 1"):
        mo.assemble_finger(0)
    with pytest.raises(ValueError, match="cage_margin must be > 1"):
        mo.assemble_finger(1, cage_margin=1.0)
    with pytest.raises(ValueError, match=r"finger sizes must be positive, got \{'width': -0.01\}"):
        mo.assemble_finger(1, width=-0.01)


def test_sizes_are_checked_by_name():
    check_sizes("part", {"side": 0.02})
    with pytest.raises(ValueError, match=r"part sizes must be positive, got \{'side': 0.0\}"):
        check_sizes("part", {"side": 0.0, "depth": 0.01})
    with pytest.raises(ValueError, match="cage_margin must be > 1 so the cage encloses"):
        check_sizes("part", {"side": 0.02}, cage_margin=0.9)


def test_rest_parameters_are_the_boxes(finger):
    simulation = mo.simulation_parameters(finger, *_layers(finger, finger.parameter_defaults))
    volume = np.array([0.02, 0.04, 0.04, 0.025]) * 0.02 * 0.015
    np.testing.assert_allclose(simulation["link_mass"], 1000.0 * volume, rtol=1e-12)
    np.testing.assert_allclose(simulation["joint_origin"],
                               [[0, 0, 0.1], [0.02, 0, 0], [0.04, 0, 0], [0.04, 0, 0]],
                               atol=1e-15)
    np.testing.assert_allclose(simulation["link_com"][:, 0], [0.01, 0.02, 0.02, 0.0125])
    # the pads: 3 x 2 vertices on each moving link's -z face
    assert simulation["contact_point"].shape == (18, 3)
    np.testing.assert_allclose(simulation["contact_point"][:, 2], -0.0075)
    assert np.all(simulation["contact_area"] > 0)


def _layers(finger, theta):
    handles = mo.handles(finger, theta)
    return handles, mo.meshes(finger, handles)


def test_lengths_scale_their_component_and_widths_only_their_axis(finger):
    theta = finger.parameter_defaults.copy()
    names = list(finger.parameter_names)
    theta[names.index("length.phalanx1")] *= 1.5
    theta[names.index("width.joint2")] *= 1.4
    _, meshes = _layers(finger, theta)
    simulation = mo.simulation_parameters(finger, *_layers(finger, theta))
    # phalanx1's cage: 1.5 times longer, its distal face (joint2) 1.4 times wider; the
    # mesh becomes the prism tapering linearly in y, of volume L h (w1 + w2) / 2
    assert simulation["link_mass"][1] == pytest.approx(
        1000.0 * 0.06 * 0.015 * (0.02 + 0.028) / 2, rel=1e-12)
    np.testing.assert_allclose(simulation["joint_origin"][2], [0.06, 0, 0], atol=1e-15)
    # the joint station scales along the joint axis (y) alone: heights stay 15 mm
    for mesh in meshes:
        assert np.ptp(mesh[:, 2]) == pytest.approx(0.015, rel=1e-12)
    joint2 = meshes[2][np.isclose(meshes[2][:, 0], meshes[2][:, 0].min())]
    assert np.ptp(joint2[:, 1]) == pytest.approx(0.028, rel=1e-12)


def test_neighbours_stay_connected_under_any_parameters(finger):
    _, meshes = _layers(finger, _moved(finger, 1))
    for before, after in zip(meshes[:-1], meshes[1:], strict=True):
        distal = before[np.isclose(before[:, 0], before[:, 0].max(), atol=1e-3)]
        proximal = after[np.isclose(after[:, 0], after[:, 0].min(), atol=1e-3)]
        # same face layout on both sides: the same points, in some order
        np.testing.assert_allclose(np.sort(distal, axis=0), np.sort(proximal, axis=0),
                                   atol=1e-15)
        assert len(distal) == len(proximal) == 4


def test_each_layer_vjp_matches_finite_differences(finger):
    rng = np.random.default_rng(2)
    theta = _moved(finger, 2)
    handles, meshes = _layers(finger, theta)
    g_handles = rng.normal(size=handles.shape)
    gradcheck(lambda x: float(np.sum(g_handles * mo.handles(finger, x["theta"]))),
              {"theta": theta}, {"theta": mo.handles_vjp(finger, g_handles)}).assert_ok()
    g_meshes = [rng.normal(size=m.shape) for m in meshes]
    gradcheck(lambda x: sum(float(np.sum(g * m)) for g, m in
                            zip(g_meshes, mo.meshes(finger, x["handles"]), strict=True)),
              {"handles": handles}, {"handles": mo.meshes_vjp(finger, g_meshes)}).assert_ok()
    simulation = mo.simulation_parameters(finger, handles, meshes)
    # weights scaled so every entry counts: inertias are ~1e-6 kg m², areas ~1e-4 m²
    scale = {"link_inertia": 1e6, "contact_area": 1e4, "link_mass": 1e2}
    g_sim = {k: scale.get(k, 1.0) * rng.normal(size=v.shape) for k, v in simulation.items()}

    def loss(x):
        out = mo.simulation_parameters(finger, x["handles"], x["meshes"])
        return sum(float(np.sum(g_sim[k] * out[k])) for k in g_sim)
    g_h, g_m = mo.simulation_parameters_vjp(finger, handles, meshes, g_sim)
    gradcheck(loss, {"handles": handles, "meshes": meshes},
              {"handles": g_h, "meshes": g_m}, directions=3).assert_ok()


def test_design_jacobian_is_the_design_vjp_of_every_cotangent(finger):
    theta = _moved(finger, 5)
    jacobian = mo.design_jacobian(finger, theta)
    design = mo.design(finger, theta)
    assert set(jacobian) == set(design)
    rng = np.random.default_rng(6)
    g_design = {k: rng.normal(size=v.shape) for k, v in design.items()}
    pulled = sum(jacobian[k].T @ g_design[k].reshape(-1) for k in design)
    np.testing.assert_allclose(pulled, mo.design_vjp(finger, theta, g_design), rtol=1e-12,
                               atol=1e-15)
    for name, value in design.items():
        assert jacobian[name].shape == (value.size, len(theta))


def test_bad_parameters_get_clear_errors(finger):
    with pytest.raises(ValueError, match=r"parameters are \['length.base'"):
        mo.handles(finger, np.ones(3))
    theta = finger.parameter_defaults.copy()
    theta[1] = -0.01
    with pytest.raises(ValueError, match=r"must be positive: \['length.phalanx1'\]"):
        mo.design(finger, theta)


def test_rollout_gradient_reaches_the_high_level_parameters(finger):
    """The whole chain: θ -> design -> 6 steps of the finger pressing its pads into a
    floor under joint torques -> a weighted sum of the final state; its ∂/∂θ from the
    steps' adjoint and design_vjp against central differences."""
    theta0 = finger.parameter_defaults
    sim = make_simulator(robot=mo.description(finger, theta0, initial=[0.2, 0.3]),
                         obstacles=[{"type": "plane", "point": [0, 0, 0.093]}],
                         contact_stiffness=300.0, contact_damping=100.0)
    theta = _moved(finger, 3) * 0.1 + theta0 * 0.9
    action, dt, steps = np.array([0.01, -0.005]), 2e-3, 6

    def rollout(design):
        trajectory = [sim.initial_state(design)]
        for _ in range(steps):
            trajectory.append(sim.step(trajectory[-1], action, design, dt))
        return trajectory

    design = mo.design(finger, theta)
    trajectory = rollout(design)
    rng = np.random.default_rng(4)
    final = trajectory.pop()
    weights = RigidState(*(rng.normal(size=np.shape(getattr(final, f))) for f in FIELDS),
                         np.asarray(0, dtype=np.int64))
    g_state, g_design = weights, {}
    for before in reversed(trajectory):
        g_state, _, g_step = sim.step_vjp(before, action, design, dt, g_state)
        g_design = {k: g_design.get(k, 0.0) + v for k, v in g_step.items()}
    assert np.abs(g_design["contact.point"]).max() > 0    # the pads touch the floor
    g_theta = mo.design_vjp(finger, theta, g_design)

    def loss(x):
        return tree_vdot(rollout(mo.design(finger, x["theta"]))[-1], weights)
    gradcheck(loss, {"theta": theta}, {"theta": g_theta}, eps=1e-6, relative_step=False,
              directions=3).assert_ok()
