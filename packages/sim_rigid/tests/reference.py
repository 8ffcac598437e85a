"""The reference for the accuracy tests: a :class:`~sim_rigid.model.RigidModel` rebuilt in
Pinocchio (joint by joint, same placements, axes and inertias) and integrated by fine RK4.

Import only where Pinocchio is installed (a dev dependency of the workspace, not of
sim_rigid).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from codesign.testing import rk4_step
from sim_rigid.model import JOINT_TYPES


def pinocchio_model(model, params=None) -> pin.Model:
    """``model`` in Pinocchio: revolute and prismatic joints with their (unaligned) axes, a
    free joint as Pinocchio's composite of PX, PY, PZ, RZ, RY, RX (our coordinates), a fixed
    joint's link appended to its parent's joint with its placement. ``params`` replaces the
    model's masses, inertias and joint origins."""
    params = model.parameters() if params is None else params
    out = pin.Model()
    out.gravity.linear = np.asarray(model.gravity, dtype=np.float64)
    # each link's Pinocchio joint and the link frame's placement in that joint's frame
    frame = {-1: (0, pin.SE3.Identity())}
    for i, kind in enumerate(model.joint_type):
        parent_joint, parent_placement = frame[int(model.joint_parent[i])]
        placement = parent_placement * pin.SE3(model.joint_rotation[i],
                                               params["joint_origin"][i])
        inertia = pin.Inertia(float(params["link_mass"][i]), model.link_com[i],
                              params["link_inertia"][i])
        name = JOINT_TYPES[kind]
        if name == "fixed":
            out.appendBodyToJoint(parent_joint, inertia, placement)
            frame[i] = (parent_joint, placement)
            continue
        if name == "revolute":
            joint = pin.JointModelRevoluteUnaligned(model.joint_axis[i])
        elif name == "prismatic":
            joint = pin.JointModelPrismaticUnaligned(model.joint_axis[i])
        else:
            joint = pin.JointModelComposite()
            for part in (pin.JointModelPX(), pin.JointModelPY(), pin.JointModelPZ(),
                         pin.JointModelRZ(), pin.JointModelRY(), pin.JointModelRX()):
                joint.addJoint(part)
        index = out.addJoint(parent_joint, joint, placement, model.joint_names[i])
        out.appendBodyToJoint(index, inertia, pin.SE3.Identity())
        frame[i] = (index, pin.SE3.Identity())
    return out


def release(reference: pin.Model, joint_q, joint_qd, *, damping, duration: float,
            sample: float, dt: float = 1e-4) -> np.ndarray:
    """Coordinates every ``sample`` [s] of ``reference`` started at ``joint_q``,
    ``joint_qd`` and left to gravity and the damping torque ``-damping q̇`` for
    ``duration`` [s]: (K + 1, nq), row 0 the start. Classical RK4 with step ``dt``."""
    data = reference.createData()
    every = int(round(sample / dt))
    samples = int(round(duration / sample))
    q, v = np.array(joint_q, dtype=np.float64), np.array(joint_qd, dtype=np.float64)
    damping = np.broadcast_to(np.asarray(damping, dtype=np.float64), v.shape)

    def acceleration(q, v):
        return pin.aba(reference, data, q, v, -damping * v)

    rows = [q.copy()]
    for _ in range(samples):
        for _ in range(every):
            q, v = rk4_step(q, v, acceleration, dt)
        rows.append(q.copy())
    return np.array(rows)
