"""Choosing the vine model from the data: fit every candidate model to the same recording
and rank the fits by the Bayesian information criterion (BIC).

A candidate (:class:`ModelCandidate`) is the pipeline's simulator with some vine options
changed (``{growth: tip}``, ``{growth: evert, max_length: 0.6}``) and/or more design
parameters free (``[ground.friction]``); the pipeline's ``fit.models`` lists them
(:func:`read_models` checks the list). Each fit becomes a row of the comparison
(:func:`fit_row`, or :func:`failed_row` for a candidate that could not be fitted) and
:func:`ranked` orders the rows by

    BIC = n log(RSS / n) + k log n,

with ``RSS`` [mm²] the sum of squared keypoint residuals (every measured coordinate of
every measured frame, :attr:`~sim_vine.fit.identifiability.LeastSquaresPoint.residuals`),
``n`` their count and ``k`` the fitted entries: the free parameters, the start pose's pin
angles and extension, and per-frame growth rates (``fit_growth``). It is −2 log L + k log n
for independent Gaussian residuals of unknown variance, up to a constant shared by every
candidate of one recording, so only differences count: a free parameter must lower RSS by
a factor ``n^(1/n)`` (with n = 300 residuals, 1.9 %) to pay for itself. BIC rather than
AIC (penalty 2 per entry), because consecutive frames' errors are correlated, so the
residuals carry less information than their count says and the larger penalty (log n ≈ 6)
guards better against a parameter that fits noise; BIC is also consistent, choosing the
true model among the candidates as the recording grows. Differences read on Kass and
Raftery's scale (:func:`evidence`): below 2 barely worth a mention, 2–6 positive, 6–10
strong, above 10 very strong.

A parameter the chosen model shares with a candidate that the data do not strongly reject
(BIC within :data:`STRONG_EVIDENCE` of the best) but fitted to a value more than
:data:`MODEL_DEPENDENCE` apart is not determined by the recording, however small its
standard error in either model (:func:`model_dependent`): the value depends on a modelling
choice the data cannot make. Measured on the harder recording whose truth drags on the
ground: the damping is 0.00206 N m s/rad with friction free and 0.00267 without (+30 %),
BIC 2.1 apart; without friction its standard error is 0.5 %.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from codesign.options import check_options, suggest, type_name

from ..scene import make_simulator
from .bundle import frame_errors_mm, loss_mm
from .shooting import ShootingFit, VideoRecording

__all__ = ["MODEL_KEYS", "ModelCandidate", "ModelsError", "bic", "candidate_name",
           "choice_note", "evidence", "failed_row", "fit_row", "model_dependent", "ranked",
           "read_models"]

MODEL_KEYS = ("name", "simulator", "free")
STRONG_EVIDENCE = 6.0
"""A BIC difference at or above this is strong evidence against a candidate (Kass and
Raftery); below it, a candidate's values are plausible alternatives."""
MODEL_DEPENDENCE = 0.05
"""Relative difference between two plausible models' values of a parameter above which it
counts as determined by the model, not by the data."""
"""Keys of one entry of ``fit.models``."""


class ModelsError(ValueError):
    """``fit.models`` is malformed; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class ModelCandidate:
    """One model to fit.

    Attributes:
        name: what the comparison calls it.
        simulator: vine options over the pipeline's simulator block (and scene).
        free: design parameters freed in addition to the fit's ``free``.
    """

    name: str
    simulator: dict[str, Any] = dataclasses.field(default_factory=dict)
    free: tuple[str, ...] = ()

    def free_parameters(self, base: Sequence[str]) -> list[str]:
        """``base`` and then this candidate's additions, each name once."""
        return list(dict.fromkeys([*base, *self.free]))


def candidate_name(simulator: Mapping[str, Any], free: Sequence[str]) -> str:
    """A name from a candidate's options: ``growth=tip``, ``growth=evert, max_length=0.6``,
    ``+ground.friction``; ``as configured`` for neither."""
    parts = [f"{key}={value}" for key, value in simulator.items()] + [f"+{n}" for n in free]
    return ", ".join(parts) or "as configured"


