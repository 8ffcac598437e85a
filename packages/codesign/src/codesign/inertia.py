"""Rigid-body masses and inertia tensors, shared by the simulators of rigid links (sim_rigid,
sim_pbd): the physical check of inertia tensors and the links' design parameters."""

from __future__ import annotations

import numpy as np

from .design import Parameter

__all__ = ["INERTIA_TOLERANCE", "inertia_problem", "link_parameters"]

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


def link_parameters(link_mass, link_inertia, *, frame: str) -> list[Parameter]:
    """The design parameters ``link.mass`` (n,) [kg] and ``link.inertia`` (n, 3, 3) [kg m²]
    of n rigid links, defaulting to the model's ``link_mass`` and ``link_inertia`` (about
    the centres of mass, in the links' ``frame``, named in the doc) and scaled by their
    means (a third of the mean trace for the inertia, at least 1e-6 kg m²)."""
    n = len(link_mass)
    return [
        Parameter("link.mass", (n,), link_mass, lower=0.0, unit="kg",
                  scale=float(np.mean(link_mass)), entity="link", doc="link mass"),
        Parameter("link.inertia", (n, 3, 3), link_inertia, unit="kg m^2",
                  scale=max(float(np.mean(np.trace(link_inertia, axis1=1, axis2=2))) / 3, 1e-6),
                  entity="link", doc=f"inertia about the centre of mass, {frame}"),
    ]
