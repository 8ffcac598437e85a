"""A gradient check through a few steps of a finger pressing another body (the task scenes'
contact paths), shared by the task tests."""

from __future__ import annotations

import numpy as np

from codesign.testing import gradcheck

NAMES = ("joint.origin", "joint.axis", "link.com", "contact.point")
"""The design parameters checked: the kinematics (joint origins and axes), the centres of
mass and the pad's contact points."""


def check_pressing_gradients(simulator, action, *, eps: float, steps: int = 3,
                             dt: float = 5e-3, names=NAMES) -> None:
    """gradcheck of ``w · joint_q`` after ``steps`` steps of ``dt`` [s] from the scene's
    start under a constant ``action``, in the action and in ``names`` (default
    :data:`NAMES`, with ``contact.point``), each group on its own (finite-difference step
    ``eps``, absolute); the contact points' gradient must not vanish (the pad presses)."""
    design = simulator.design_space().defaults()
    start = simulator.initial_state(design)
    weights = np.random.default_rng(0).standard_normal(start.joint_q.size)

    def loss(inputs):
        merged = design | {name: inputs[name] for name in names}
        state = start
        for _ in range(steps):
            state = simulator.step(state, inputs["action"], merged, dt)
        return float(weights @ state.joint_q)

    states = [start]
    for _ in range(steps):
        states.append(simulator.step(states[-1], action, design, dt))
    g_state = type(start)(weights, None, None, None, None)
    g_action, g_design = np.zeros(np.size(action)), {name: 0.0 for name in names}
    for before in reversed(states[:-1]):
        g_state, g_a, g_d = simulator.step_vjp(before, action, design, dt, g_state)
        g_action = g_action + g_a
        g_design = {name: g_design[name] + g_d[name] for name in names}
    assert np.abs(g_design["contact.point"]).max() > 0.0  # the pad's points are pressed
    inputs = {"action": action} | {name: design[name] for name in names}
    grads = {"action": g_action} | g_design
    for group in inputs:
        gradcheck(loss, inputs, grads, eps=eps, relative_step=False, groups=[group],
                  directions=2, seed=1).assert_ok()
