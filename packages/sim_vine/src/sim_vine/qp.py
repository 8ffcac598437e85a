"""The per-step velocity QP, solved with OSQP set up once and updated every step.

    min_v  ½ vᵀ P v − bᵀ v   s.t.  A_eq v = r_eq (joints, growth),  A_c v ≥ l_c (contacts)

The sparsity of P and A never changes, so :class:`VineQP` builds OSQP once and every step
only ``update()``s the values, warm-started from the step's input velocity (nothing from
earlier solves carries over: a solve is a pure function of its problem and that velocity).
OSQP's iterate tells which contact rows are active; the KKT system of that active set is
then solved exactly by a banded LU (:mod:`sim_vine.kkt`, linear in N, in place of OSQP's
polishing, which refactorizes a fresh reduced system every step) and accepted after checking
that inactive contact rows hold and active ones push. When the check fails, an active-set
refinement (equilibrated sparse LU with iterative refinement) swaps rows whose multiplier
has the wrong sign or that are violated until the QP's optimality conditions hold to
round-off. Either way the solution depends only on the active set, which makes steps
reproducible and lets :mod:`sim_vine.step` differentiate through the same KKT system. With
``contact_smoothing`` κ > 0 the step is instead the relaxed-complementarity solution of
:func:`sim_vine.kkt.smoothed_at` (every contact row with ``slack × impulse = κ``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import osqp
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from codesign import SimulationError

from ._kernels import guess_active, osqp_data, rows_times_fast
from .constraints import RowLayout, rows_times
from .kkt import BandedKKT, exact_at, smoothed_at
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
        refine: solve the active set's KKT system exactly after OSQP, and search the active
            set when OSQP's guess fails (needed for gradients accurate to 1e-6, for
            bit-reproducible steps and for accuracy at loose eps); ``False`` returns
            OSQP's iterate as it is.
        refine_iterations: most active-set changes the refinement may make.
        feasibility_tolerance: largest constraint violation [m/s] the refinement accepts.
        reuse_active_set: first try the active set the step's own inputs suggest (one
            banded KKT solve and the optimality check) and call OSQP only when it is not
            optimal; the accepted solution is the same exact KKT solution either way (with
            ``refine``).
        guess_tolerance: a contact row is guessed active when the input velocity meets it
            within this slack [m/s] (the rows that held the previous step, whose slack
            is left only by the step's change of geometry and velocity).
        contact_smoothing: κ [J]; 0 gives the hard contact QP; κ > 0 relaxes every contact
            row's complementarity to ``impulse × separation rate = κ`` (solved by
            :func:`sim_vine.kkt.smoothed_at`), so that a step is a smooth function of its
            inputs and gradients hold across contact events.
        smoothing_iterations: most interior-point iterations of a smoothed step.
    """

    eps_abs: float = 1e-4
    eps_rel: float = 1e-4
    max_iter: int = 10000
    rho: float = 0.1
    refine: bool = True
    refine_iterations: int = 50
    feasibility_tolerance: float = 1e-9
    reuse_active_set: bool = True
    guess_tolerance: float = 5e-3
    contact_smoothing: float = 0.0
    smoothing_iterations: int = 200

    def __post_init__(self):
        for name in ("eps_abs", "eps_rel", "rho", "feasibility_tolerance", "guess_tolerance"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"solver setting {name} must be a positive number, got {value!r}")
        if not (np.isfinite(self.contact_smoothing) and self.contact_smoothing >= 0):
            raise ValueError("solver setting contact_smoothing must be a number ≥ 0 [J], got "
                             f"{self.contact_smoothing!r}")
        if int(self.max_iter) < 1:
            raise ValueError(f"solver setting max_iter must be ≥ 1, got {self.max_iter!r}")


