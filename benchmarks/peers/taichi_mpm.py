"""The benchmark MLS-MPM scene in Taichi (float32, CPU), backward by Taichi's autodiff.

Fields hold two particle states (``[0]`` current, ``[1]`` next) and one grid; a substep is
three kernels (P2G, grid update with sticky walls, G2P). Its reverse is DiffTaichi's
differentiable MPM (diffmpm): only particle states are kept per substep, so the reverse of a
substep first recomputes the grid (clear, P2G, grid update) and then runs the ``.grad()``
kernels of G2P, grid update and P2G, in that order. Written for this benchmark from the
formulas in :mod:`scene`.
"""

from __future__ import annotations

import time

import numpy as np
import taichi as ti

from .scene import MASS_FLOOR, BenchmarkScene

__all__ = ["TaichiMPM"]

_initialized = False


class TaichiMPM:
    """The scene on Taichi's CPU backend: ``run`` advances, ``time_*`` measure ms per substep.

    Taichi allows one runtime per process; every instance shares it (``ti.init`` runs once).
    """

    def __init__(self, scene: BenchmarkScene, *, threads: int | None = None):
        global _initialized
        if not _initialized:
            kwargs = {} if threads is None else {"cpu_max_num_threads": threads}
            ti.init(arch=ti.cpu, default_fp=ti.f32, log_level=ti.WARN, **kwargs)
            _initialized = True
        self.scene = scene
        d, n, res = scene.dim, scene.particle_count, scene.grid_resolution
        self.x = ti.Vector.field(d, ti.f32, shape=(2, n), needs_grad=True)
        self.v = ti.Vector.field(d, ti.f32, shape=(2, n), needs_grad=True)
        self.C = ti.Matrix.field(d, d, ti.f32, shape=(2, n), needs_grad=True)
        self.F = ti.Matrix.field(d, d, ti.f32, shape=(2, n), needs_grad=True)
        self.grid_mv = ti.Vector.field(d, ti.f32, shape=(res,) * d, needs_grad=True)
        self.grid_m = ti.field(ti.f32, shape=(res,) * d, needs_grad=True)
        self.grid_v = ti.Vector.field(d, ti.f32, shape=(res,) * d, needs_grad=True)
        self._build_kernels()
        self._load(0, scene.particle_x, scene.particle_v,
                   np.broadcast_to(np.eye(d), (n, d, d)), np.zeros((n, d, d)))

    def _load(self, slot, x, v, F, C):
        for field, value in ((self.x, x), (self.v, v), (self.F, F), (self.C, C)):
            full = field.to_numpy()
            full[slot] = value
            field.from_numpy(full.astype(np.float32))

    def _build_kernels(self):
        sc = self.scene
        d, res, margin = sc.dim, sc.grid_resolution, sc.wall_margin
        inv_dx, dt = 1.0 / sc.dx, sc.dt
        mu, lam = sc.lame
        mass, volume = sc.density * sc.volume, sc.volume
        gravity = ti.Vector(list(sc.gravity))
        x, v, C, F = self.x, self.v, self.C, self.F
        grid_mv, grid_m, grid_v = self.grid_mv, self.grid_m, self.grid_v

        @ti.func
        def rotation(Fp):
            R = ti.Matrix.identity(ti.f32, d)
            if ti.static(d == 2):
                a = Fp[0, 0] + Fp[1, 1]
                b = Fp[1, 0] - Fp[0, 1]
                r = ti.sqrt(a * a + b * b)
                R = ti.Matrix([[a / r, -b / r], [b / r, a / r]])
            else:
                # Newton's polar iteration R <- (R + R^-T) / 2 from R = F: Taichi cannot
                # reverse-differentiate ti.svd; eight unrolled steps reach float32 accuracy
                # for the moderate strains of the benchmark.
                R = Fp
                for _ in ti.static(range(8)):
                    R = 0.5 * (R + R.inverse().transpose())
            return R

        @ti.kernel
        def clear_grid():
            for I in ti.grouped(grid_m):
                grid_mv[I] = ti.Vector.zero(ti.f32, d)
                grid_m[I] = 0.0

        @ti.kernel
        def clear_grid_and_gradients():
            for I in ti.grouped(grid_m):
                grid_mv[I] = ti.Vector.zero(ti.f32, d)
                grid_m[I] = 0.0
                grid_v[I] = ti.Vector.zero(ti.f32, d)
                grid_mv.grad[I] = ti.Vector.zero(ti.f32, d)
                grid_m.grad[I] = 0.0
                grid_v.grad[I] = ti.Vector.zero(ti.f32, d)

        @ti.kernel
        def p2g():
            for p in range(x.shape[1]):
                xs = x[0, p] * inv_dx
                base = ti.cast(ti.floor(xs - 0.5), ti.i32)
                fx = xs - ti.cast(base, ti.f32)
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
                Fp = F[0, p]
                R = rotation(Fp)
                J = Fp.determinant()
                tau = 2.0 * mu * (Fp - R) @ Fp.transpose() + ti.Matrix.identity(
                    ti.f32, d) * lam * (J - 1.0) * J
                affine = (-dt * volume * 4.0 * inv_dx * inv_dx) * tau + mass * C[0, p]
                momentum = mass * v[0, p]
                for offset in ti.static(ti.grouped(ti.ndrange(*((3,) * d)))):
                    dpos = (ti.cast(offset, ti.f32) - fx) / inv_dx
                    weight = 1.0
                    for k in ti.static(range(d)):
                        weight *= w[offset[k]][k]
                    grid_mv[base + offset] += weight * (momentum + affine @ dpos)
                    grid_m[base + offset] += weight * mass

        @ti.kernel
        def grid_update():
            for I in ti.grouped(grid_m):
                m = grid_m[I]
                out = ti.Vector.zero(ti.f32, d)
                if m > MASS_FLOOR:
                    out = grid_mv[I] / m + dt * gravity
                wall = False
                for k in ti.static(range(d)):
                    if I[k] < margin or I[k] >= res - margin:
                        wall = True
                if wall:
                    out = ti.Vector.zero(ti.f32, d)
                grid_v[I] = out

        @ti.kernel
        def g2p():
            for p in range(x.shape[1]):
                xs = x[0, p] * inv_dx
                base = ti.cast(ti.floor(xs - 0.5), ti.i32)
                fx = xs - ti.cast(base, ti.f32)
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
                new_v = ti.Vector.zero(ti.f32, d)
                new_C = ti.Matrix.zero(ti.f32, d, d)
                for offset in ti.static(ti.grouped(ti.ndrange(*((3,) * d)))):
                    dpos = (ti.cast(offset, ti.f32) - fx) / inv_dx
                    weight = 1.0
                    for k in ti.static(range(d)):
                        weight *= w[offset[k]][k]
                    gv = grid_v[base + offset]
                    new_v += weight * gv
                    new_C += 4.0 * inv_dx * inv_dx * weight * gv.outer_product(dpos)
                v[1, p] = new_v
                C[1, p] = new_C
                F[1, p] = F[0, p] + dt * (new_C @ F[0, p])
                x[1, p] = x[0, p] + dt * new_v

        @ti.kernel
        def advance():
            for p in range(x.shape[1]):
                x[0, p] = x[1, p]
                v[0, p] = v[1, p]
                C[0, p] = C[1, p]
                F[0, p] = F[1, p]

        self._clear_grid, self._p2g, self._grid_update = clear_grid, p2g, grid_update
        self._clear_grid_and_gradients = clear_grid_and_gradients
        self._g2p, self._advance = g2p, advance

    def _substep(self):
        self._clear_grid()
        self._p2g()
        self._grid_update()
        self._g2p()

    def run(self, substeps: int) -> None:
        """Advance ``substeps`` substeps (the next state is copied back into slot 0)."""
        for _ in range(substeps):
            self._substep()
            self._advance()
        ti.sync()

    def positions(self) -> np.ndarray:
        """Current particle positions [m], shape (n, dim)."""
        return self.x.to_numpy()[0].astype(np.float64)

    def time_forward(self, substeps: int) -> float:
        """Milliseconds per forward substep (including the state copy)."""
        self.run(1)  # compile and warm up
        start = time.perf_counter()
        self.run(substeps)
        return 1e3 * (time.perf_counter() - start) / substeps

    def _clear_gradients(self):
        for field in (self.x, self.v, self.C, self.F):
            field.grad.fill(0.0)
        for field in (self.x, self.v, self.C, self.F):
            grad = field.grad.to_numpy()
            grad[1] = 1.0
            field.grad.from_numpy(grad)

    def _reverse(self):
        """One reverse substep as diffmpm runs it: recompute the grid (its gradients cleared
        too), then the adjoints. The forward clears grid values only."""
        self._clear_grid_and_gradients()
        self._p2g()
        self._grid_update()
        self._g2p.grad()
        self._grid_update.grad()
        self._p2g.grad()

    def gradient(self) -> dict[str, np.ndarray]:
        """∂(sum of every entry of the next state)/∂(current state) for one substep."""
        self._clear_gradients()
        self._reverse()
        return {name: field.grad.to_numpy()[0].astype(np.float64) for name, field in
                (("particle_x", self.x), ("particle_v", self.v), ("particle_C", self.C),
                 ("particle_F", self.F))}

    def time_backward(self, repeats: int) -> float:
        """Milliseconds per reverse substep given ∂L/∂s': the grid recomputation and the
        three ``.grad()`` kernels.

        Gradients are seeded once; repeating the reverse accumulates into the same particle
        gradient fields, which costs the same as fresh seeds.
        """
        self._clear_gradients()
        self._reverse()  # compile and warm up
        ti.sync()
        start = time.perf_counter()
        for _ in range(repeats):
            self._reverse()
        ti.sync()
        return 1e3 * (time.perf_counter() - start) / repeats