def _candidate(entry: Any, where: str, check: Callable[[dict], list[str]]) -> ModelCandidate:
    """One checked entry of ``fit.models`` (see :func:`read_models`)."""
    if not isinstance(entry, Mapping):
        raise ModelsError(f"{where} must be a mapping with optional keys {list(MODEL_KEYS)} "
                          f"(e.g. {{simulator: {{growth: tip}}}}), got {type_name(entry)}")
    for key in entry:
        if key not in MODEL_KEYS:
            raise ModelsError(f"{where}: unknown key {key!r}{suggest(str(key), MODEL_KEYS)}; "
                              f"known: {list(MODEL_KEYS)}")
    simulator = entry.get("simulator") or {}
    if not isinstance(simulator, Mapping):
        raise ModelsError(f"{where}.simulator must be a mapping of vine options (e.g. "
                          f"{{growth: tip}}), got {type_name(simulator)}")
    problems = check(dict(simulator))
    if problems:
        raise ModelsError(f"{where}.simulator: " + "; ".join(problems))
    free = entry.get("free") or []
    if not (isinstance(free, list) and all(isinstance(n, str) for n in free)):
        raise ModelsError(f"{where}.free must be a list of design parameter names to free "
                          f"besides fit.free (e.g. [ground.friction]), got {free!r}")
    name = entry.get("name")
    if name is not None and not (isinstance(name, str) and name):
        raise ModelsError(f"{where}.name must be a non-empty string, got {name!r}")
    return ModelCandidate(name=name or candidate_name(simulator, free),
                          simulator=dict(simulator), free=tuple(free))


def read_models(value: Any, *, where: str, options: Mapping[str, Any]) -> list[ModelCandidate]:
    """The candidates of a ``fit.models`` list, checked.

    Args:
        value: the YAML's list: per candidate a mapping with optional ``name``,
            ``simulator`` (vine options over ``options``) and ``free`` (names).
        where: the file, for messages.
        options: the vine options the pipeline builds its simulator from (its simulator
            block, ``scene`` and ``base_dir``); each candidate's ``simulator`` over them is
            checked as the vine simulator checks its options (names, types, choices and
            bounds: :func:`codesign.options.check_options`), and its ``free`` names against
            that simulator's design parameters.

    Raises:
        ModelsError: not a non-empty list, an entry not a mapping, an unknown key, an
            unknown or invalid vine option, an unknown parameter name, or two candidates of
            one name.
    """
    if not isinstance(value, list) or not value:
        raise ModelsError(f"{where}: fit.models must be a non-empty list of candidate models "
                          f"(e.g. [{{simulator: {{growth: every_prismatic}}}}, {{simulator: "
                          f"{{growth: tip}}}}]), got {value!r}")

    def check(simulator: dict) -> list[str]:
        _, problems = check_options(make_simulator, {**options, **simulator},
                                    what="the vine simulator")
        return [message for _, message in problems]

    candidates = []
    for index, entry in enumerate(value):
        candidate = _candidate(entry, f"{where}: fit.models[{index}]", check)
        names = make_simulator(**{**options, **candidate.simulator,
                                  "check_initial_pose": False}).design_space().names
        for name in candidate.free:
            if name not in names:
                raise ModelsError(f"{where}: fit.models[{index}].free: unknown design "
                                  f"parameter {name!r}{suggest(name, names)}; known: {names}")
        if any(c.name == candidate.name for c in candidates):
            raise ModelsError(f"{where}: fit.models[{index}] is named {candidate.name!r} like "
                              "an earlier candidate; give each a different name (or options)")
        candidates.append(candidate)
    return candidates


def bic(residuals_mm: np.ndarray, parameters: int) -> float:
    """``n log(RSS / n) + k log n`` for ``residuals_mm`` (n,) [mm] and k = ``parameters``
    fitted entries (see the module)."""
    residuals = np.asarray(residuals_mm, dtype=np.float64)
    n = residuals.size
    return float(n * math.log(float(residuals @ residuals) / n) + parameters * math.log(n))


