"""Torque estimation through the simulator (``sim_pbd.torque_estimation``): holding torques
against Pinocchio's g(q), Eq. 26's gradient against finite differences, and torques
recovered from a recording the simulator made under known torques."""

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_pbd.kinematics import joint_positions
from sim_pbd.scene import make_simulator
from sim_pbd.torque_estimation import (
    HorizonProblem,
    holding_torque,
    rest_state,
    track_torques,
)

LEFT_ARM = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]
POSES = np.array([[0.3, -0.5, 0.8, 1.0, -0.6, 0.9, 0.2],
                  [-1.0, 0.4, -2.0, 2.0, 1.5, -1.0, 2.5],
                  [1.2, -1.8, 0.5, 0.3, -2.5, 1.6, -0.7]])
"""Poses [rad] within Baxter's joint limits, arm out, up and folded."""
DT = 0.01


def _sim(**settings):
    return make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False, **settings)


def test_holding_torque_is_gravity_compensation(reference):
    """At 100 substeps (h = 0.1 ms) the one-step holding torque is within 0.35 N m of g(q)
    (30 random poses: at most 0.31 N m, README); at 50 substeps the error doubles (first
    order in h)."""
    import pinocchio as pin

    arm = reference.reduced_baxter(LEFT_ARM)
    data = arm.createData()
    errors = {}
    for substeps in (50, 100):
        sim = _sim(substeps=substeps)
        design = sim.design_space().defaults()
        errors[substeps] = np.array([
            holding_torque(sim, design, q, dt=DT) - pin.computeGeneralizedGravity(arm, data, q)
            for q in POSES])
    assert np.max(np.abs(errors[100])) < 0.35
    ratio = np.abs(errors[50]).sum() / np.abs(errors[100]).sum()
    assert 1.6 < ratio < 2.4


@pytest.mark.parametrize(("settings", "held"), [
    ({}, 1e-6), ({"scheme": "first_order", "substeps": 10, "iterations": 2}, 1e-3)])
def test_holding_torque_minimizes_the_loss(settings, held):
    """Gauss-Newton reaches Eq. 26's minimum (zero gradient). No torque holds both angles
    and rates exactly: the minimum is a compromise, 4e-7 of the loss of zero torque (the arm
    falling) at the defaults, 5e-4 for the first order at 10 substeps of 2 iterations, whose
    unconverged projection lets the arm sag. Gauss-Newton's last steps move the torques by
    1e-7 N m on round-off (the loss is flat to 1e-19 there): a gradient of 1e-8 of the
    falling arm's is zero."""
    sim = _sim(**settings)
    design = sim.design_space().defaults()
    torque = holding_torque(sim, design, POSES[0], dt=DT)
    problem = HorizonProblem(sim, design, rest_state(sim, design, POSES[0]), POSES[:1],
                             np.zeros((1, 7)), None, DT, (1.0, 0.02, 0.0))
    assert problem.loss(torque) < held * problem.loss(np.zeros(7))
    gradient, fall = problem.evaluate(torque).grad, problem.evaluate(np.zeros(7)).grad
    assert np.abs(gradient).max() < 1e-8 * np.abs(fall).max()


def test_adam_lowers_the_loss():
    """The paper's optimizer (the core's Adam, 80 iterations at 0.2 N m) started 2 N m off
    every joint's holding torque lowers the loss 1000-fold (to 30 times the minimum: it
    does not converge in the paper's budget)."""
    sim = _sim()
    design = sim.design_space().defaults()
    exact = holding_torque(sim, design, POSES[0], dt=DT)
    start = exact + 2.0
    found = holding_torque(sim, design, POSES[0], dt=DT, optimizer="adam", iterations=80,
                           init=start)
    problem = HorizonProblem(sim, design, rest_state(sim, design, POSES[0]), POSES[:1],
                             np.zeros((1, 7)), None, DT, (1.0, 0.02, 0.0))
    assert problem.loss(found) < 1e-3 * problem.loss(start)


def _horizon_problem(sim, design):
    rng = np.random.default_rng(1)
    return HorizonProblem(sim, design, rest_state(sim, design, POSES[0]),
                          POSES[0] + 1e-3 * rng.standard_normal((2, 7)),
                          0.1 * rng.standard_normal((2, 7)), rng.standard_normal(7), DT,
                          (1.0, 0.02, 2e-7))


def test_loss_gradient_matches_finite_differences():
    """Eq. 26 over two steps with all three terms: gradient vs finite differences."""
    sim = _sim()
    design = sim.design_space().defaults()
    problem = _horizon_problem(sim, design)
    x = np.random.default_rng(2).normal(0.0, 5.0, problem.size)
    # steps of 1e-3 N m: the loss through 100 substeps of 4 iterations carries round-off
    # that steps of 5e-6 N m (the relative default) turn into 4e-6 of the derivative
    gradcheck(lambda inputs: problem.loss(inputs["torque"]), {"torque": x},
              {"torque": problem.evaluate(x).grad}, directions=3, eps=1e-3,
              relative_step=False).assert_ok()


