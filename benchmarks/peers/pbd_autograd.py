"""The paper's differentiable PBD the way its authors built it: PyTorch tensors, a Jacobi
constraint solver with a fixed iteration count (30 in the paper), gradients by
backpropagation through the recorded graph (Liu, Li et al., Sec. III-B and V-A).

The same XPBD substep as :mod:`sim_pbd.step` (its module docstring gives the scheme), written
independently in batched tensors: symplectic prediction with the gyroscopic term, implicit
joint damping impulses in tree order, ``iterations`` Jacobi passes (every joint's positional
and angular block correction from the pass-start poses, each scaled by 1 / max(n_p, n_c),
summed), velocities from positions. Scope: revolute joints without limits or friction, a
fixed base, rigid joints (compliance 0): Baxter's arm as the benchmark runs it. The model
(masses, inertias, joint frames) comes from a :class:`sim_pbd.PBDModel`.
"""

from __future__ import annotations

import numpy as np
import torch

from sim_pbd.kinematics import joint_frames
from sim_pbd.model import JOINT_TYPES

__all__ = ["TorchPBD"]


def _quat_matrix(q):
    """Rotation matrices (n, 3, 3) of unit quaternions (w, x, y, z), (n, 4)."""
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(-1, 3, 3)


def _turn(q, dphi):
    """normalize(q + ½ (0, Δφ) ⊗ q): q (n, 4) turned by world rotation vectors Δφ (n, 3)."""
    w, v = q[:, :1], q[:, 1:]
    turned = torch.cat([w - 0.5 * (dphi * v).sum(-1, keepdim=True),
                        v + 0.5 * (w * dphi + torch.linalg.cross(dphi, v))], dim=-1)
    return turned / turned.norm(dim=-1, keepdim=True)


def _skew(r):
    """[r]× (m, 3, 3) of vectors r (m, 3)."""
    zero = torch.zeros_like(r[:, 0])
    x, y, z = r.unbind(-1)
    return torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], dim=-1).reshape(-1, 3, 3)


def _mv(matrix, vector):
    return (matrix @ vector.unsqueeze(-1)).squeeze(-1)


