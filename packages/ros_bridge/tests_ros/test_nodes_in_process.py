"""The fake robot and the impedance controller as nodes in one process: the arm is driven to
its goal, and a controller refuses a joint list that is not the robot's."""

import time
from importlib.resources import files

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from ros_bridge.controller import JointListError
from ros_bridge.nodes.fake_robot import FakeRobotNode
from ros_bridge.nodes.impedance_controller import ImpedanceControllerNode

URDF = str(files("ros_bridge.data") / "two_link_arm.urdf")
JOINTS = ["shoulder", "elbow"]
HANGING = [-1.5708, 0.0]  # the arm starts hanging at rest (it swings in a vertical plane)
GOAL = [-1.2, 0.3]


def controller_parameters(**changes):
    values = {"joints": JOINTS, "urdf": URDF, "stiffness": [30.0, 10.0],
              "damping": [3.0, 0.5], "goal_q": GOAL, "torque_rate": 2.0,
              "rate": 200.0} | changes
    return [Parameter(k, value=v) for k, v in values.items()]


@pytest.fixture
def context():
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=74)
    yield context
    rclpy.shutdown(context=context)


def test_the_controller_holds_the_fake_arm_near_its_goal(context):
    robot = FakeRobotNode(context=context,
                          parameter_overrides=[Parameter("rate", value=200.0),
                                               Parameter("initial_q", value=HANGING)])
    controller = ImpedanceControllerNode(context=context,
                                         parameter_overrides=controller_parameters())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(robot)
    executor.add_node(controller)
    deadline = time.monotonic() + 12.0  # discovery margin and settling, not a timing check
    # PD without gravity compensation settles off the goal by g(q)/K: within 0.25 rad
    while time.monotonic() < deadline and not (
            controller.stop is None and np.abs(robot.joint_q - GOAL).max() < 0.25
            and np.abs(robot.joint_qd).max() < 0.05):
        executor.spin_once(timeout_sec=0.01)
    assert controller.stop is None
    assert np.abs(robot.joint_q - GOAL).max() < 0.25
    executor.shutdown()
    robot.destroy_node()
    controller.destroy_node()


def test_a_joint_list_that_is_not_the_robots_is_refused(context):
    with pytest.raises(JointListError, match="list the same joints in the same order"):
        ImpedanceControllerNode(context=context, parameter_overrides=controller_parameters(
            robot_joints=["elbow", "shoulder"]))
