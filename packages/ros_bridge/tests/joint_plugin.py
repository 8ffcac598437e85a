"""A test plugin: ``two_joint``, two independent torque-driven joints with springs and dampers.

Each joint obeys ``q'' = u - k q - c q'`` (unit inertia), stepped by semi-implicit Euler;
design ``stiffness`` [N m/rad] and ``damping`` [N m s/rad], shape (2,) each. Small enough
for an identification to converge in a second, with a hand-derived VJP.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from codesign import DesignSpace, Parameter
from codesign.hookspecs import hookimpl

CODESIGN_API = (1, 1)


@dataclasses.dataclass(frozen=True)
class ArmState:
    """Joint angles [rad] and rates [rad/s], shape (2,) each."""

    joint_q: np.ndarray
    joint_qd: np.ndarray


class TwoJoint:
    """Two uncoupled damped spring joints started at q = (0.3, -0.2) rad, at rest."""

    action_size = 2

    def design_space(self):
        return DesignSpace([
            Parameter("stiffness", (2,), 4.0, lower=0.1, upper=50.0, unit="N m/rad"),
            Parameter("damping", (2,), 0.1, lower=0.0, upper=5.0, unit="N m s/rad"),
        ])

    def initial_state(self, design):
        return ArmState(joint_q=np.array([0.3, -0.2]), joint_qd=np.zeros(2))

    def initial_state_vjp(self, design, g_state):
        return {}

    def state_at_joints(self, design, joint_q, joint_qd):
        """The joints at angles ``joint_q`` and rates ``joint_qd`` (2,)."""
        return ArmState(joint_q=np.array(joint_q, dtype=float),
                        joint_qd=np.array(joint_qd, dtype=float))

    def step(self, state, action, design, dt):
        k, c = design["stiffness"], design["damping"]
        qd = state.joint_qd + dt * (np.asarray(action) - k * state.joint_q - c * state.joint_qd)
        return ArmState(joint_q=state.joint_q + dt * qd, joint_qd=qd)

    def step_vjp(self, state, action, design, dt, g_next):
        k, c = design["stiffness"], design["damping"]
        g = g_next.joint_qd + dt * g_next.joint_q  # everything flows through the new rate
        g_state = ArmState(joint_q=g_next.joint_q - dt * k * g,
                           joint_qd=g * (1.0 - dt * c))
        return g_state, dt * g, {"stiffness": -dt * g * state.joint_q,
                                 "damping": -dt * g * state.joint_qd}


def make_two_joint() -> TwoJoint:
    """The ``two_joint`` factory (no options)."""
    return TwoJoint()


@hookimpl
def codesign_register_simulators(register):
    register("two_joint", make_two_joint, description="two damped spring joints (tests)")
