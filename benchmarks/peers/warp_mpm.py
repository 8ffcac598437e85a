"""The benchmark MLS-MPM scene in NVIDIA Warp (float32, CPU), backward by ``wp.Tape``.

Three kernels per substep (P2G with atomics, grid update with sticky walls, G2P), written
for this benchmark from the formulas in :mod:`scene`; the backward pass is Warp's
automatic differentiation of the recorded launches.
"""

from __future__ import annotations

import time

import numpy as np
import warp as wp

from .scene import MASS_FLOOR, BenchmarkScene

__all__ = ["WarpMPM"]

wp.config.quiet = True


def _vec(dim):
    return wp.vec2 if dim == 2 else wp.vec3


def _mat(dim):
    return wp.mat22 if dim == 2 else wp.mat33


@wp.func
def _weights(fx: float):
    return wp.vec3(0.5 * (1.5 - fx) * (1.5 - fx), 0.75 - (fx - 1.0) * (fx - 1.0),
                   0.5 * (fx - 0.5) * (fx - 0.5))


@wp.func
def _rotation2(F: wp.mat22):
    a = F[0, 0] + F[1, 1]
    b = F[1, 0] - F[0, 1]
    r = wp.sqrt(a * a + b * b)
    c = a / r
    s = b / r
    return wp.mat22(c, -s, s, c)


@wp.func
def _rotation3(F: wp.mat33):
    # Newton's polar iteration R <- (R + R^-T) / 2 from R = F, eight steps (float32
    # accuracy at the benchmark's strains), as the Taichi peer: the adjoint of wp.svd3
    # divides by differences of singular values and is NaN at F = I, where the scene starts
    R = F
    for _ in range(8):
        R = 0.5 * (R + wp.transpose(wp.inverse(R)))
    return R


@wp.kernel
def _p2g_2d(x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2),
            C: wp.array(dtype=wp.mat22), F: wp.array(dtype=wp.mat22), mass: float, volume: float,
            mu: float, lam: float, inv_dx: float, dt: float,
            grid_mv: wp.array2d(dtype=wp.vec2), grid_m: wp.array2d(dtype=float)):
    p = wp.tid()
    xs = x[p] * inv_dx
    bx = int(wp.floor(xs[0] - 0.5))
    by = int(wp.floor(xs[1] - 0.5))
    fx = xs - wp.vec2(float(bx), float(by))
    wx = _weights(fx[0])
    wy = _weights(fx[1])
    Fp = F[p]
    R = _rotation2(Fp)
    J = wp.determinant(Fp)
    tau = 2.0 * mu * (Fp - R) * wp.transpose(Fp) + wp.diag(wp.vec2(lam * (J - 1.0) * J))
    affine = (-dt * volume * 4.0 * inv_dx * inv_dx) * tau + mass * C[p]
    momentum = mass * v[p]
    for i in range(3):
        for j in range(3):
            w = wx[i] * wy[j]
            dpos = (wp.vec2(float(i), float(j)) - fx) / inv_dx
            wp.atomic_add(grid_mv, bx + i, by + j, w * (momentum + affine * dpos))
            wp.atomic_add(grid_m, bx + i, by + j, w * mass)


@wp.kernel
def _grid_2d(grid_mv: wp.array2d(dtype=wp.vec2), grid_m: wp.array2d(dtype=float),
             gravity: wp.vec2, dt: float, res: int, margin: int,
             grid_v: wp.array2d(dtype=wp.vec2)):
    i, j = wp.tid()
    m = grid_m[i, j]
    v = wp.vec2(0.0, 0.0)
    if m > MASS_FLOOR:
        v = grid_mv[i, j] / m + dt * gravity
    if i < margin or i >= res - margin or j < margin or j >= res - margin:
        v = wp.vec2(0.0, 0.0)
    grid_v[i, j] = v