@dataclasses.dataclass(frozen=True)
class QPProblem:
    """The numbers of one step's QP.

    Attributes:
        mass_diagonal: diagonal of P's mass part, ``M (1 + Δt c_g)`` with ground friction
            c_g (``M`` without), shape (N, 3).
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
        iterations: OSQP (or interior-point) iterations.
        status: OSQP's status text.
        dual: the KKT matrix's diagonal on the rows, scaled as in
            :meth:`VineQP.scaled_data` (``−s/u`` on smoothed contact rows), or None for the
            hard QP (zero).
    """

    v: np.ndarray
    y: np.ndarray
    active: np.ndarray
    exact: bool
    iterations: int
    status: str
    dual: np.ndarray | None = None


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
                           max_iter=int(settings.max_iter), rho=settings.rho, polishing=False,
                           verbose=False, warm_starting=True, adaptive_rho_interval=25,
                           check_termination=2, scaling=0)
        self.reused = 0  # solves answered by the guessed active set (no OSQP call)
        self._pair_bodies = np.stack([np.full(layout.pair_count, -1),
                                      layout.row_bodies[layout.contact][::2, 1]], axis=1)
        self._banded = BandedKKT(layout.row_bodies, self._p_rows, self._p_cols, self._a_rows,
                                 self._a_cols)

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

    def scaled_data(self, problem: QPProblem):
        """OSQP's data ``(Px, Ax, q, l, u)`` scaled, and the column and row scales.

        Our own fixed scaling instead of OSQP's data-dependent equilibration: velocities by
        √M (so P has a unit diagonal), rows by their norm. Each row's scale depends on that
        row alone, so inactive rows cannot perturb the exact solution. Compiled; see
        :meth:`scaled_data_reference` for the same in NumPy.
        """
        parent, child = self.model.pins
        return osqp_data(problem.mass_diagonal, problem.spring_weights, problem.rhs,
                         problem.row_values, problem.lower, problem.upper, parent, child,
                         self._p_order, self._p_rows, self._p_cols, self._a_slots,
                         self._a_rows, self._a_cols, self.layout.size)

    def scaled_data_reference(self, problem: QPProblem):
        """NumPy reference of :meth:`scaled_data`."""
        col_scale = 1.0 / np.sqrt(problem.mass_diagonal.reshape(-1))
        Px = self.p_values(problem.mass_diagonal, problem.spring_weights)
        Px_scaled = Px * col_scale[self._p_rows] * col_scale[self._p_cols]
        Ax_scaled = self.a_matrix(problem.row_values).data * col_scale[self._a_cols]
        row_norm = np.sqrt(np.bincount(self._a_rows, weights=Ax_scaled**2,
                                       minlength=self.layout.size))
        row_scale = 1.0 / np.maximum(row_norm, 1e-300)
        Ax_scaled *= row_scale[self._a_rows]
        q = -problem.rhs.reshape(-1) * col_scale
        upper = np.minimum(problem.upper * row_scale, _INFINITY)
        lower = np.maximum(problem.lower * row_scale, -_INFINITY)
        return Px_scaled, Ax_scaled, q, lower, upper, col_scale, row_scale

    # -- solving ----------------------------------------------------------------------

    def solve(self, problem: QPProblem, warm_v) -> QPSolution:
        """Solve one step's QP; raise :class:`QPError` when OSQP or the refinement fails.

        A pure function of ``problem`` and ``warm_v`` (the step's input velocity): nothing
        carries over from earlier solves (no active set, no multipliers, OSQP's step size
        reset), so a step gives the same bits whatever ran before it, as reverse sweeps
        that recompute states from checkpoints need. Where several active sets fit (a tip
        stuck in a corner) an earlier solve's set would otherwise pick the result.
        """
        Px, Ax, q, lower, upper, col_scale, row_scale = self.scaled_data(problem)
        warm_v = np.asarray(warm_v, dtype=np.float64).reshape(-1, 3)
        if self.settings.contact_smoothing > 0:
            return self._smoothed(Px, Ax, q, lower, col_scale, row_scale, warm_v)
        if self.settings.refine and self.settings.reuse_active_set:
            # Active sets change rarely between steps: when the rows that the input velocity
            # meets are still the optimal set, their exact KKT solution is the QP's unique
            # optimum and OSQP is not needed.
            reused = self._guessed_active_set(problem, Px, Ax, q, lower, col_scale,
                                              row_scale, warm_v)
            if reused is not None:
                return reused
        # The extension object's methods directly: the Python wrapper's update() and
        # solve() copy the data for its derivative cache and rebuild an info namespace on
        # every call, which costs more than the solve itself at this size.
        solver = self._solver._solver
        solver.update_data_vec(q=q, l=lower, u=upper)
        solver.update_data_mat(P_x=Px, P_i=None, A_x=Ax, A_i=None)
        solver.update_rho(self.settings.rho)  # adaptive rho would carry over otherwise
        solver.warm_start(warm_v.reshape(-1) / col_scale, np.zeros(self.layout.size))
        solver.solve()
        info = solver.info
        status, status_val = info.status, info.status_val
        if status_val not in (1, 2, 7):
            raise QPError(f"OSQP reports '{status}' (for example, a growth rate or joint "
                          "constraint that contact makes impossible to meet)")
        x = np.array(solver.solution.x) * col_scale
        scaled_y_osqp = np.array(solver.solution.y)
        y = scaled_y_osqp * row_scale
        if not math.isfinite(float(np.sum(x))):
            raise QPError(f"OSQP returned a non-finite velocity (status '{status}')")
        iterations = int(info.iter)
        active = guess_active(self.layout.row_bodies, problem.row_values, x.reshape(-1, 3),
                              problem.lower, row_scale, scaled_y_osqp,
                              self.layout.equality_count, self.layout.contact.start,
                              problem.friction == 0.0, problem.tangent_rows)
        if not self.settings.refine:  # OSQP's own iterate, accurate to eps_abs/eps_rel only
            if status_val != 1:
                raise QPError(f"OSQP stopped with '{status}' after {iterations} iterations; "
                              "raise solver max_iter or loosen eps_abs/eps_rel")
            return QPSolution(v=x.reshape(-1, 3), y=y, active=active, exact=False,
                              iterations=iterations, status=status)
        exact = self._active_set_solution(problem, Px, Ax, q, lower, col_scale, row_scale,
                                          active, iterations)
        if exact is not None:
            return exact
        refined = self.refine(problem, active)
        if refined is not None:
            return refined
        if status_val != 1:
            raise QPError(f"OSQP stopped with '{status}' after {iterations} iterations "
                          "and the active-set refinement did not converge; raise "
                          "solver max_iter or loosen eps_abs/eps_rel")
        return QPSolution(v=x.reshape(-1, 3), y=y, active=active, exact=False,
                          iterations=iterations, status=status)

    def _smoothed(self, Px, Ax, q, lower, col_scale, row_scale, warm_v) -> QPSolution:
        """The relaxed-complementarity solution (:func:`sim_vine.kkt.smoothed_at`)."""
        kappa, limit = self.settings.contact_smoothing, int(self.settings.smoothing_iterations)
        rows_on = lower > -_INFINITY  # unbounded rows (a vine that everts) are free
        ok, v, scaled_y, dual, iterations = smoothed_at(
            tuple(self._banded.layout), Px, Ax, q, lower, col_scale,
            self.layout.equality_count, kappa, warm_v, limit, rows_on)
        if not ok:
            raise QPError(f"the smoothed contact solve (contact_smoothing {kappa:g} J) did not "
                          f"converge in {limit} iterations; raise contact_smoothing or "
                          "smoothing_iterations")
        return QPSolution(v=v, y=scaled_y * row_scale, active=rows_on, exact=True,
                          iterations=int(iterations), status="smoothed", dual=dual)

    def _guessed_active_set(self, problem: QPProblem, Px, Ax, q, lower, col_scale, row_scale,
                            warm_v) -> QPSolution | None:
        """The exact solution at the rows the input velocity ``warm_v`` meets (within
        ``guess_tolerance``), if that set is optimal now.

        At μ = 0 a pair's two cone edges coincide; the impulse must also sit on the edge
        that opposes the sliding (the convention the friction gradient relies on).
        """
        slack_allowed = -self.settings.guess_tolerance * row_scale
        active = guess_active(self.layout.row_bodies, problem.row_values, warm_v,
                              problem.lower, row_scale, slack_allowed,
                              self.layout.equality_count, self.layout.contact.start,
                              problem.friction == 0.0, problem.tangent_rows)
        solution = self._active_set_solution(problem, Px, Ax, q, lower, col_scale, row_scale,
                                             active, 0, edge_rule=problem.friction == 0.0)
        if solution is None:
            return None
        self.reused += 1
        return solution

    def guess_active_reference(self, problem: QPProblem, x, row_scale, scaled_y) -> np.ndarray:
        """Rows held with equality according to OSQP's iterate (the rule of OSQP's polishing):
        the bounded equality rows and the contact rows it finds active.

        At μ = 0 each contact pair's coinciding cone edges collapse to the one that would
        bind for μ > 0, the edge opposing the sliding. NumPy reference of the compiled
        :func:`sim_vine._kernels.guess_active`.
        """
        scaled_slack = (rows_times(self.layout.row_bodies, problem.row_values,
                                   np.asarray(x).reshape(-1, 3)) - problem.lower) * row_scale
        contact = self.layout.contact
        active = np.zeros(self.layout.size, dtype=bool)
        equality = slice(0, self.layout.equality_count)
        active[equality] = problem.lower[equality] > -np.inf  # free rows: everted joints' locks
        active[contact] = (scaled_slack < -scaled_y)[contact]
        if problem.friction == 0.0:
            either = active[contact.start::2] | active[contact.start + 1::2]
            edge = self._binding_edge(problem, x)
            active[contact.start::2] = either & (edge == 0)
            active[contact.start + 1::2] = either & (edge == 1)
        return active

    def _active_set_solution(self, problem: QPProblem, Px, Ax, q, lower, col_scale, row_scale,
                             active, iterations, *, edge_rule: bool = False
                             ) -> QPSolution | None:
        """The exact solution at ``active`` (banded KKT solve), if it is optimal there.

        Optimal means: inactive contact rows hold and active ones push (multiplier ≤ 0),
        and with ``edge_rule`` active μ = 0 pairs use the edge opposing the sliding;
        otherwise None, and :meth:`refine` searches the active set. One compiled call
        (:func:`sim_vine.kkt.exact_at`).
        """
        ok, v, scaled_y = exact_at(tuple(self._banded.layout), Px, Ax, q, lower, col_scale,
                                   active, self.layout.row_bodies, problem.row_values,
                                   problem.lower, self.layout.contact.start,
                                   self.settings.feasibility_tolerance, edge_rule,
                                   problem.tangent_rows)
        if not ok:
            return None
        return QPSolution(v=v, y=scaled_y * row_scale, active=active, exact=True,
                          iterations=iterations, status="active-set KKT")

    def adjoint(self, problem: QPProblem, active, g_v, *, dual=None
                ) -> tuple[np.ndarray, np.ndarray]:
        """``(w, z)`` with ``[P Aₐᵀ; Aₐ D] [w; z] = [g_v; 0]``; z is zero on inactive rows.

        ``D``: the solution's row diagonal (:attr:`QPSolution.dual`, smoothed contact), zero
        when None. The banded solve of the scaled system (``K⁻¹ = S K̃⁻¹ S``), or for the
        hard QP the sparse LU of :meth:`kkt_solver` when the banded matrix is singular.
        """
        n = 3 * self.model.body_count
        Px, Ax, _, _, _, col_scale, row_scale = self.scaled_data(problem)
        rhs = np.zeros(n + self.layout.size)
        rhs[:n] = col_scale * np.asarray(g_v).reshape(-1)
        solution = self._banded.solve(Px, Ax, active, rhs, dual)
        if solution is not None and math.isfinite(float(np.sum(solution))):
            return col_scale * solution[:n], np.where(active, solution[n:], 0.0) * row_scale
        if dual is not None:
            raise QPError("the smoothed step's adjoint system is singular")
        rows = np.flatnonzero(active)
        solve = self.kkt_solver(problem, self.a_matrix(problem.row_values), active)
        x = solve(np.concatenate([np.asarray(g_v).reshape(-1), np.zeros(len(rows))]))
        z = np.zeros(self.layout.size)
        z[rows] = x[n:]
        return x[:n], z

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

    def refine(self, problem: QPProblem, active) -> QPSolution | None:
        """Exact solution by active-set iteration from OSQP's guess, or None on failure.

        Each iteration solves the banded KKT system at the current active set, then frees
        the contact row pulling hardest (multiplier of the wrong sign) and holds the most
        violated one; a singular system (dependent contact rows) restarts from none. At
        μ = 0 a pair's first cone edge stands for both while iterating; the impulse then
        moves to the edge opposing the sliding.
        """
        n, m = 3 * self.model.body_count, self.layout.size
        Px, Ax, q, lower_scaled, _, col_scale, row_scale = self.scaled_data(problem)
        contact = np.zeros(m, dtype=bool)
        contact[self.layout.contact] = True
        start = self.layout.contact.start
        zero = problem.friction == 0.0
        active = active.copy()
        if zero:
            active[start::2] |= active[start + 1::2]
            active[start + 1::2] = False
        tol = self.settings.feasibility_tolerance * np.maximum(1.0, np.abs(problem.lower))
        rhs = np.zeros(n + m)
        rhs[:n] = -q
        for _ in range(self.settings.refine_iterations):
            rhs[n:] = np.where(active, lower_scaled, 0.0)
            solution = self._banded.solve(Px, Ax, active, rhs)
            if solution is None or not math.isfinite(float(np.sum(solution))):
                if not active[contact].any():
                    return None
                active[contact] = False  # dependent contact rows: start from none of them
                continue
            v = (solution[:n] * col_scale).reshape(-1, 3)
            scaled_y = np.where(active, solution[n:], 0.0)
            slack = rows_times_fast(self.layout.row_bodies, problem.row_values, v) - problem.lower
            violated = contact & ~active & (slack < -tol)
            if zero:
                violated[start + 1::2] = False
            wrong_sign = contact & active & (scaled_y > 1e-12)
            if not violated.any() and not wrong_sign.any():
                if zero:  # while iterating only the first edges were active
                    pair_active = active[start::2].copy()
                    moved = pair_active & (self._binding_edge(problem, v) == 1)
                    active[start::2] = pair_active & ~moved
                    active[start + 1::2] = moved
                    scaled_y[start + 1::2] = np.where(moved, scaled_y[start::2], 0.0)
                    scaled_y[start::2] = np.where(moved, 0.0, scaled_y[start::2])
                return QPSolution(v=v, y=scaled_y * row_scale, active=active, exact=True,
                                  iterations=0, status="refined")
            if wrong_sign.any():
                active[np.flatnonzero(wrong_sign)[np.argmax(scaled_y[wrong_sign])]] = False
            if violated.any():  # one row at a time, so that no dependent set is formed
                worst = np.flatnonzero(violated)[np.argmin((slack / tol)[violated])]
                active[worst] = True
        return None

    def _binding_edge(self, problem: QPProblem, v) -> np.ndarray:
        """Per contact pair, the cone edge (0: N + μT, 1: N − μT) opposing the sliding."""
        sliding = rows_times_fast(self._pair_bodies, problem.tangent_rows,
                                  np.asarray(v, dtype=np.float64).reshape(-1, 3))
        return (sliding > 0).astype(np.int64)
