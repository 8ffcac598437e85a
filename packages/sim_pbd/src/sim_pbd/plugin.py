"""codesign plugin hooks: the ``pbd`` simulator, its observers and terms, the
``joint_impedance`` controller, the ``holding_poses`` recording source, and the examples."""

from __future__ import annotations

from codesign.examples import register_examples
from codesign.hookspecs import hookimpl

from .holding_poses import holding_pose_recordings
from .impedance_controller import JointImpedanceController
from .scene import make_simulator
from .terms import (
    CircleTracking,
    EndEffectorObserver,
    JointGoal,
    JointObserver,
    JointTracking,
    JointWork,
    LinkPointObserver,
)

CODESIGN_API = (1, 1)

EXAMPLES = {
    "baxter_swing": "Baxter's left arm released under gravity with the URDF's joint damping; "
                    "identify the joint damping from the recorded swing (`codesign demo pbd`)",
    "double_pendulum_design": "the link lengths of a double pendulum whose tip follows a circle "
                              "under a task-space stiffness law, for tracking and joint work "
                              "(the paper's Sec. V-B)",
    "baxter_spring_estimation": "the stiffness and offset of a spring across Baxter's s1 "
                                "identified from static poses and their holding torques (the "
                                "paper's Eq. 31, Sec. V-C)",
    "baxter_gravity_compensation": "the torques that hold Baxter's left arm still at static "
                                   "poses, fitted through the simulator and compared with "
                                   "Pinocchio's g(q) (the paper's Sec. V-C, Table III)",
    "baxter_torque_estimation": "the joint torques that drove Baxter's left arm along a "
                                "recorded trajectory, an open-loop torque table fitted "
                                "through the simulator (the paper's Sec. V-D)",
    "baxter_impedance_control": "impedance control of Baxter's s1 with a net-torque map built "
                                "through the simulator, pushed by external torques, against "
                                "PD (the paper's Sec. V-E, Figs. 12-13)",
}
"""Example name -> description; each is ``sim_pbd/examples/<name>.yaml`` (package data)."""

__all__ = ["CODESIGN_API", "EXAMPLES"]


@hookimpl
def codesign_register_simulators(register):
    register("pbd", make_simulator,
             description="articulated rigid robots from URDF: differentiable position-based "
                         "dynamics (XPBD; Liu, Li et al.)")


@hookimpl
def codesign_register_observers(register):
    register("joints", JointObserver,
             description="joint positions [rad or m] then rates [rad/s or m/s], 2m values")
    register("link_point", LinkPointObserver,
             description="world position [m] of a point fixed on a link (e.g. the end effector)")
    register("end_effector", EndEffectorObserver,
             description="end effector's position [m], velocity [m/s] and Jacobian (3, m), "
                         "6 + 3m values (for the task_space_stiffness controller)")


@hookimpl
def codesign_register_terms(register):
    register("circle_tracking", CircleTracking,
             description="running ‖p_ee − p_des(t)‖ [m] to a point running round a circle")
    register("joint_tracking", JointTracking,
             description="Σ λ1 ‖q − q̂‖² + λ2 ‖q̇ − q̂̇‖² to a recorded joint trajectory (.npz; "
                         "Eq. 26's tracking part)")
    register("joint_goal", JointGoal,
             description="running λ1 ‖q − q_d‖² + λ2 ‖q̇‖² from resting at a goal pose")
    register("joint_work", JointWork,
             description="running work of the joint torques Δt τ·q̇ [J] (signed)")


@hookimpl
def codesign_register_controllers(register):
    register("joint_impedance", JointImpedanceController,
             description="Eq. 28 impedance law with a net-torque map built through the "
                         "simulator (or loaded, or none: PD), plus external pushes")


@hookimpl
def codesign_register_recordings(register):
    register("holding_poses", holding_pose_recordings,
             description="static poses and the joint torques holding them (CSV/NPZ, checked), "
                         "one one-step recording each, starting at rest at its pose")


@hookimpl
def codesign_register_examples(register):
    register_examples(register, __package__, EXAMPLES, default="baxter_swing")