class TorchPBD:
    """Differentiable XPBD of one robot in PyTorch (float64 by default).

    Args:
        model: the robot (a :class:`sim_pbd.PBDModel`) within the scope above.
        substeps, iterations: XPBD substeps per step and Jacobi passes per substep.

    ``step`` takes and returns tensors (link_x, link_q, link_v, link_w), shapes (n, 3),
    (n, 4), (n, 3), (n, 3), and a torque per joint (m,); gradients flow to them and to the
    :attr:`params` tensors (``link_mass``, ``link_inertia``, ``joint_parent_x``,
    ``joint_child_x``, ``joint_damping``) through autograd.
    """

    def __init__(self, model, *, substeps: int, iterations: int, dtype=torch.float64):
        revolute = JOINT_TYPES.index("revolute")
        unsupported = {
            "prismatic joints": bool(np.any(model.joint_type != revolute)),
            "a floating base": model.floating_base,
            "joint limits": bool(np.any(np.isfinite(model.joint_lower))
                                 or np.any(np.isfinite(model.joint_upper))),
            "joint friction": bool(np.any(model.joint_friction != 0)),
            "compliant joints": bool(np.any(model.joint_compliance != 0)),
        }
        if any(unsupported.values()):
            raise ValueError(f"TorchPBD does not model {[k for k, v in unsupported.items() if v]}")
        frames = joint_frames(model)
        self.substeps, self.iterations, self.dtype = int(substeps), int(iterations), dtype
        n, m = model.link_count, model.joint_count
        as_tensor = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=dtype)  # noqa: E731
        self.order = [int(j) for j in frames.order]
        self.child = torch.as_tensor(model.joint_child, dtype=torch.long)
        # the world is an extra last row: at rest, infinitely heavy
        self.parent = torch.as_tensor(np.where(model.joint_parent < 0, n, model.joint_parent),
                                      dtype=torch.long)
        self.parent_axis, self.child_axis = as_tensor(frames.parent_axis), as_tensor(
            frames.child_axis)
        self.gravity = as_tensor(model.gravity)
        touching = np.zeros(n + 1)
        for j in range(m):  # a positional and an angular constraint per joint
            touching[model.joint_child[j]] += 2
            touching[int(self.parent[j])] += 2
        touching[n] = 0
        self.scale = as_tensor([1.0 / max(touching[model.joint_child[j]],
                                          touching[int(self.parent[j])]) for j in range(m)])
        self.params = {name: as_tensor(getattr(model, name)) for name in
                       ("link_mass", "link_inertia", "joint_parent_x", "joint_child_x",
                        "joint_damping")}
        self.n = n

    def initial(self, state):
        """A :class:`sim_pbd.PBDState` as tensors (link_x, link_q, link_v, link_w)."""
        return tuple(torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=self.dtype)
                     for a in (state.link_x, state.link_q, state.link_v, state.link_w))

    def step(self, x, q, v, w, action, dt: float, params=None):
        """The state after ``dt`` [s] under joint torques ``action`` (m,) [N m]."""
        p = self.params if params is None else params
        h = float(dt) / self.substeps
        inertia = 0.5 * (p["link_inertia"] + p["link_inertia"].transpose(1, 2))
        inv_inertia = torch.linalg.inv(inertia)
        zero = torch.zeros(1, dtype=self.dtype)
        inv_mass = torch.cat([1.0 / p["link_mass"], zero])
        q = q / q.norm(dim=-1, keepdim=True)
        for _ in range(self.substeps):
            x, q, v, w = self._substep(x, q, v, w, action, p, h, inertia, inv_inertia, inv_mass)
        return x, q, v, w

    def _world(self, x, q, inv_inertia):
        """Positions, rotations and world inverse inertias with the world's row appended."""
        r = _quat_matrix(q)
        a = r @ inv_inertia @ r.transpose(1, 2)
        pad = lambda t, value: torch.cat([t, value.unsqueeze(0)])  # noqa: E731
        eye = torch.eye(3, dtype=self.dtype)
        return (pad(x, torch.zeros(3, dtype=self.dtype)), pad(r, eye),
                pad(a, torch.zeros(3, 3, dtype=self.dtype)))

    def _substep(self, x0, q0, v, w, action, p, h, inertia, inv_inertia, inv_mass):
        n, child, parent = self.n, self.child, self.parent
        xs, rs, a_world = self._world(x0, q0, inv_inertia)
        axis = _mv(rs[parent], self.parent_axis)  # world joint axes
        torque = torch.zeros(n + 1, 3, dtype=self.dtype)
        torque = torque.index_add(0, child, axis * action[:, None])
        torque = torque.index_add(0, parent, -axis * action[:, None])[:n]
        r = rs[:n]
        v = v + h * self.gravity
        w_body = _mv(r.transpose(1, 2), w)
        momentum = _mv(inertia, w_body)
        w_body = w_body + h * _mv(inv_inertia, _mv(r.transpose(1, 2), torque)
                                  - torch.linalg.cross(w_body, momentum))
        w = torch.cat([_mv(r, w_body), torch.zeros(1, 3, dtype=self.dtype)])
        # explicit damping capped at k w = 1.5, one joint after another in tree order
        # (velocity level), as sim_pbd's
        for j in self.order:
            c, pj = int(child[j]), int(parent[j])
            a_c, a_p = _mv(a_world[c], axis[j]), _mv(a_world[pj], axis[j])
            weight = axis[j] @ a_c + axis[j] @ a_p
            gain = torch.minimum(p["joint_damping"][j] * h, 1.5 / weight)
            impulse = -gain * (axis[j] @ (w[c] - w[pj]))
            w = w.index_add(0, torch.tensor([c, pj]), torch.stack([a_c, -a_p]) * impulse)
        w = w[:n]
        x, q = x0 + h * v, _turn(q0, h * w)
        for _ in range(self.iterations):
            x, q = self._jacobi_pass(x, q, p, inv_inertia, inv_mass)
        delta_w = (q[:, :1] * q0[:, :1] + (q[:, 1:] * q0[:, 1:]).sum(-1, keepdim=True))
        delta_v = (q0[:, :1] * q[:, 1:] - q[:, :1] * q0[:, 1:]
                   - torch.linalg.cross(q[:, 1:], q0[:, 1:]))  # vec(q ⊗ q0⁻¹)
        sign = torch.where(delta_w < 0, -1.0, 1.0)
        return x, q, (x - x0) / h, (2.0 / h) * sign * delta_v

    def _jacobi_pass(self, x, q, p, inv_inertia, inv_mass):
        """Every joint's positional and angular correction from the same poses, applied
        summed."""
        n, child, parent = self.n, self.child, self.parent
        xs, rs, a_world = self._world(x, q, inv_inertia)
        a_c, a_p = a_world[child], a_world[parent]
        m_c, m_p = inv_mass[child], inv_mass[parent]
        lever_c = _mv(rs[child], p["joint_child_x"])
        lever_p = _mv(rs[parent], p["joint_parent_x"])
        gap = xs[child] + lever_c - xs[parent] - lever_p
        s_c, s_p = _skew(lever_c), _skew(lever_p)
        eye = torch.eye(3, dtype=self.dtype)
        k_pos = ((m_c + m_p)[:, None, None] * eye + s_c.transpose(1, 2) @ a_c @ s_c
                 + s_p.transpose(1, 2) @ a_p @ s_p)
        impulse = -torch.linalg.solve(k_pos, gap)
        axis_p, axis_c = _mv(rs[parent], self.parent_axis), _mv(rs[child], self.child_axis)
        error = torch.linalg.cross(axis_p, axis_c)
        k_ang = a_c + a_p
        # the free direction (the hinge axis) filled so the block stays invertible
        outer = axis_p[:, :, None] * axis_p[:, None, :]
        project = eye - outer
        fill = (k_ang.diagonal(dim1=1, dim2=2).sum(-1) / 3.0)[:, None, None]
        turn = -torch.linalg.solve(project @ k_ang @ project + fill * outer,
                                   _mv(project, error))
        scale = self.scale[:, None]
        impulse, turn = scale * impulse, scale * turn
        tau_c = torch.linalg.cross(lever_c, impulse) + turn
        tau_p = torch.linalg.cross(lever_p, impulse) + turn
        dx = torch.zeros(n + 1, 3, dtype=self.dtype)
        dx = dx.index_add(0, child, m_c[:, None] * impulse)
        dx = dx.index_add(0, parent, -m_p[:, None] * impulse)
        dphi = torch.zeros(n + 1, 3, dtype=self.dtype)
        dphi = dphi.index_add(0, child, _mv(a_c, tau_c))
        dphi = dphi.index_add(0, parent, -_mv(a_p, tau_p))
        return x + dx[:n], _turn(q, dphi[:n])