@wp.kernel
def _g2p_2d(x: wp.array(dtype=wp.vec2), F: wp.array(dtype=wp.mat22),
            grid_v: wp.array2d(dtype=wp.vec2), inv_dx: float, dt: float,
            x_out: wp.array(dtype=wp.vec2), v_out: wp.array(dtype=wp.vec2),
            C_out: wp.array(dtype=wp.mat22), F_out: wp.array(dtype=wp.mat22)):
    p = wp.tid()
    xs = x[p] * inv_dx
    bx = int(wp.floor(xs[0] - 0.5))
    by = int(wp.floor(xs[1] - 0.5))
    fx = xs - wp.vec2(float(bx), float(by))
    wx = _weights(fx[0])
    wy = _weights(fx[1])
    new_v = wp.vec2(0.0, 0.0)
    new_C = wp.mat22(0.0, 0.0, 0.0, 0.0)
    for i in range(3):
        for j in range(3):
            w = wx[i] * wy[j]
            dpos = (wp.vec2(float(i), float(j)) - fx) / inv_dx
            gv = grid_v[bx + i, by + j]
            new_v = new_v + w * gv
            new_C = new_C + (4.0 * inv_dx * inv_dx * w) * wp.outer(gv, dpos)
    v_out[p] = new_v
    C_out[p] = new_C
    F_out[p] = F[p] + dt * (new_C * F[p])
    x_out[p] = x[p] + dt * new_v


@wp.kernel
def _p2g_3d(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
            C: wp.array(dtype=wp.mat33), F: wp.array(dtype=wp.mat33), mass: float, volume: float,
            mu: float, lam: float, inv_dx: float, dt: float,
            grid_mv: wp.array3d(dtype=wp.vec3), grid_m: wp.array3d(dtype=float)):
    p = wp.tid()
    xs = x[p] * inv_dx
    bx = int(wp.floor(xs[0] - 0.5))
    by = int(wp.floor(xs[1] - 0.5))
    bz = int(wp.floor(xs[2] - 0.5))
    fx = xs - wp.vec3(float(bx), float(by), float(bz))
    wx = _weights(fx[0])
    wy = _weights(fx[1])
    wz = _weights(fx[2])
    Fp = F[p]
    R = _rotation3(Fp)
    J = wp.determinant(Fp)
    tau = 2.0 * mu * (Fp - R) * wp.transpose(Fp) + wp.diag(wp.vec3(lam * (J - 1.0) * J))
    affine = (-dt * volume * 4.0 * inv_dx * inv_dx) * tau + mass * C[p]
    momentum = mass * v[p]
    for i in range(3):
        for j in range(3):
            for k in range(3):
                w = wx[i] * wy[j] * wz[k]
                dpos = (wp.vec3(float(i), float(j), float(k)) - fx) / inv_dx
                wp.atomic_add(grid_mv, bx + i, by + j, bz + k, w * (momentum + affine * dpos))
                wp.atomic_add(grid_m, bx + i, by + j, bz + k, w * mass)


@wp.kernel
def _grid_3d(grid_mv: wp.array3d(dtype=wp.vec3), grid_m: wp.array3d(dtype=float),
             gravity: wp.vec3, dt: float, res: int, margin: int,
             grid_v: wp.array3d(dtype=wp.vec3)):
    i, j, k = wp.tid()
    m = grid_m[i, j, k]
    v = wp.vec3(0.0, 0.0, 0.0)
    if m > MASS_FLOOR:
        v = grid_mv[i, j, k] / m + dt * gravity
    if (i < margin or i >= res - margin or j < margin or j >= res - margin or k < margin
            or k >= res - margin):
        v = wp.vec3(0.0, 0.0, 0.0)
    grid_v[i, j, k] = v


@wp.kernel
def _g2p_3d(x: wp.array(dtype=wp.vec3), F: wp.array(dtype=wp.mat33),
            grid_v: wp.array3d(dtype=wp.vec3), inv_dx: float, dt: float,
            x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3),
            C_out: wp.array(dtype=wp.mat33), F_out: wp.array(dtype=wp.mat33)):
    p = wp.tid()
    xs = x[p] * inv_dx
    bx = int(wp.floor(xs[0] - 0.5))
    by = int(wp.floor(xs[1] - 0.5))
    bz = int(wp.floor(xs[2] - 0.5))
    fx = xs - wp.vec3(float(bx), float(by), float(bz))
    wx = _weights(fx[0])
    wy = _weights(fx[1])
    wz = _weights(fx[2])
    new_v = wp.vec3(0.0, 0.0, 0.0)
    new_C = wp.mat33()
    for i in range(3):
        for j in range(3):
            for k in range(3):
                w = wx[i] * wy[j] * wz[k]
                dpos = (wp.vec3(float(i), float(j), float(k)) - fx) / inv_dx
                gv = grid_v[bx + i, by + j, bz + k]
                new_v = new_v + w * gv
                new_C = new_C + (4.0 * inv_dx * inv_dx * w) * wp.outer(gv, dpos)
    v_out[p] = new_v
    C_out[p] = new_C
    F_out[p] = F[p] + dt * (new_C * F[p])
    x_out[p] = x[p] + dt * new_v


