"""The impedance law and its net-torque models (``codesign.impedance``), with known answers:
the lookup map's interpolation, joints and file, the law, the controller, inverse dynamics."""

import numpy as np
import pytest

from codesign.impedance import (
    ImpedanceController,
    NetTorqueMap,
    impedance_torque,
    inverse_dynamics_net_torque,
    zero_net_torque,
)

GOAL = -0.45
DT = 0.01


def _planar_map(offset=2.0) -> NetTorqueMap:
    """A one-joint map linear in both keys (τ = 400 Δθ - 3 ω + offset): bilinear reproduces
    it."""
    angle_steps = np.array([-0.00625, -0.002, 0.0, 0.00625])
    rates = np.array([-0.5, 0.0, 0.25, 0.5])
    torques = 400.0 * angle_steps[:, None] - 3.0 * rates[None, :] + offset
    return NetTorqueMap(joints=["left_s1"], angle_steps=angle_steps, rates=rates,
                        torques=torques[None], dt=DT, goal=[GOAL])


def _at(net: NetTorqueMap, angle_step, rate) -> np.ndarray:
    """The one-joint map's τ_net at angle steps Δθ and rates ω (arrays of states)."""
    angle_step = np.asarray(angle_step, dtype=np.float64)[..., None]
    return net(GOAL - angle_step, np.asarray(rate, dtype=np.float64)[..., None], [GOAL])[..., 0]


# -- the map ------------------------------------------------------------------------------


def test_the_map_interpolates_bilinearly_and_holds_its_edges():
    net = _planar_map()
    angle_step, rate = np.array([0.001, -0.004, 0.006]), np.array([0.1, -0.37, 0.49])
    assert _at(net, angle_step, rate) == pytest.approx(400 * angle_step - 3 * rate + 2.0,
                                                       abs=1e-12)
    assert _at(net, 0.0, 0.0) == pytest.approx(2.0, abs=1e-12)
    # beyond the grid: the edge value, so the torque stays bounded
    assert _at(net, 1.0, 3.0) == pytest.approx(_at(net, 0.00625, 0.5), abs=1e-12)
    assert _at(net, -1.0, -3.0) == pytest.approx(_at(net, -0.00625, -0.5), abs=1e-12)
    torque = np.array([[[0.0, 1.0], [2.0, 3.0]]])  # one joint: τ = 2 e + t on the unit square
    table = NetTorqueMap(joints=["s0"], angle_steps=[0.0, 1.0], rates=[0.0, 1.0],
                         torques=torque, dt=DT, goal=[0.0])
    # angle error = goal − q = 0.25, velocity 0.5 → 2·0.25 + 0.5
    np.testing.assert_allclose(table([0.25], [0.5], [0.5], [0.0]), [1.0])
    np.testing.assert_allclose(table([-5.0], [7.0], [0.0], [0.0]), [3.0])  # clamped corner


def test_the_map_slopes_are_its_interpolant_derivatives_and_zero_where_clamped():
    net = _planar_map()
    angle_step, rate = np.array([0.001, -0.004, 0.006]), np.array([0.1, -0.37, 0.49])
    d_angle, d_rate = net.slopes(GOAL - angle_step[:, None], rate[:, None], [GOAL])
    np.testing.assert_allclose(d_angle[:, 0], 400.0, rtol=1e-12)
    np.testing.assert_allclose(d_rate[:, 0], -3.0, rtol=1e-12)
    d_angle, d_rate = net.slopes([GOAL - 1.0], [0.1], [GOAL])  # Δθ held at its edge
    assert d_angle[0] == 0.0 and d_rate[0] == pytest.approx(-3.0)
    # a curved table: the slopes agree with central differences of the map inside a cell
    rng = np.random.default_rng(0)
    curved = NetTorqueMap(joints=["s0"], angle_steps=[0.0, 0.3, 1.0], rates=[-1.0, 0.2, 1.0],
                          torques=rng.normal(size=(1, 3, 3)), dt=DT, goal=[0.0])
    q, qd, h = np.array([-0.6]), np.array([0.5]), 1e-6
    d_angle, d_rate = curved.slopes(q, qd, [0.0])
    assert d_angle[0] == pytest.approx(
        (curved(q - h, qd, [0.0]) - curved(q + h, qd, [0.0]))[0] / (2 * h), rel=1e-7)
    assert d_rate[0] == pytest.approx(
        (curved(q, qd + h, [0.0]) - curved(q, qd - h, [0.0]))[0] / (2 * h), rel=1e-7)


