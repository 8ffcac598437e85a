"""Physical checks of rigid-body inertia tensors, shared by the simulators that read them
(sim_rigid's and sim_pbd's models, sim_pbd's URDF reader)."""

from __future__ import annotations

import numpy as np

__all__ = ["INERTIA_TOLERANCE", "inertia_problem"]

INERTIA_TOLERANCE = 1e-9
"""Relative slack (of the largest entry or principal moment) in the symmetry test and the
triangle inequality, which a thin rod meets with equality."""


def inertia_problem(inertia) -> tuple[int, str] | None:
    """The index of the first unphysical tensor among inertia tensors about the centre of
    mass [kg m²], shape (n, 3, 3), and why, or None when all are physical: each must be
    symmetric, positive definite, and its principal moments must satisfy the triangle
    inequality (the largest at most the sum of the others), as every mass distribution's do.
    """
    inertia = np.asarray(inertia, dtype=np.float64)
    if not len(inertia):
        return None
    scale = np.abs(inertia).max(axis=(1, 2))
    asymmetric = np.abs(inertia - inertia.transpose(0, 2, 1)).max(axis=(1, 2)) \
        > INERTIA_TOLERANCE * scale
    moments = np.linalg.eigvalsh(inertia)
    indefinite = ~(moments[:, 0] > 0.0)
    triangle = moments[:, 2] > (moments[:, 0] + moments[:, 1]) * (1.0 + INERTIA_TOLERANCE)
    bad = np.flatnonzero(asymmetric | indefinite | triangle)
    if not bad.size:
        return None
    i = int(bad[0])
    if asymmetric[i]:
        return i, f"the inertia {inertia[i].tolist()} kg m² is not symmetric"
    if indefinite[i]:
        return i, (f"the inertia is not positive definite (principal moments "
                   f"{moments[i].tolist()} kg m²); every principal moment must be > 0")
    return i, (f"the inertia's principal moments {moments[i].tolist()} kg m² break the "
               f"triangle inequality (the largest exceeds the sum of the others), which no "
               f"mass distribution does; correct the inertia tensor")
