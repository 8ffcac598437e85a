"""The safe controller: the limits and the watchdog around the core's impedance law
(``codesign.impedance``, tested in codesign/tests/test_impedance.py), with known answers
and an injected clock."""

import numpy as np
import pytest

from codesign.impedance import NetTorqueMap
from ros_bridge.controller import JointListError, SafeImpedanceController
from ros_bridge.limits import (
    LimitError,
    bounds_violation,
    joint_limits,
    limit_torque,
    urdf_joint_limits,
)
from ros_bridge.messages import joint_state_message
from ros_bridge.watchdog import Watchdog, same_stop

JOINTS = ["s0", "s1"]
URDF = """<robot name="two">
  <link name="base"/><link name="a"/><link name="b"/>
  <joint name="s0" type="revolute"><parent link="base"/><child link="a"/>
    <limit effort="50" velocity="2.0" lower="-1.5" upper="1.5"/></joint>
  <joint name="s1" type="continuous"><parent link="a"/><child link="b"/>
    <limit effort="15" velocity="4.0"/></joint>
</robot>"""
PERIOD = 0.002


@pytest.fixture
def urdf(tmp_path):
    path = tmp_path / "two.urdf"
    path.write_text(URDF)
    return path


def make(urdf, **overrides):
    options = dict(joints=JOINTS, stiffness=[30.0, 10.0], damping=[2.0, 1.0],
                   goal_q=[0.5, -0.2], goal_qd=[0.0, 0.0],
                   limits=joint_limits(urdf, JOINTS, rate=5.0), period=PERIOD)
    return SafeImpedanceController(**(options | overrides))


def joint_state(q, qd, *, order=(0, 1), extra=True):
    names = [JOINTS[i] for i in order] + (["head_pan"] if extra else [])
    q = [q[i] for i in order] + ([9.0] if extra else [])
    qd = [qd[i] for i in order] + ([9.0] if extra else [])
    return joint_state_message(names, stamp=0.0, position=q, velocity=qd)


# -- limits -------------------------------------------------------------------------------


def test_urdf_limits_and_continuous_joints(urdf):
    limits = urdf_joint_limits(urdf, ["s1", "s0"])
    np.testing.assert_array_equal(limits["effort"], [15.0, 50.0])
    np.testing.assert_array_equal(limits["lower"], [-np.inf, -1.5])
    with pytest.raises(LimitError, match="has no joint 'e0'"):
        urdf_joint_limits(urdf, ["e0"])


def test_a_transmissions_joint_element_is_not_the_joint(tmp_path):
    # Baxter's URDF names its joints again in <transmission><joint>, without limits
    path = tmp_path / "with_transmission.urdf"
    path.write_text(URDF.replace("</robot>", """  <transmission name="t0">
    <joint name="s0"><hardwareInterface>EffortJointInterface</hardwareInterface></joint>
  </transmission>
</robot>"""))
    np.testing.assert_array_equal(urdf_joint_limits(path, ["s0"])["effort"], [50.0])


@pytest.mark.parametrize("options, message", [
    ({"effort": [60.0, 10.0]}, "effort limit 60 of joint 's0' is looser than the URDF's 50"),
    ({"velocity": 5.0}, "velocity limit 5 of joint 's0'"),
    ({"lower": -2.0}, "lower limit -2 of joint 's0'"),
    ({"rate": 0.0}, "must be positive"),
])
def test_limits_looser_than_the_urdf_are_refused(urdf, options, message):
    with pytest.raises(LimitError, match=message):
        joint_limits(urdf, JOINTS, **({"rate": 1.0} | options))


def test_torque_is_clamped_to_effort_and_rate(urdf):
    limits = joint_limits(urdf, JOINTS, rate=[5.0, 1.0], effort=[8.0, 15.0])
    np.testing.assert_allclose(limit_torque([20.0, -3.0], np.array([6.0, 0.0]), limits),
                               [8.0, -1.0])
    np.testing.assert_allclose(limit_torque([2.0, 0.5], np.array([0.0, 0.0]), limits),
                               [2.0, 0.5])