class WarpMPM:
    """The scene on Warp's CPU device: ``run`` advances, ``time_*`` measure ms per substep."""

    def __init__(self, scene: BenchmarkScene, *, device: str = "cpu"):
        wp.init()
        self.scene, self.device, d = scene, device, scene.dim
        self._kernels = (_p2g_2d, _grid_2d, _g2p_2d) if d == 2 else (_p2g_3d, _grid_3d, _g2p_3d)
        n, res = scene.particle_count, scene.grid_resolution
        F0 = np.broadcast_to(np.eye(d), (n, d, d))

        def array(values, dtype):
            return wp.array(np.asarray(values, np.float32), dtype=dtype, device=device,
                            requires_grad=True)

        self.states = [
            [array(scene.particle_x, _vec(d)), array(scene.particle_v, _vec(d)),
             array(np.zeros((n, d, d)), _mat(d)), array(F0, _mat(d))]
            for _ in range(2)]
        shape = (res,) * d
        self.grid_mv = wp.zeros(shape, dtype=_vec(d), device=device, requires_grad=True)
        self.grid_m = wp.zeros(shape, dtype=float, device=device, requires_grad=True)
        self.grid_v = wp.zeros(shape, dtype=_vec(d), device=device, requires_grad=True)
        mu, lam = scene.lame
        self._params = (float(scene.density * scene.volume), float(scene.volume), float(mu),
                        float(lam), float(1.0 / scene.dx), float(scene.dt))
        self._gravity = _vec(d)(*scene.gravity.astype(np.float32))
        self.current = 0

    def _substep(self, source, target):
        p2g, grid, g2p = self._kernels
        s, t, sc = self.states[source], self.states[target], self.scene
        mass, volume, mu, lam, inv_dx, dt = self._params
        self.grid_mv.zero_()
        self.grid_m.zero_()
        wp.launch(p2g, dim=sc.particle_count, device=self.device,
                  inputs=[s[0], s[1], s[2], s[3], mass, volume, mu, lam, inv_dx, dt,
                          self.grid_mv, self.grid_m])
        wp.launch(grid, dim=(sc.grid_resolution,) * sc.dim, device=self.device,
                  inputs=[self.grid_mv, self.grid_m, self._gravity, dt, sc.grid_resolution,
                          sc.wall_margin, self.grid_v])
        wp.launch(g2p, dim=sc.particle_count, device=self.device,
                  inputs=[s[0], s[3], self.grid_v, inv_dx, dt, t[0], t[1], t[2], t[3]])

    def run(self, substeps: int) -> None:
        """Advance ``substeps`` substeps."""
        for _ in range(substeps):
            self._substep(self.current, 1 - self.current)
            self.current = 1 - self.current
        wp.synchronize_device(self.device)

    def positions(self) -> np.ndarray:
        """Current particle positions [m], shape (n, dim)."""
        return self.states[self.current][0].numpy().astype(np.float64)

    def time_forward(self, substeps: int) -> float:
        """Milliseconds per forward substep."""
        self.run(1)  # compile and warm up
        start = time.perf_counter()
        self.run(substeps)
        return 1e3 * (time.perf_counter() - start) / substeps

    def _taped_substep(self):
        """Record one substep from the current state; returns (tape, ∂L/∂s' seeds of ones)."""
        source, target = self.current, 1 - self.current
        tape = wp.Tape()
        with tape:
            self._substep(source, target)
        seeds = {array: wp.array(np.ones(array.numpy().shape, np.float32), dtype=array.dtype,
                                 device=self.device)
                 for array in self.states[target]}
        return tape, seeds

    def gradient(self) -> dict[str, np.ndarray]:
        """∂(sum of every entry of the next state)/∂(current state) for one substep."""
        tape, seeds = self._taped_substep()
        tape.backward(grads=seeds)
        names = ("particle_x", "particle_v", "particle_C", "particle_F")
        out = {name: array.grad.numpy().astype(np.float64)
               for name, array in zip(names, self.states[self.current], strict=True)}
        tape.zero()
        return out

    def time_backward(self, repeats: int) -> float:
        """Milliseconds per reverse substep: the taped substep's backward given ∂L/∂s'."""
        tape, seeds = self._taped_substep()
        tape.backward(grads=seeds)
        tape.zero()
        start = time.perf_counter()
        for _ in range(repeats):
            tape.backward(grads=seeds)
            tape.zero()
        wp.synchronize_device(self.device)
        return 1e3 * (time.perf_counter() - start) / repeats
