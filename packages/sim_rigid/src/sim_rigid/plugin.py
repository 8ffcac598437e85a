"""codesign plugin hooks: the ``rigid`` simulator and the examples."""

from __future__ import annotations

from codesign.examples import register_examples
from codesign.hookspecs import hookimpl

from .gripper_scene import GraspLiftShake
from .scene import make_simulator
from .terms import JointTarget, ReachTargets, TouchPoint

CODESIGN_API = (1, 1)

EXAMPLES = {
    "arm_damping": "the 4-link arm driven by random torques; identify its joint damping "
                   "from the recorded swings (`codesign demo rigid`)",
    "finger_reach": "a 4-phalanx finger's fingertip reaches four targets in sequence; "
                    "L-BFGS-B on the open-loop torques (Xu et al., Finger Reach, control only)",
    "finger_reach_codesign": "Finger Reach co-design: the link lengths (joint origins) and the "
                             "torques together by L-BFGS-B",
    "finger_reach_cmaes": "Finger Reach co-design by CMA-ES, the gradient-free baseline",
    "finger_reach_cage": "Finger Reach co-design through the cage parameters (phalanx "
                         "lengths, station widths: the paper's design space) and the torques "
                         "by L-BFGS-B",
    "flip_box": "a finger on an x-z carriage flips a heavy hinged box by 90°; L-BFGS-B on "
                "the open-loop forces and torques (Xu et al., Flip Box, control only)",
    "flip_box_codesign": "Flip Box co-design: the link lengths (joint origins) and the "
                         "controls together by L-BFGS-B",
    "flip_box_cmaes": "Flip Box co-design by CMA-ES, the gradient-free baseline",
    "flip_box_cage": "Flip Box co-design through the cage parameters (phalanx lengths, the "
                     "tip's free end: room for the paper's hook) and the controls by L-BFGS-B",
    "rubik_rotate": "a 3-phalanx finger on an x-y carriage that turns about the vertical "
                    "rotates a Rubik's cube's top layer by 90°; L-BFGS-B on the open-loop "
                    "forces and torques (Xu et al., Rotate Rubik's Cube, control only)",
    "rubik_rotate_codesign": "Rotate Rubik's Cube co-design through the cage parameters "
                             "(phalanx lengths, station widths, the tip's height) and the "
                             "controls by L-BFGS-B",
    "rubik_rotate_cmaes": "Rotate Rubik's Cube co-design through the same cage parameters "
                          "by CMA-ES, the gradient-free baseline",
    "assemble": "two fingers on a hand that slides in the horizontal plane push a small box "
                "into a movable mount's hole; L-BFGS-B on the open-loop forces and torques "
                "(Xu et al., Assemble, control only)",
    "assemble_codesign": "Assemble co-design: the fingers' link lengths and the controls by "
                         "L-BFGS-B in three stages, the contact forces scaled 0.01, 0.1, 1 "
                         "(the paper's continuation)",
    "assemble_cmaes": "Assemble co-design of the same link lengths and controls by CMA-ES, the "
                      "gradient-free baseline, in the same three stages on the paper's "
                      "5000-episode budget",
    "assemble_cage": "Assemble co-design through both fingers' cage parameters (phalanx and "
                     "tip lengths, joint and tip widths and heights: 16 of the paper's 17) and "
                     "the controls by L-BFGS-B in the same three contact-scale stages",
    "freeform_gripper": "two free-form cube fingers grasp, lift and shake a diamond along a "
                        "fixed motion; L-BFGS-B on the 120 inner cage handles' displacements "
                        "(Xu et al., Free-form Gripper)",
}
"""Example name -> description; each is ``sim_rigid/examples/<name>.yaml`` (package data)."""

__all__ = ["CODESIGN_API", "EXAMPLES"]


@hookimpl
def codesign_register_simulators(register):
    register("rigid", make_simulator,
             description="articulated rigid robots in reduced coordinates: implicit BDF2, "
                         "adjoint gradients (Xu et al., DiffHand)")


@hookimpl
def codesign_register_examples(register):
    register_examples(register, __package__, EXAMPLES, default="arm_damping")


@hookimpl
def codesign_register_controllers(register):
    register("grasp_lift_shake", GraspLiftShake,
             description="the free-form gripper's predefined motion as an open-loop table of "
                         "position targets: close the fingers, lift, shake (Xu et al.)")


@hookimpl
def codesign_register_terms(register):
    register("reach_targets", ReachTargets,
             description="a point on a link (a fingertip) against targets in sequence, each "
                         "over its time window: Σ ‖p − p̂‖ (Xu et al., Finger Reach)")
    register("joint_target", JointTarget,
             description="one coordinate against its target: Σ (q − q̂)² (Xu et al., Flip "
                         "Box's hinge angle to 90°), or after the last step only with at_end "
                         "(Rotate Rubik's Cube's layer angle), or of two coordinates' "
                         "difference with relative_to (Assemble's mount against box turn)")
    register("touch_point", TouchPoint,
             description="a point on one link against a point on another until a time: "
                         "Σ ‖p − p_touch‖² (Xu et al., Flip Box's touch term, t < T/2)")