def test_bounds_violation_names_the_joint(urdf):
    limits = joint_limits(urdf, JOINTS, rate=1.0)
    assert bounds_violation([0.0, 100.0], [0.0, 0.0], limits, JOINTS) is None
    assert "joint 's0' at 1.6" in bounds_violation([1.6, 0.0], [0.0, 0.0], limits, JOINTS)
    assert "'s1' moves at -4.5" in bounds_violation([0.0, 0.0], [0.0, -4.5], limits, JOINTS)


# -- the watchdog -------------------------------------------------------------------------


def test_watchdog_trips_after_two_missed_periods():
    dog = Watchdog(period=0.01)
    assert dog.stale(None, 0.0) == "no joint state received yet"
    assert dog.stale(1.0, 1.0199) is None
    assert "more than 2 control periods" in dog.stale(1.0, 1.0201)
    assert "after now" in dog.stale(1.0, 0.99)
    with pytest.raises(ValueError, match="positive"):
        Watchdog(period=0.0)


# -- the controller -----------------------------------------------------------------------


def test_controller_follows_the_law_with_joints_by_name_and_ramps_at_the_rate(urdf):
    controller = make(urdf, limits=joint_limits(urdf, JOINTS, rate=100.0))
    state = controller.receive(controller.initial_state(),
                               joint_state([0.4, 0.0], [0.1, -0.5], order=(1, 0)), now=1.0)
    command, state = controller.command(state, now=1.001)
    assert command.stop is None
    np.testing.assert_allclose(command.torque, [30 * 0.1 - 2 * 0.1, 10 * -0.2 + 0.5])
    slow = make(urdf)  # rate 5 N m per cycle
    state = slow.receive(slow.initial_state(), joint_state([-1.0, 0.0], [0.0, 0.0]), now=1.0)
    torques = []
    for k in range(4):
        command, state = slow.command(state, now=1.0 + 0.0005 * k)
        torques.append(command.torque[0])
    np.testing.assert_allclose(torques, [5.0, 10.0, 15.0, 20.0])  # toward 30·1.5 = 45


def test_controller_adds_the_scaled_net_torque_map_read_from_its_file(urdf, tmp_path):
    # each joint's table: τ_net = 100 (q_d − q) − 2 q̇ + offset, which bilinear reproduces
    angle_steps, rates = np.array([-0.5, 0.0, 0.5]), np.array([-1.0, 0.0, 1.0])
    plane = 100.0 * angle_steps[:, None] - 2.0 * rates[None, :]
    NetTorqueMap(joints=JOINTS, angle_steps=angle_steps, rates=rates,
                 torques=np.stack([plane + 1.0, plane - 3.0]), dt=0.01,
                 goal=[0.5, -0.2]).save(tmp_path / "map.npz")
    controller = make(urdf, limits=joint_limits(urdf, JOINTS, rate=100.0),
                      net_torque=NetTorqueMap.load(tmp_path / "map.npz"), scale=0.6)
    state = controller.receive(controller.initial_state(),
                               joint_state([0.4, 0.0], [0.1, -0.5]), now=1.0)
    command, _ = controller.command(state, now=1.001)
    assert command.stop is None
    pd = np.array([30 * 0.1 - 2 * 0.1, 10 * -0.2 + 0.5])
    net = np.array([100 * 0.1 - 2 * 0.1 + 1.0, 100 * -0.2 + 2 * 0.5 - 3.0])
    np.testing.assert_allclose(command.torque, pd + 0.6 * net)


def test_controller_zero_torque_within_two_missed_periods(urdf):
    controller = make(urdf)
    state = controller.initial_state()
    command, state = controller.command(state, now=0.0)
    assert command.stop == "no joint state received yet"
    state = controller.receive(state, joint_state([0.4, 0.0], [0.0, 0.0]), now=1.0)
    command, state = controller.command(state, now=1.0 + 2 * PERIOD - 1e-6)
    assert command.stop is None and np.any(command.torque != 0)
    command, state = controller.command(state, now=1.0 + 2 * PERIOD + 1e-6)
    assert "old" in command.stop
    np.testing.assert_array_equal(command.torque, [0.0, 0.0])
    # fresh states resume control, ramping up from zero
    state = controller.receive(state, joint_state([0.4, 0.0], [0.0, 0.0]), now=2.0)
    command, state = controller.command(state, now=2.0)
    assert command.stop is None and np.all(np.abs(command.torque) <= 5.0)