def test_each_joint_reads_its_own_table_for_one_state_or_many():
    first, second = _planar_map(offset=2.0), _planar_map(offset=-5.0)
    both = NetTorqueMap(joints=["s1", "e1"], angle_steps=first.angle_steps,
                        rates=first.rates, torques=np.stack([first.torques[0],
                                                             2.0 * second.torques[0]]),
                        dt=DT, goal=[GOAL, 0.3])
    goal_q = np.array([GOAL, 0.3])
    joint_q = goal_q - np.array([[0.001, -0.004], [0.006, 0.002], [0.0, 0.0]])  # 3 states
    joint_qd = np.array([[0.1, -0.37], [0.49, 0.0], [0.0, 0.2]])
    expected = np.stack([400 * (goal_q - joint_q)[:, 0] - 3 * joint_qd[:, 0] + 2.0,
                         2.0 * (400 * (goal_q - joint_q)[:, 1] - 3 * joint_qd[:, 1] - 5.0)],
                        axis=1)
    assert both(joint_q, joint_qd, goal_q) == pytest.approx(expected, abs=1e-12)
    assert both(joint_q[1], joint_qd[1], goal_q, [0.0, 0.0]) == pytest.approx(expected[1],
                                                                              abs=1e-12)
    with pytest.raises(ValueError, match=r"has 2 joint\(s\) \['s1', 'e1'\].*shape \(3,\)"):
        both([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])


def test_a_bad_map_is_refused():
    grid = {"angle_steps": [0.0, 0.1], "rates": [0.0, 1.0]}
    one = {"joints": ["s0"], "dt": DT, "goal": [0.0]}
    with pytest.raises(ValueError, match="increasing order"):
        NetTorqueMap(**(one | grid | {"angle_steps": [0.1, 0.0]}), torques=np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="increasing grid"):
        NetTorqueMap(**(one | grid | {"rates": [0.0, np.nan]}), torques=np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="one per grid point"):
        NetTorqueMap(**one, **grid, torques=np.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match=r"shape \(joints, 2, 3\)"):
        NetTorqueMap(**(one | grid | {"rates": [0.0, 1.0, 2.0]}), torques=np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="one per grid point"):
        NetTorqueMap(**one, **grid, torques=np.full((1, 2, 2), np.inf))
    with pytest.raises(ValueError, match="positive time step"):
        NetTorqueMap(**(one | {"dt": 0.0}), **grid, torques=np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="one finite angle"):
        NetTorqueMap(**(one | {"goal": [0.0, 1.0]}), **grid, torques=np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="distinct joint names"):
        NetTorqueMap(**(one | {"joints": ["s0", "s0"], "goal": [0.0, 0.0]}), **grid,
                     torques=np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match=r"write \['s0'\]"):
        NetTorqueMap(**(one | {"joints": "s0"}), **grid, torques=np.zeros((1, 2, 2)))


def test_the_map_round_trips_through_its_file(tmp_path):
    net = _planar_map()
    loaded = NetTorqueMap.load(net.save(tmp_path / "map.npz"))
    assert np.array_equal(loaded.torques, net.torques)
    assert np.array_equal(loaded.angle_steps, net.angle_steps)
    assert np.array_equal(loaded.rates, net.rates)
    assert (loaded.dt, loaded.goal.tolist(), loaded.joints) == (DT, [GOAL], ("left_s1",))
    # written where it is asked to be, even without the .npz suffix
    assert NetTorqueMap.load(net.save(tmp_path / "map")).joints == ("left_s1",)
    np.savez(tmp_path / "other.npz", torques=net.torques)
    with pytest.raises(ValueError, match="not a net-torque map"):
        NetTorqueMap.load(tmp_path / "other.npz")