def test_jacobian_agrees_with_gradient():
    """The Gauss-Newton Jacobian from per-residual sweeps gives the gradient 2 Jᵀ r."""
    sim = _sim()
    design = sim.design_space().defaults()
    problem = _horizon_problem(sim, design)
    x = np.linspace(-3.0, 3.0, problem.size)
    r, states = problem.residuals(x)
    np.testing.assert_allclose(2.0 * problem.jacobian(x, states).T @ r,
                               problem.evaluate(x).grad, rtol=1e-10, atol=1e-18)


@pytest.mark.parametrize("init", ["zero", "previous", "gravity"])
@pytest.mark.parametrize("horizon", [1, 3])
def test_track_torques_recovers_known_torques(init, horizon):
    """A recording made by the simulator itself under known torques (no noise) is tracked
    exactly: the torques come back to 1e-6 N m, whatever the start and horizon."""
    sim = _sim()
    design = sim.design_space().defaults()
    state = rest_state(sim, design, POSES[0])
    rng = np.random.default_rng(3)
    params = sim.parameters(design)
    gravity = holding_torque(sim, design, POSES[0], dt=DT)
    true = gravity + rng.normal(0.0, 2.0, (4, 7))
    rows = [joint_positions(sim.model, params, state)]
    for torque in true:
        state = sim.step(state, torque, design, DT)
        rows.append(joint_positions(sim.model, params, state))
    recorded_q, recorded_qd = (np.array(column) for column in zip(*rows, strict=True))
    tracking = track_torques(sim, design, recorded_q, recorded_qd, dt=DT, init=init,
                             horizon=horizon, gravity_torques=np.tile(gravity, (5, 1)))
    np.testing.assert_allclose(tracking.torques, true, atol=1e-6)
    np.testing.assert_allclose(tracking.joint_q, recorded_q, atol=1e-9)


def test_gravity_start_defaults_to_holding_torques():
    """Without ``gravity_torques`` the gravity start is the holding torque at each recorded
    angle: with no optimizer iterations the estimate is the start itself (zero for the
    zero start)."""
    sim = _sim()
    design = sim.design_space().defaults()
    recorded = np.tile(POSES[0], (2, 1))
    holding = holding_torque(sim, design, POSES[0], dt=DT)
    tracking = track_torques(sim, design, recorded, np.zeros_like(recorded), dt=DT,
                             init="gravity", iterations=0)
    np.testing.assert_allclose(tracking.torques[0], holding, rtol=1e-12)
    zero = track_torques(sim, design, recorded, np.zeros_like(recorded), dt=DT, init="zero",
                         iterations=0)
    np.testing.assert_array_equal(zero.torques[0], np.zeros(7))


def test_bad_inputs_are_named():
    sim = _sim()
    design = sim.design_space().defaults()
    with pytest.raises(ValueError, match="weights"):
        holding_torque(sim, design, POSES[0], dt=DT, weights=(0.0, 0.0))
    with pytest.raises(ValueError, match="one value per joint"):
        holding_torque(sim, design, POSES[0][:3], dt=DT)
    with pytest.raises(ValueError, match="optimizer"):
        holding_torque(sim, design, POSES[0], dt=DT, optimizer="newton")
    recorded = np.tile(POSES[0], (3, 1))
    with pytest.raises(ValueError, match="init"):
        track_torques(sim, design, recorded, np.zeros_like(recorded), dt=DT, init="one")
    with pytest.raises(ValueError, match="joint_qd_recorded"):
        track_torques(sim, design, recorded, np.zeros((2, 7)), dt=DT)
    with pytest.raises(ValueError, match="horizon"):
        track_torques(sim, design, recorded, np.zeros_like(recorded), dt=DT, horizon=0)


def test_track_torques_of_a_pinocchio_recording(reference):
    """Torques driving Pinocchio's arm (gravity compensation plus a 1 Hz sine of 3 N m,
    1 N m at w0 and w1, 0.2 N m at w2, held over each step, no noise) come back within
    0.6 N m RMSE per joint over 8 steps at 50 substeps (0.46 N m at s1, 0.22 at e0 and e1,
    below 0.05 elsewhere: XPBD's first-order error, as in the holding torques at
    h = 0.2 ms), and the simulator stays within 1e-3 rad of the recording's angles (4e-5 rad
    seen)."""
    import pinocchio as pin

    arm = reference.reduced_baxter(LEFT_ARM)
    data = arm.createData()

    def torque(k, q, v):
        amplitude = np.array([3.0, 3.0, 3.0, 3.0, 1.0, 1.0, 0.2])
        return (pin.computeGeneralizedGravity(arm, data, q)
                + amplitude * np.sin(2.0 * np.pi * k * DT))

    joint_q, joint_qd, true = reference.drive(arm, POSES[0], torque, 8, damping=0.7)
    sim = _sim(substeps=50, damping=0.7)
    design = sim.design_space().defaults()
    tracking = track_torques(sim, design, joint_q, joint_qd, dt=DT, init="zero",
                             weights=(1.0, 0.02, 0.0))
    assert np.sqrt(np.mean((tracking.torques - true) ** 2, axis=0)).max() < 0.6
    assert np.abs(tracking.joint_q - joint_q).max() < 1e-3
