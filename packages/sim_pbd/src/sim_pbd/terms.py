"""Robot observers: joint positions and rates (what a real robot's encoders give) and the
world position of a point on a link (an end effector, a marker).

Factories take ``simulator`` (a :class:`~sim_pbd.simulator.PBDSimulator`) and keyword-only
options, as the plugin registry calls them. Both read the joint frames of the design.
"""

from __future__ import annotations

import numpy as np

from codesign.tree import tree_zeros_with

from .kinematics import joint_positions, joint_positions_vjp
from .rotations import quat_rotate, quat_rotate_vjp

__all__ = ["JointObserver", "LinkPointObserver"]


class JointObserver:
    """Observation: joint positions [rad or m] then joint rates [rad/s or m/s], size 2m, in
    the model's joint order (the URDF's)."""

    def __init__(self, *, simulator):
        self.simulator = simulator
        self.size = 2 * simulator.model.joint_count

    def observe(self, state, design):
        """(joint_q, joint_qd) concatenated, shape (2m,)."""
        params = self.simulator.parameters(design)
        return np.concatenate(joint_positions(self.simulator.model, params, state))

    def observe_vjp(self, state, design, g_observation):
        """(∂L/∂state, ∂L/∂(joint origins)) given ∂L/∂observation (2m,)."""
        sim = self.simulator
        m = sim.model.joint_count
        g = np.asarray(g_observation, dtype=np.float64)
        g_state, g_params = joint_positions_vjp(sim.model, sim.parameters(design), state,
                                                g[:m], g[m:])
        return g_state, sim.design_gradient(g_params)


class LinkPointObserver:
    """Observation: the world position [m] of ``point`` (in the link's URDF frame [m]) on
    ``link`` (a link name; default the last link), size 3."""

    def __init__(self, *, simulator, link: str | None = None,
                 point: list[float] = (0.0, 0.0, 0.0)):
        model = simulator.model
        names = list(model.link_names)
        link = names[-1] if link is None else link
        if link not in names:
            raise ValueError(f"link_point: unknown link {link!r}; the model's links are {names}")
        point = np.asarray(point, dtype=np.float64)
        if point.shape != (3,) or not np.all(np.isfinite(point)):
            raise ValueError(f"link_point: point must be [x, y, z] in metres, got {point}")
        index = names.index(link)
        parent_joint = np.flatnonzero(model.joint_child == index)
        if parent_joint.size == 0:
            raise ValueError(f"link_point: link {link!r} hangs on no joint (a floating base), "
                             "so its URDF frame is not in the model; use a link below a joint")
        self.simulator = simulator
        self.link, self.joint = index, int(parent_joint[0])
        self.size = 3
        self._point = point

    def _offset(self, design) -> np.ndarray:
        # the body frame sits at the centre of mass and the link's URDF frame at its parent
        # joint's origin, joint_child_x in the body frame: body point = point + joint_child_x
        return self._point + self.simulator.parameters(design)["joint_child_x"][self.joint]

    def observe(self, state, design):
        """The point's world position [m], shape (3,)."""
        offset = self._offset(design)
        return state.link_x[self.link] + quat_rotate(state.link_q[self.link], offset)

    def observe_vjp(self, state, design, g_observation):
        """(∂L/∂state, ∂L/∂joint.child_origin) given ∂L/∂position (3,)."""
        offset = self._offset(design)
        g = np.asarray(g_observation, dtype=np.float64)
        g_q, g_offset = quat_rotate_vjp(state.link_q[self.link], offset, g)
        g_x = np.zeros_like(state.link_x)
        g_x[self.link] = g
        g_link_q = np.zeros_like(state.link_q)
        g_link_q[self.link] = g_q
        g_child_x = np.zeros_like(self.simulator.model.joint_child_x)
        g_child_x[self.joint] = g_offset
        return (tree_zeros_with(state, link_x=g_x, link_q=g_link_q),
                {"joint.child_origin": g_child_x})
