"""The vine's kinematics and one step's terms as CasADi expressions (for the estimation).

Mirrors the NumPy model exactly: :mod:`sim_vine.constraints` (joint rows, extensions),
:mod:`sim_vine.dynamics` (joint angles and rates, torques as generalized forces) and
:mod:`sim_vine.kinematics` (centreline, keypoints). Poses ``q`` and velocities ``v`` are
flat (3N,) CasADi vectors ordered body by body, ``(x, y, θ)`` each.
"""

from __future__ import annotations

from ..everted_mass import inertias_grow, masses_grow
from ..model import VineModel

__all__ = ["SymbolicVine"]


class SymbolicVine:
    """CasADi expressions of a vine model; ``ca`` is the imported ``casadi`` module."""

    def __init__(self, ca, model: VineModel):
        self.ca, self.model = ca, model
        self.n = model.body_count
        self.d = model.half_length

    def _frames(self, theta):
        ca = self.ca
        return ca.vertcat(ca.cos(theta), ca.sin(theta)), ca.vertcat(-ca.sin(theta), ca.cos(theta))

    def _xy(self, q, i):
        return self.ca.vertcat(q[3 * i], q[3 * i + 1])

    def joint_residual(self, q):
        """c(q) [m] in the simulator's row order: pins (2 each), then prismatic joints."""
        ca, m, d = self.ca, self.model, self.d
        rows = []
        parents, children = m.pins
        for a, b in zip(parents, children, strict=True):
            t_b, _ = self._frames(q[3 * b + 2])
            e_b = self._xy(q, b) - d * t_b
            if a >= 0:
                t_a, _ = self._frames(q[3 * a + 2])
                e_a = self._xy(q, a) + d * t_a
            else:
                e_a = ca.DM(m.base[:2])
            rows.append(e_a - e_b)
        for a, b in zip(*m.prismatics, strict=True):
            _, n_a = self._frames(q[3 * a + 2])
            _, n_b = self._frames(q[3 * b + 2])
            delta = self._xy(q, b) - self._xy(q, a)
            rows.append(ca.vertcat(ca.dot(n_a, delta), ca.dot(n_b, delta)))
        return ca.vertcat(*rows)

    def extensions(self, q):
        """Prismatic extensions beyond touching ends, ``t_a·(p_b − p_a) − 2d`` [m]."""
        ca = self.ca
        rows = []
        for a, b in zip(*self.model.prismatics, strict=True):
            t_a, _ = self._frames(q[3 * a + 2])
            rows.append(ca.dot(t_a, self._xy(q, b) - self._xy(q, a)) - 2 * self.d)
        return ca.vertcat(*rows) if rows else ca.SX(0, 1)

    def mass_diagonal(self, q, mass):
        """Diagonal of M at poses q, ``(m, m, m r²)`` per body (3N,), from the design masses
        ``mass`` (N,) [kg]: as the simulator's step, the masses and radii of gyration of
        :mod:`sim_vine.everted_mass` (grown with the everted material, prismatic pairs)."""
        ca, m, d = self.ca, self.model, self.d
        lengths = [2 * d] * self.n  # ℓ_i: 2d, and 2d + e_p for the distal body of pair p
        for b, extension in zip(m.prismatics[1], ca.vertsplit(self.extensions(q)),
                                strict=True):
            lengths[b] = 2 * d + extension
        grow, inertia = masses_grow(m), inertias_grow(m)
        out = []
        for i, ell in enumerate(lengths):
            mass_i = float(mass[i]) * ell / (2 * d) if grow else float(mass[i])
            r2 = ell * (ell / 3.0 - d) + d * d if inertia else m.gyration**2
            out += [mass_i, mass_i, mass_i * r2]
        return ca.vertcat(*out)

    def joint_angles(self, q):
        """Pin angles φ [rad], (n_pins,)."""
        ca, m = self.ca, self.model
        parents, children = m.pins
        return ca.vertcat(*[q[3 * b + 2] - (q[3 * a + 2] if a >= 0 else m.base[2])
                            for a, b in zip(parents, children, strict=True)])

    def joint_rates(self, v):
        """Pin rates φ̇ = Rᵀ v [rad/s], (n_pins,)."""
        ca, m = self.ca, self.model
        parents, children = m.pins
        return ca.vertcat(*[v[3 * b + 2] - (v[3 * a + 2] if a >= 0 else 0.0)
                            for a, b in zip(parents, children, strict=True)])

    def spread(self, torque):
        """``R τ``: pin torques [N m] as a generalized force vector, (3N,)."""
        ca, m = self.ca, self.model
        parents, children = m.pins
        out = [ca.SX(0) for _ in range(3 * self.n)]
        for j, (a, b) in enumerate(zip(parents, children, strict=True)):
            out[3 * b + 2] = out[3 * b + 2] + torque[j]
            if a >= 0:
                out[3 * a + 2] = out[3 * a + 2] - torque[j]
        return ca.vertcat(*out)

    def centerline(self, q):
        """Base, pins and tip [m] as a list of 2-vectors (the kinematics' order)."""
        n, d = self.n, self.d
        bodies = [0] + list(range(1, n - 1, 2)) + [n - 1]
        offsets = [-d] + [d] * (len(bodies) - 1)
        out = []
        for body, offset in zip(bodies, offsets, strict=True):
            t, _ = self._frames(q[3 * body + 2])
            out.append(self._xy(q, body) + offset * t)
        return out

    def keypoints(self, q, count: int):
        """``count`` points evenly spaced by arc length [m], flattened (2 count,)."""
        ca = self.ca
        vertices = self.centerline(q)
        lengths = [ca.norm_2(vertices[i + 1] - vertices[i]) for i in range(len(vertices) - 1)]
        starts = [ca.SX(0)]
        for length in lengths[:-1]:
            starts.append(starts[-1] + length)
        total = starts[-1] + lengths[-1]
        points = []
        last = len(lengths) - 1
        for j in range(count):
            s = total * (j / (count - 1))
            point = ca.SX.zeros(2)
            for i, length in enumerate(lengths):
                # keypoint j lies on segment i when starts[i] <= s < starts[i] + length
                after_start = 1 if i == 0 else (s >= starts[i])
                before_end = 1 if i == last else (s < starts[i] + length)
                along = vertices[i] + (s - starts[i]) / length * (vertices[i + 1] - vertices[i])
                point = point + after_start * before_end * along
            points.append(point)
        return ca.vertcat(*points)

    def contact_point(self, q, body: int, offset: float):
        """(position [m], body normal) of the point ``offset`` [m] along ``body``'s axis."""
        t, n = self._frames(q[3 * body + 2])
        return self._xy(q, body) + offset * t, n