@pytest.mark.parametrize("message, reason", [
    (joint_state_message(["s0", "head_pan"], stamp=0.0, position=[0, 0], velocity=[0, 0]),
     r"no joint\(s\) \['s1'\]"),
    (joint_state_message(JOINTS, stamp=0.0, position=[np.nan, 0.0], velocity=[0, 0]), "NaN"),
    (joint_state_message(JOINTS, stamp=0.0, position=[0.0, 0.0]), "no velocity"),
])
def test_unusable_joint_states_give_zero_until_a_good_one(urdf, message, reason):
    controller = make(urdf)
    state = controller.receive(controller.initial_state(),
                               joint_state([0.4, 0.0], [0.0, 0.0]), now=1.0)
    command, state = controller.command(state, now=1.0)
    assert command.stop is None
    state = controller.receive(state, message, now=1.001)
    command, state = controller.command(state, now=1.001)
    assert command.stop is not None and __import__("re").search(reason, command.stop)
    np.testing.assert_array_equal(command.torque, [0.0, 0.0])
    state = controller.receive(state, joint_state([0.4, 0.0], [0.0, 0.0]), now=1.002)
    assert controller.command(state, now=1.002)[0].stop is None


def test_leaving_the_joint_limits_latches_a_stop_until_reset(urdf):
    controller = make(urdf)
    state = controller.receive(controller.initial_state(),
                               joint_state([1.6, 0.0], [0.0, 0.0]), now=1.0)
    command, state = controller.command(state, now=1.0)
    assert "outside its range" in command.stop
    state = controller.receive(state, joint_state([0.4, 0.0], [0.0, 0.0]), now=1.001)
    command, state = controller.command(state, now=1.001)
    assert command.stop.startswith("stopped: joint 's0'")
    np.testing.assert_array_equal(command.torque, [0.0, 0.0])
    command, _ = controller.command(controller.reset(state), now=1.001)
    assert command.stop is None


@pytest.mark.parametrize("net_torque, reason", [
    (lambda q, qd, gq, gqd: 1 / 0, "the model failed: ZeroDivisionError"),
    (lambda q, qd, gq, gqd: np.array([np.nan, 0.0]), "the model gave torque"),
])
def test_a_dead_model_latches_zero_torque(urdf, net_torque, reason):
    controller = make(urdf, net_torque=net_torque)
    state = controller.receive(controller.initial_state(),
                               joint_state([0.4, 0.0], [0.0, 0.0]), now=1.0)
    command, state = controller.command(state, now=1.0)
    assert reason in command.stop and state.latched
    np.testing.assert_array_equal(command.torque, [0.0, 0.0])


def test_joint_list_must_match_the_robot_and_shutdown_is_zero(urdf):
    controller = make(urdf)
    controller.check_joints(JOINTS)
    with pytest.raises(JointListError, match="same joints in the same order"):
        controller.check_joints(JOINTS[::-1])
    with pytest.raises(JointListError, match="distinct"):
        make(urdf, joints=["s0", "s0"])
    with pytest.raises(ValueError, match="outside the joint limits"):
        make(urdf, goal_q=[2.0, 0.0])
    assert controller.shutdown().stop == "shutdown"
    np.testing.assert_array_equal(controller.shutdown().torque, [0.0, 0.0])


def test_stop_reasons_compare_by_kind_not_by_the_numbers_in_them():
    # a dead robot's state ages every cycle: one warning, not one per cycle
    watchdog = Watchdog(period=0.002)
    old = watchdog.stale(0.0, 0.010)
    older = watchdog.stale(0.0, 0.500)
    assert old != older and same_stop(old, older)
    assert not same_stop(old, watchdog.stale(None, 0.5))
    assert not same_stop(old, None) and same_stop(None, None)
