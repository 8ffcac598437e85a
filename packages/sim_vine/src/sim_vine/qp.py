"""The per-step velocity QP, solved with OSQP set up once and updated every step.

    min_v  ½ vᵀ P v − bᵀ v   s.t.  A_eq v = r_eq (joints, growth),  A_c v ≥ l_c (contacts)

The sparsity of P and A never changes, so :class:`VineQP` builds OSQP once and every step
only ``update()``s the values, warm-started from the previous velocity and multipliers.
OSQP polishes its answer: it solves the KKT system of the rows it found active, with
iterative refinement, which makes the solution exact to round-off; the polished solution is
accepted after checking that inactive contact rows hold and active ones push. When polishing
fails, an exact active-set refinement of our own takes over: the equilibrated KKT system of
the active rows is solved by a sparse LU (a tiny dual regularization removed by iterative
refinement), and rows whose multiplier has the wrong sign or that are violated are swapped
until the QP's optimality conditions hold to round-off. Either way the solution depends
only on the active set, which makes steps reproducible and lets :mod:`sim_vine.step`
differentiate through the same KKT system.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import osqp
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from codesign import SimulationError

from .constraints import RowLayout, rows_times
from .model import VineModel

__all__ = ["SolverSettings", "QPProblem", "QPSolution", "VineQP", "QPError"]

_INFINITY = 1e30


class QPError(SimulationError):
    """OSQP failed on a step's QP; the message says how."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SolverSettings:
    """OSQP options and the exact refinement's options.

    Attributes:
        eps_abs, eps_rel: OSQP's absolute and relative tolerances.
        max_iter: OSQP's iteration limit per step.
        rho: OSQP's initial ADMM step size.
        refine: solve the active set's KKT system exactly after OSQP (needed for gradients
            accurate to 1e-6 and for bit-reproducible steps).
        refine_iterations: most active-set changes the refinement may make.
        feasibility_tolerance: largest constraint violation [m/s] the refinement accepts.
    """

    eps_abs: float = 1e-5
    eps_rel: float = 1e-5
    max_iter: int = 10000
    rho: float = 0.1
    refine: bool = True
    refine_iterations: int = 20
    feasibility_tolerance: float = 1e-9

    def __post_init__(self):
        for name in ("eps_abs", "eps_rel", "rho", "feasibility_tolerance"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"solver setting {name} must be a positive number, got {value!r}")
        if int(self.max_iter) < 1:
            raise ValueError(f"solver setting max_iter must be ≥ 1, got {self.max_iter!r}")


@dataclasses.dataclass(frozen=True)
class QPProblem:
    """The numbers of one step's QP.

    Attributes:
        mass_diagonal: diagonal of P's mass part, shape (N, 3).
        spring_weights: per-pin weights w of ``R diag(w) Rᵀ`` in P, shape (n_pins,).
        rhs: the linear term b (``M v_k + Δt F``), shape (N, 3).
        row_values: constraint Jacobian values in the two-body layout, shape (m, 6).
        lower, upper: row bounds, shape (m,); contacts have ``upper = +inf``.
        friction: the friction coefficient μ of the contact rows (at μ = 0 each pair's two
            cone edges coincide and only the one that would bind for μ > 0, the edge
            opposing the sliding, stays in the active set: gradients in μ are right-sided).
        tangent_rows: rows of each contact pair's tangential velocity, shape (p, 6).
    """

    mass_diagonal: np.ndarray
    spring_weights: np.ndarray
    rhs: np.ndarray
    row_values: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    friction: float
    tangent_rows: np.ndarray


@dataclasses.dataclass(frozen=True)
class QPSolution:
    """A solved step QP.

    Attributes:
        v: optimal body velocities, shape (N, 3).
        y: row multipliers (impulses), shape (m,), OSQP's sign (≤ 0 on active contacts).
        active: rows held with equality, shape (m,) bool.
        exact: True when the active-set refinement converged (KKT satisfied to round-off).
        iterations: OSQP iterations.
        status: OSQP's status text.
    """

    v: np.ndarray
    y: np.ndarray
    active: np.ndarray
    exact: bool
    iterations: int
    status: str


