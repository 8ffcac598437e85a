"""The Finger Reach episode's loss and gradient through MuJoCo XLA (MJX, JAX): the gradient
peer of ``benchmarks/rigid_step.py`` (issue 15: "the gradient through MJX (JAX) where it
installs").

The MJCF is the benchmark's (``rigid_step.mjcf``: the same links, joint frames, inertias and
damping as sim_rigid's model, one motor per joint, contact off). The episode is the
example's: torque rows held for ``substeps`` steps each, the loss ``a_w Σ‖u_c‖² + r_w Σ_{c≥1}
‖p_c − p̂_c‖`` with p_c the fingertip site at control step c. Reverse-mode differentiation
through ``jax.lax.scan`` of ``mjx.step`` gives the gradient with respect to the controls
and to the model's masses, inertias, body positions (the joint origins) and joint damping in
one backward pass, in float64 (``jax_enable_x64``).

MJX has no ``implicit`` integrator with damping in its derivatives as MuJoCo's C code has;
the MJCF's integrator is replaced by ``implicitfast`` where MJX supports it, else Euler
(which it says in :attr:`MjxReach.integrator`).
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402 - after float64 is enabled
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import mjx  # noqa: E402

__all__ = ["MjxReach"]

PARAMETERS = ("body_mass", "body_inertia", "body_pos", "dof_damping")
"""The mjx.Model fields differentiated besides the controls."""


class MjxReach:
    """The reach episode in MJX: :meth:`loss` and :meth:`loss_and_grad`, both compiled.

    Args:
        xml: the MJCF (a ``tip`` site on the fingertip link).
        rest: the joint angles at the start [rad], shape (n_q,).
        targets: the target point at every control step [m], shape (steps + 1, 3).
        substeps: simulation steps per control row.
        weights: ``(action weight, reach weight)``.
    """

    def __init__(self, xml: str, *, rest, targets, substeps: int, weights: tuple):
        model = mujoco.MjModel.from_xml_string(xml)
        self.integrator = self._choose_integrator(model)
        self.model = mjx.put_model(model)
        data = mujoco.MjData(model)
        data.qpos[:] = rest
        mujoco.mj_forward(model, data)
        self.data = mjx.put_data(model, data)
        self.site = model.site("tip").id
        self.targets = jnp.asarray(targets)
        self.substeps = int(substeps)
        self.action_weight, self.reach_weight = (float(w) for w in weights)
        self.loss = jax.jit(self._loss)
        self.loss_and_grad = jax.jit(jax.value_and_grad(self._loss, argnums=(0, 1)))

    @staticmethod
    def _choose_integrator(model) -> str:
        for name in ("IMPLICITFAST", "EULER"):
            model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{name}")
            try:
                mjx.put_model(model)
            except NotImplementedError:
                continue
            return name.lower()
        raise RuntimeError("MJX supports neither implicitfast nor Euler here")

    def parameters(self) -> dict:
        """The differentiated model fields, name -> array."""
        return {name: getattr(self.model, name) for name in PARAMETERS}

    def _loss(self, table, parameters):
        model = self.model.replace(**parameters)

        def distance(data, control_step):
            data = mjx.kinematics(model, data)
            return jnp.linalg.norm(data.site_xpos[self.site] - self.targets[control_step])

        def control_step(carry, inputs):
            data, loss = carry
            row, c = inputs
            loss = loss + self.action_weight * jnp.dot(row, row)
            loss = loss + jnp.where(c > 0, self.reach_weight * distance(data, c), 0.0)
            data = data.replace(ctrl=row)
            data = jax.lax.fori_loop(0, self.substeps, lambda _, d: mjx.step(model, d), data)
            return (data, loss), None

        steps = table.shape[0]
        (data, loss), _ = jax.lax.scan(control_step, (self.data, jnp.zeros(())),
                                       (table, jnp.arange(steps)))
        return loss + self.reach_weight * distance(data, steps)

    def value_and_grad(self, table) -> tuple[float, np.ndarray, dict]:
        """(loss, ∂loss/∂table (steps, n_u), ∂loss/∂parameters) as NumPy, after the
        computation has finished (for timing)."""
        loss, (g_table, g_parameters) = self.loss_and_grad(jnp.asarray(table),
                                                           self.parameters())
        jax.block_until_ready(g_table)
        return (float(loss), np.asarray(g_table),
                {name: np.asarray(value) for name, value in g_parameters.items()})