def fit_row(candidate: ModelCandidate, fit: ShootingFit, recording: VideoRecording, *,
            free: Sequence[str], time_s: float) -> dict[str, Any]:
    """The comparison's row of a candidate fitted to ``recording``: its name, options, free
    parameters and their fitted values, loss (RMS keypoint distance [mm]), tip MAE and mean
    shape error [mm], k, n, BIC, whether the optimizer converged, its iterations and the
    fit's time [s]."""
    point = fit.least_squares
    _, shape_mm = frame_errors_mm(fit.predicted[0], recording.keypoints.points)
    return {"name": candidate.name, "simulator": candidate.simulator, "free": list(free),
            "fitted": {n: np.asarray(v).tolist() for n, v in fit.fitted.items()},
            "loss_mm": loss_mm(fit.loss, recording.keypoints.point_count),
            "tip_mae_mm": fit.tip_error_mm[0]["mae"],
            "shape_error_mm": float(np.nanmean(shape_mm)),
            "parameters": len(point.names), "residuals": int(point.residuals.size),
            "bic": bic(point.residuals, len(point.names)),
            "converged": bool(fit.optimization.converged),
            "iterations": int(fit.optimization.iterations), "time_s": time_s, "error": None}


def failed_row(candidate: ModelCandidate, error: Exception, *, free: Sequence[str],
               time_s: float) -> dict[str, Any]:
    """The comparison's row of a candidate that could not be fitted: its name, options and
    the error."""
    return {"name": candidate.name, "simulator": candidate.simulator, "free": list(free),
            "bic": None, "time_s": time_s, "error": f"{type(error).__name__}: {error}"}


def ranked(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``rows`` by BIC, lowest (best) first, the failed ones last in their order."""
    fitted = sorted((r for r in rows if r["error"] is None), key=lambda r: r["bic"])
    return fitted + [r for r in rows if r["error"] is not None]


def evidence(difference: float) -> str:
    """Kass and Raftery's words for a BIC difference."""
    for limit, words in ((2, "barely worth a mention"), (6, "positive"), (10, "strong")):
        if difference < limit:
            return words
    return "very strong"


def choice_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """The note naming the chosen model (the first of :func:`ranked` ``rows``, fitted), its
    margin over the next fitted one, and the candidates whose optimizer stopped before
    converging: their BIC is only an upper bound on their best, so the order may change
    with a longer fit."""
    fitted = [r for r in rows if r["error"] is None]
    best, *others = fitted
    failed = [r["name"] for r in rows if r["error"] is not None]
    unconverged = [r["name"] for r in fitted if not r["converged"]]
    text = f"model {best['name']!r} chosen by BIC ({best['bic']:.1f}) of {len(rows)} candidates"
    if others:
        margin = others[0]["bic"] - best["bic"]
        text += (f", {margin:.1f} below {others[0]['name']!r} ({evidence(margin)} evidence "
                 "on Kass and Raftery's scale)")
    if unconverged:
        text += (f"; stopped before converging, so ranked by an upper bound of their BIC: "
                 f"{unconverged} (raise fit.iterations)")
    return text + (f"; failed: {failed}" if failed else "")


def model_dependent(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Parameters whose value depends on the model (see the module), each with the reason:
    per scalar parameter fitted by the chosen model (the first of :func:`ranked` ``rows``,
    fitted) and by a fitted candidate within :data:`STRONG_EVIDENCE` of its BIC, where the
    two values differ by more than :data:`MODEL_DEPENDENCE` of the chosen one's."""
    best, *others = [r for r in rows if r["error"] is None]
    reasons: dict[str, str] = {}
    for other in others:
        margin = other["bic"] - best["bic"]
        if margin >= STRONG_EVIDENCE:
            continue
        for name, value in best["fitted"].items():
            alternative = other["fitted"].get(name)
            if (name in reasons or alternative is None or np.ndim(value) or np.ndim(alternative)
                    or not value):
                continue
            change = (alternative - value) / abs(value)
            if abs(change) > MODEL_DEPENDENCE:
                reasons[name] = (f"{100 * change:+.0f} % in model {other['name']!r}, which the "
                                 f"data barely reject (BIC {margin:.1f} higher, "
                                 f"{evidence(margin)} evidence): the value depends on the "
                                 "model, not on the recording")
    return reasons
