"""Box-shaped component meshes and cages for the cage-based morphology
(:mod:`sim_rigid.morphology`): :func:`box_mesh` makes a closed, outward-oriented triangle
mesh of a box, subdivided so a cage deformation has vertices to move.

Every side's quads are split along the same diagonal in the side's own axes (from its low
corner to its high corner), so the two facing sides of neighbouring boxes (x = L of one, x =
0 of the next) are triangulated alike: a point on one is on the same cage triangle as on the
other, which keeps neighbours connected under mean value coordinates.
"""

from __future__ import annotations

import numpy as np

__all__ = ["box_mesh", "check_sizes"]


def check_sizes(kind: str, sizes: dict, *, cage_margin: float | None = None) -> None:
    """Raise ValueError naming ``kind``'s ``sizes`` (name -> value) that are not positive,
    or a ``cage_margin`` that is not above 1 (the cage must enclose the mesh)."""
    bad = {k: v for k, v in sizes.items() if not float(v) > 0}
    if bad:
        raise ValueError(f"{kind} sizes must be positive, got {bad}")
    if cage_margin is not None and not cage_margin > 1.0:
        raise ValueError(f"cage_margin must be > 1 so the cage encloses the mesh, got "
                         f"{cage_margin!r}")


def box_mesh(low, high, divisions=(1, 1, 1)) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (v, 3) [m] and faces (f, 3) of the box from corner ``low`` to ``high`` (3,)
    [m], each edge along axis a cut into ``divisions[a]`` equal parts; faces
    counter-clockwise seen from outside. ``divisions=(1, 1, 1)`` is the 8-vertex cage."""
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    counts = np.asarray(divisions, dtype=np.int64)
    if low.shape != (3,) or high.shape != (3,) or np.any(high <= low):
        raise ValueError(f"a box needs low < high on every axis, got low {low.tolist()}, "
                         f"high {high.tolist()}")
    if counts.shape != (3,) or np.any(counts < 1):
        raise ValueError(f"divisions must be three integers >= 1, got {divisions!r}")
    grid = np.stack(np.meshgrid(*(np.arange(n + 1) for n in counts), indexing="ij"), axis=-1)
    on_surface = np.any((grid == 0) | (grid == counts), axis=-1)
    surface = grid[on_surface]
    index = -np.ones(counts + 1, dtype=np.int64)
    index[on_surface] = np.arange(len(surface))
    faces = []
    for axis in range(3):
        u, v = (axis + 1) % 3, (axis + 2) % 3           # (u, v, axis) is right-handed
        for side, outward in ((0, -1), (counts[axis], 1)):
            for i in range(counts[u]):
                for j in range(counts[v]):
                    corner = np.zeros((4, 3), dtype=np.int64)
                    corner[:, axis] = side
                    corner[:, u] = [i, i + 1, i + 1, i]
                    corner[:, v] = [j, j, j + 1, j + 1]
                    q = [index[tuple(c)] for c in corner]
                    # (u, v) runs counter-clockwise seen from +axis
                    tris = [(q[0], q[1], q[2]), (q[0], q[2], q[3])]
                    faces += tris if outward > 0 else [t[::-1] for t in tris]
    vertices = low + surface / counts * (high - low)
    return vertices, np.array(faces, dtype=np.int64)
