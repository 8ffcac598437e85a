"""fake_robot and impedance_controller as two processes on loopback: killing the robot trips
the controller's watchdog, which then commands zero torque."""

import os
import signal
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor

from ros_bridge.messages import FLOAT64_ARRAY, float64_array_values
from ros_bridge.rclpy_adapter import from_rclpy, rclpy_class

DOMAIN = 75  # a domain of its own: no other test's (or person's) nodes
BIN = Path(sys.executable).parent
URDF = str(files("ros_bridge.data") / "two_link_arm.urdf")


def start(script, *parameters):
    arguments = [a for p in parameters for a in ("-p", p)]
    return subprocess.Popen([str(BIN / script), "--ros-args", *arguments],
                            env=dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_killing_the_robot_trips_the_controllers_watchdog():
    robot = start("fake_robot", "rate:=200.0", "initial_q:=[-1.5708,0.0]")
    controller = start("impedance_controller", "joints:=[shoulder,elbow]", f"urdf:={URDF}",
                       "stiffness:=[30.0,10.0]", "damping:=[3.0,0.5]", "goal_q:=[-1.2,0.3]",
                       "rate:=200.0")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=DOMAIN)
    try:
        node = rclpy.create_node("listener", context=context)
        commands = []
        node.create_subscription(rclpy_class(FLOAT64_ARRAY), "/effort_controller/commands",
                                 lambda m: commands.append(
                                     float64_array_values(from_rclpy(m, FLOAT64_ARRAY))), 50)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)

        def spin_until(done, seconds):  # a margin for discovery, not a timing assertion
            deadline = time.monotonic() + seconds
            while not done() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.02)
            return done()

        assert spin_until(lambda: any(np.any(c != 0) for c in commands), 15.0), \
            "the controller never commanded torque from the robot's joint states"
        robot.send_signal(signal.SIGKILL)
        robot.wait(5)
        commands.clear()
        assert spin_until(lambda: len(commands) > 20 and not np.any(commands[-1]), 5.0), \
            "the controller kept commanding torque after the robot died"
        controller.send_signal(signal.SIGTERM)
        assert controller.wait(10) == 0
        executor.shutdown()
    finally:
        rclpy.shutdown(context=context)
        for process in (robot, controller):
            if process.poll() is None:
                process.kill()
                process.wait(5)