class VineQP:
    """One OSQP instance for a model's step QP, with the fixed sparsity pattern."""

    def __init__(self, model: VineModel, layout: RowLayout, settings: SolverSettings):
        self.model, self.layout, self.settings = model, layout, settings
        n = 3 * model.body_count
        parent, child = model.pins
        self._real_pins = np.flatnonzero(parent >= 0)
        off_rows = 3 * parent[self._real_pins] + 2
        off_cols = 3 * child[self._real_pins] + 2
        p_rows = np.concatenate([np.arange(n), off_rows])
        p_cols = np.concatenate([np.arange(n), off_cols])
        P = sp.csc_matrix((np.arange(1, len(p_rows) + 1, dtype=np.float64), (p_rows, p_cols)),
                          shape=(n, n))
        P.sort_indices()
        self._p_order = P.data.astype(np.int64) - 1
        self._p_template = P
        self._p_rows = P.indices.copy()
        self._p_cols = np.repeat(np.arange(n), np.diff(P.indptr))
        rows, cols, slots = [], [], []
        bodies = layout.row_bodies
        for side in range(2):
            on = np.flatnonzero(bodies[:, side] >= 0)
            for k in range(3):
                rows.append(on)
                cols.append(3 * bodies[on, side] + k)
                slots.append(6 * on + 3 * side + k)
        rows, cols, slots = map(np.concatenate, (rows, cols, slots))
        A = sp.csc_matrix((np.arange(1, len(rows) + 1, dtype=np.float64), (rows, cols)),
                          shape=(layout.size, n))
        A.sort_indices()
        self._a_slots = slots[A.data.astype(np.int64) - 1]
        self._a_template = A
        self._a_rows = A.indices.copy()
        self._a_cols = np.repeat(np.arange(n), np.diff(A.indptr))
        self._solver = osqp.OSQP()
        placeholder_P = P.copy()
        placeholder_P.data[:] = 1.0
        placeholder_P.data[self._p_order >= n] = 0.1
        placeholder_A = A.copy()
        placeholder_A.data[:] = 1.0
        m = layout.size
        self._solver.setup(placeholder_P, np.zeros(n), placeholder_A, -np.ones(m), np.ones(m),
                           eps_abs=settings.eps_abs, eps_rel=settings.eps_rel,
                           max_iter=int(settings.max_iter), rho=settings.rho, polishing=True,
                           polish_refine_iter=10,
                           verbose=False, warm_starting=True, adaptive_rho_interval=25,
                           check_termination=10, scaling=0)
        self._last_y = np.zeros(m)

    # -- assembly ---------------------------------------------------------------------

    def p_values(self, mass_diagonal, spring_weights) -> np.ndarray:
        """P's CSC data for the pattern: mass diagonal plus ``R diag(w) Rᵀ`` (upper part)."""
        model = self.model
        diag = np.array(mass_diagonal, dtype=np.float64).reshape(-1)
        parent, child = model.pins
        np.add.at(diag, 3 * child + 2, spring_weights)
        real = self._real_pins
        np.add.at(diag, 3 * parent[real] + 2, spring_weights[real])
        entries = np.concatenate([diag, -np.asarray(spring_weights)[real]])
        return entries[self._p_order]

    def p_matrix(self, mass_diagonal, spring_weights) -> sp.csc_matrix:
        """The full symmetric P as a sparse matrix."""
        upper = self._p_template.copy()
        upper.data = self.p_values(mass_diagonal, spring_weights)
        return (upper + sp.triu(upper, 1).T).tocsc()

    def a_matrix(self, row_values) -> sp.csc_matrix:
        """The constraint matrix A (m, 3N) from two-body row values (m, 6)."""
        A = self._a_template.copy()
        A.data = np.asarray(row_values).reshape(-1)[self._a_slots]
        return A

    # -- solving ----------------------------------------------------------------------

    def solve(self, problem: QPProblem, warm_v) -> QPSolution:
        """Solve one step's QP; raise :class:`QPError` when OSQP or the refinement fails."""
        # Our own fixed scaling instead of OSQP's data-dependent equilibration: velocities
        # by √M (so P has a unit diagonal), rows by their norm. Each row's scale depends
        # on that row alone, so inactive rows cannot perturb the polished solution.
        col_scale = 1.0 / np.sqrt(problem.mass_diagonal.reshape(-1))
        Px = self.p_values(problem.mass_diagonal, problem.spring_weights)
        Px_scaled = Px * col_scale[self._p_rows] * col_scale[self._p_cols]
        A = self.a_matrix(problem.row_values)
        Ax_scaled = A.data * col_scale[self._a_cols]
        row_norm = np.sqrt(np.bincount(self._a_rows, weights=Ax_scaled**2,
                                       minlength=self.layout.size))
        row_scale = 1.0 / np.maximum(row_norm, 1e-300)
        Ax_scaled *= row_scale[self._a_rows]
        b = problem.rhs.reshape(-1)
        upper = np.minimum(problem.upper * row_scale, _INFINITY)
        self._solver.update(q=-b * col_scale, l=problem.lower * row_scale, u=upper,
                            Px=Px_scaled, Ax=Ax_scaled)
        self._solver.warm_start(x=np.asarray(warm_v, dtype=np.float64).reshape(-1) / col_scale,
                                y=self._last_y)
        result = self._solver.solve(raise_error=False)
        status = result.info.status
        status_val = result.info.status_val
        if status_val not in (1, 2, 7):
            raise QPError(f"OSQP reports '{status}' (for example, a growth rate or joint "
                          "constraint that contact makes impossible to meet)")
        x = np.array(result.x) * col_scale
        self._last_y = np.array(result.y)
        y = self._last_y * row_scale
        if not np.all(np.isfinite(x)):
            raise QPError(f"OSQP returned a non-finite velocity (status '{status}')")
        iterations = int(result.info.iter)
        if result.info.status_polish == 1:
            polished = self._accept_polished(problem, A, x, y, iterations)
            if polished is not None:
                return polished
        equality = np.zeros(self.layout.size, dtype=bool)
        equality[: self.layout.equality_count] = True
        active = equality | (A @ x - problem.lower < -y)
        if self.settings.refine:
            refined = self.refine(problem, A, active)
            if refined is not None:
                return refined
        if status_val != 1:
            raise QPError(f"OSQP stopped with '{status}' after {iterations} iterations "
                          "and the active-set refinement did not converge; raise "
                          "solver max_iter or loosen eps_abs/eps_rel")
        return QPSolution(v=x.reshape(-1, 3), y=y, active=active, exact=False,
                          iterations=iterations, status=status)

    def _accept_polished(self, problem: QPProblem, A, x, y, iterations) -> QPSolution | None:
        """OSQP's polished solution with its active set, if it passes the optimality checks.

        Polishing solves the KKT system of the rows OSQP found active (with iterative
        refinement), so on success it is exact to round-off; the checks are those of
        :meth:`refine`: inactive contact rows satisfied, active ones pushing, not pulling.
        """
        contact = self.layout.contact
        y = y.copy()
        if problem.friction == 0.0:  # coinciding cone edges: one row carries the impulse
            total = y[contact.start::2] + y[contact.start + 1::2]
            edge = self._binding_edge(problem, x)
            y[contact.start::2] = np.where(edge == 0, total, 0.0)
            y[contact.start + 1::2] = np.where(edge == 1, total, 0.0)
        active = np.zeros(self.layout.size, dtype=bool)
        active[: self.layout.equality_count] = True
        active[contact] = y[contact] < 0.0
        slack = (A @ x - problem.lower)[contact]
        tol = self.settings.feasibility_tolerance * np.maximum(1.0, np.abs(problem.lower[contact]))
        if np.any((slack < -tol) & ~active[contact]) or np.any(y[contact] > 0.0):
            return None
        return QPSolution(v=x.reshape(-1, 3), y=y, active=active, exact=True,
                          iterations=iterations, status="polished")

    def kkt_matrix(self, problem: QPProblem, A, active) -> tuple[sp.csc_matrix, np.ndarray]:
        """Equilibrated KKT matrix ``S K S`` of the active rows, and the scaling S.

        ``K = [[P, Aₐᵀ], [Aₐ, 0]]``; S scales velocities by ``1/√P_ii`` and rows by
        ``1/√(Aₐ diag(P)⁻¹ Aₐᵀ)_ii`` so that both blocks have unit-size diagonals (the
        bodies' inertias span many orders of magnitude).
        """
        P = self.p_matrix(problem.mass_diagonal, problem.spring_weights)
        A_act = A[np.flatnonzero(active)]
        inverse_diag = 1.0 / P.diagonal()
        schur_diag = np.asarray(A_act.multiply(A_act) @ inverse_diag).reshape(-1)
        scale = np.concatenate([np.sqrt(inverse_diag), 1.0 / np.sqrt(np.maximum(schur_diag,
                                                                               1e-300))])
        K = sp.bmat([[P, A_act.T], [A_act, None]], format="csc")
        S = sp.diags(scale)
        return (S @ K @ S).tocsc(), scale

    def kkt_solver(self, problem: QPProblem, A, active):
        """A function solving the exact active-set KKT system ``K x = rhs``.

        The equilibrated matrix with a 1e-11 dual regularization (which keeps it
        factorizable when contact rows are redundant) is factorized once; iterative
        refinement against the unregularized matrix removes the regularization's error.
        """
        K, scale = self.kkt_matrix(problem, A, active)
        n = 3 * self.model.body_count
        regularization = np.zeros(K.shape[0])
        regularization[n:] = 1e-11
        lu = spla.splu((K - sp.diags(regularization)).tocsc())

        def solve(rhs):
            scaled_rhs = scale * rhs
            x = lu.solve(scaled_rhs)
            for _ in range(4):
                x = x + lu.solve(scaled_rhs - K @ x)
            return scale * x

        return solve

    def refine(self, problem: QPProblem, A, active) -> QPSolution | None:
        """Exact solution by active-set iteration from OSQP's guess, or None on failure."""
        n = 3 * self.model.body_count
        b = problem.rhs.reshape(-1)
        lower, upper = problem.lower, problem.upper
        contact = np.zeros(self.layout.size, dtype=bool)
        contact[self.layout.contact] = True
        active = active.copy()
        duplicate = self._duplicate_rows(problem, A, active)
        active &= ~duplicate
        tol = self.settings.feasibility_tolerance
        for _ in range(self.settings.refine_iterations):
            rows = np.flatnonzero(active)
            solve = self.kkt_solver(problem, A, active)
            target = np.where(np.isfinite(upper[rows]) & ~contact[rows], upper[rows], lower[rows])
            x = solve(np.concatenate([b, target]))
            v, y_act = x[:n], x[n:]
            if not np.all(np.isfinite(x)):
                return None
            y = np.zeros(self.layout.size)
            y[rows] = y_act
            slack = A @ v - lower
            scale = np.maximum(1.0, np.abs(lower))
            violated = contact & ~active & ~duplicate & (slack < -tol * scale)
            wrong_sign = contact & active & (y > 0)
            if not violated.any() and not wrong_sign.any():
                return QPSolution(v=v.reshape(-1, 3), y=y, active=active, exact=True,
                                  iterations=0, status="refined")
            if wrong_sign.any():
                active = active.copy()
                active[np.flatnonzero(wrong_sign)[np.argmax(y[wrong_sign])]] = False
            if violated.any():
                active = active | violated
        return None

    def _binding_edge(self, problem: QPProblem, v) -> np.ndarray:
        """Per contact pair, the cone edge (0: N + μT, 1: N − μT) opposing the sliding."""
        pairs = problem.tangent_rows
        bodies = np.stack([np.full(len(pairs), -1),
                           self.layout.row_bodies[self.layout.contact][::2, 1]], axis=1)
        sliding = rows_times(bodies, pairs, np.asarray(v).reshape(-1, 3))
        return (sliding > 0).astype(np.int64)

    def _duplicate_rows(self, problem: QPProblem, A, active) -> np.ndarray:
        """At μ = 0, each pair's non-binding cone edge, which is left out of the active set."""
        duplicate = np.zeros(self.layout.size, dtype=bool)
        if problem.friction != 0.0:
            return duplicate
        contact = self.layout.contact
        pairs = np.arange(contact.start, contact.stop, 2)
        both = active[pairs] | active[pairs + 1]
        guess = self._guess_velocity(problem, A, active)
        edge = self._binding_edge(problem, guess)
        duplicate[pairs + 1 - edge] = True
        active[pairs + edge] |= both
        return duplicate

    def _guess_velocity(self, problem: QPProblem, A, active) -> np.ndarray:
        """The velocity of the KKT system with one edge per pair, to tell the sliding side."""
        contact = self.layout.contact
        trial = active.copy()
        trial[contact.start + 1::2] = False
        trial[contact.start::2] |= active[contact.start + 1::2]
        rows = np.flatnonzero(trial)
        solve = self.kkt_solver(problem, A, trial)
        target = np.where(np.isfinite(problem.upper[rows]), problem.upper[rows],
                          problem.lower[rows])
        return solve(np.concatenate([problem.rhs.reshape(-1), target]))[: 3 * self.model.body_count]

    def residual(self, problem: QPProblem, v) -> np.ndarray:
        """Row values ``A v`` for a velocity (N, 3), for checking feasibility."""
        return rows_times(self.layout.row_bodies, problem.row_values, np.asarray(v))