def test_a_missing_or_corrupt_map_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"absent\.npz: no net-torque map file"):
        NetTorqueMap.load(tmp_path / "absent.npz")
    (tmp_path / "text.npz").write_text("not an archive")
    with pytest.raises(ValueError, match=r"text\.npz: not a readable net-torque map"):
        NetTorqueMap.load(tmp_path / "text.npz")
    whole = _planar_map().save(tmp_path / "whole.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut\.npz: not a readable net-torque map"):
        NetTorqueMap.load(tmp_path / "cut.npz")
    np.save(tmp_path / "array.npy", np.zeros(3))
    with pytest.raises(ValueError, match="one array, not named entries"):
        NetTorqueMap.load(tmp_path / "array.npy")
    net = _planar_map()
    np.savez(tmp_path / "bad.npz", joints=np.array(["left_s1"]), angle_steps=net.angle_steps,
             rates=net.rates, torques=net.torques[:, :2], dt=DT, goal=[GOAL])
    with pytest.raises(ValueError, match=r"bad\.npz: a corrupt net-torque map: .*torques"):
        NetTorqueMap.load(tmp_path / "bad.npz")


# -- the law and the controller -----------------------------------------------------------


def test_law_known_answer_with_a_scaled_model():
    def net(q, qd, goal_q, goal_qd):
        return np.array([1.0, -2.0])
    torque = impedance_torque([0.1, 0.2], [0.5, -1.0], goal_q=[0.3, 0.0], goal_qd=[0.0, 0.0],
                              stiffness=[10.0, 20.0], damping=[2.0, 1.0], net_torque=net,
                              scale=0.6)
    # K(q_d − q) + D(q̇_d − q̇) + λ τ_net
    np.testing.assert_allclose(torque, [10 * 0.2 - 2 * 0.5 + 0.6, 20 * -0.2 + 1.0 - 1.2])
    pd = impedance_torque([0.1, 0.2], [0.5, -1.0], goal_q=[0.3, 0.0], goal_qd=[0.0, 0.0],
                          stiffness=[10.0, 20.0], damping=[2.0, 1.0])
    np.testing.assert_allclose(pd, [1.0, -3.0])
    np.testing.assert_array_equal(zero_net_torque([1.0, 2.0], None, None, None), [0, 0])


def test_the_law_at_the_goal_at_rest_is_the_net_torque():
    net = _planar_map(offset=7.5)
    controller = ImpedanceController(net)
    assert controller([GOAL], [0.0], [GOAL]) == pytest.approx([7.5], abs=1e-12)
    assert (controller.stiffness, controller.damping, controller.scale) == (30.0, 0.01, 1.0)


def test_the_controller_is_pd_plus_the_scaled_map():
    net = _planar_map()
    q, qd = np.array([[-0.452], [-0.40], [-0.6]]), np.array([[0.2], [-0.1], [0.7]])  # 3 states
    pd = impedance_torque(q, qd, goal_q=[GOAL], stiffness=30.0, damping=0.01)
    assert pd == pytest.approx(30.0 * (GOAL - q) - 0.01 * qd)
    tau = impedance_torque(q, qd, goal_q=[GOAL], stiffness=30.0, damping=0.01,
                           net_torque=net, scale=0.6)
    assert tau == pytest.approx(pd + 0.6 * net(q, qd, [GOAL]))
    controller = ImpedanceController(net, scale=0.6)
    assert controller(q, qd, [GOAL]) == pytest.approx(tau)
    assert ImpedanceController(zero_net_torque)(q, qd, [GOAL]) == pytest.approx(pd)


def test_the_controller_refuses_negative_or_infinite_gains():
    for gains, name in (({"stiffness": -1.0}, "stiffness"), ({"damping": [0.1, np.inf]},
                                                               "damping"),
                        ({"scale": -0.6}, "scale")):
        with pytest.raises(ValueError, match=f"{name} must be finite and >= 0"):
            ImpedanceController(zero_net_torque, **gains)


def test_inverse_dynamics_is_evaluated_at_the_goal_acceleration():
    calls = []

    def inverse_dynamics(q, qd, qdd):
        calls.append(qdd)
        return 2.0 * qdd + 0.5 * qd + 9.81 * np.sin(q)  # M q̈ + S q̇ + g
    net = inverse_dynamics_net_torque(inverse_dynamics, goal_qdd=[1.0, -1.0])
    np.testing.assert_allclose(net(np.array([0.0, np.pi / 2]), np.array([2.0, 0.0]), None, None),
                               [2.0 + 1.0, -2.0 + 9.81])
    np.testing.assert_allclose(inverse_dynamics_net_torque(inverse_dynamics)(
        np.zeros(2), np.zeros(2), None, None), [0.0, 0.0])
    np.testing.assert_array_equal(calls[-1], [0.0, 0.0])
