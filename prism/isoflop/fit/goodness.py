"""Which approach may speak: each approach's lack of fit against the noise the runs measure.

Approach 3's form L = E + A/N^alpha + B/D^beta does not hold on every grid (an irreducible
loss that depends on size, an interaction of N and D), and Approach 2's parabola does
not hold over every window. A form that misfits the runs is not evidence that the
exponent is undetermined; it is a reason not to let that form decide. So each approach
is tested against the same noise, measured without either form (replicates and third
differences of neighbouring sizes, `misfit.reference_noise`; the budgets' parabola
residuals where no budget has 4 sizes):

- Approach 3: its residuals' structure along N within each budget (a quadratic in log N
  fitted to them, budget by budget) and along C (each budget's mean): misfit leaves the
  residuals curved or tilted in log N, or drifting with C, where noise leaves none.
- Approach 2: each budget's departure, within the window its minimum rests on, from the
  curve the minimum is read off (a parabola, or the cubic of a leaning curve): the extra
  residual over a quartic there.

An approach misfits when its test's p is below MISFIT_LEVEL and the structure is material:
its root mean square over the runs at least MATERIAL times the noise (a surface within the
noise of every run does not decide a worse than the noise does, however many runs detect
it). `speakers` turns the two tests into the verdict's rule, which the prediction shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prism.isoflop.fit.approach2 import budget_text
from prism.isoflop.records import BudgetFit

MISFIT_LEVEL = 0.01
MATERIAL = 1.0
APPROACHES = ("approach2", "approach3")
NAMES = {"approach2": "Approach 2", "approach3": "Approach 3"}


@dataclass(frozen=True)
class Goodness:
    """One approach's lack-of-fit test: whether it misfits, its p, and the evidence in words."""

    approach: str
    misfits: bool
    p: float | None
    # root mean square of the structure over the runs tested, over the noise
    size: float | None
    evidence: str


@dataclass(frozen=True)
class Speakers:
    """Which approaches may decide a (and any answer read off them), and why the others may not.

    `heard` are the approaches that were fitted and do not misfit; `silenced` those that
    misfit while another did not (named with the evidence, neither widening nor narrowing
    the verdict); `none_fits` is the reason when every fitted approach misfits."""

    heard: tuple[str, ...]
    silenced: tuple[str, ...]
    reasons: tuple[str, ...]
    none_fits: str | None = None

    def may_speak(self, approach: str) -> bool:
        return approach in self.heard


def speakers(method: str, tests: dict[str, Goodness | None]) -> Speakers:
    """The verdict's rule: of the approaches `method` fitted, those whose test passes (or could not
    be run) speak; one that misfits beside one that fits is silenced and named; when all misfit,
    none speaks and `none_fits` says why."""
    fitted = [a for a in APPROACHES if method in (a, "both")]
    bad = [a for a in fitted if tests.get(a) is not None and tests[a].misfits]
    good = [a for a in fitted if a not in bad]
    reasons = tuple(tests[a].evidence for a in bad)
    if bad and not good:
        why = "; ".join(reasons)
        return Speakers((), (), reasons, f"no approach fits the runs: {why}")
    return Speakers(tuple(good), tuple(bad), reasons)


def _p_f(ss: float, df1: int, sigma: float, dof: int) -> float:
    from scipy import special  # noqa: PLC0415 lazy: scipy

    return float(special.fdtrc(df1, dof, ss / df1 / (sigma * sigma)))


def approach3_goodness(params, loss, budget, predicted, sigma: float | None, dof: int) -> Goodness | None:
    """Approach 3's residuals (data - surface) against the noise: their part a quadratic in log N
    per budget explains (curvature and tilt along N, each budget's level along C), tested as
    F(terms, dof). None without noise to test against."""
    if sigma is None or not sigma > 0 or dof < 1:
        return None
    params, loss, budget, predicted = (np.asarray(v, float) for v in (params, loss, budget, predicted))
    resid = loss - predicted
    ss, df1, edges, structure = 0.0, 0, [], np.zeros_like(resid)
    for c in np.unique(budget):
        sel = np.flatnonzero(budget == c)
        x = np.log10(params[sel])
        k = min(3, len(np.unique(np.round(x, 12))))
        design = np.vander(x - x.mean(), k)
        fitted = design @ np.linalg.lstsq(design, resid[sel], rcond=None)[0]
        structure[sel] = fitted
        ss, df1 = ss + float(fitted @ fitted), df1 + k
        if k == 3:
            ends = (x == x.min()) | (x == x.max())
            edges.append((c, -float(fitted[ends].mean()), -float(fitted[~ends].mean())))
    p = _p_f(ss, df1, sigma, dof)
    size = math.sqrt(float(structure @ structure) / len(resid)) / sigma
    misfits = p < MISFIT_LEVEL and size >= MATERIAL
    return Goodness("approach3", misfits, p, size, _approach3_words(misfits, p, size, sigma, edges))


def _approach3_words(misfits: bool, p: float, size: float, sigma: float, edges: list) -> str:
    """The evidence: how far the surface runs from the data at the budgets' edges and middles."""
    head = "Approach 3 misfits" if misfits else "Approach 3 fits"
    text = f"{head} (lack of fit p={p:.2g}; its residuals' structure is {size:.1f}x the noise {sigma:.2g})"
    if not edges:
        return text
    at_edges = np.array([e for _, e, _ in edges])
    sign = 1.0 if np.median(at_edges) >= 0 else -1.0
    same = [(c, e, m) for c, e, m in edges if e * sign > 0]
    where = "above" if sign > 0 else "below"
    return text + (
        f": at the edges of {len(same)} of {len(edges)} budgets the surface runs "
        f"{float(np.median([e for _, e, _ in same])):+.3g} {where} the data, "
        f"at their middles {float(np.median([m for _, _, m in same])):+.3g}"
    )


def approach2_goodness(params, loss, budget, per_budget: list[BudgetFit], sigma: float | None, dof: int):
    """Approach 2's curves against the noise within their windows: per accepted budget with 5 sizes
    or more there, the residual of its vertex's curve beyond a quartic's, pooled as F(terms, dof).
    None without noise or without a budget to test."""
    if sigma is None or not sigma > 0 or dof < 1:
        return None
    params, loss, budget = (np.asarray(v, float) for v in (params, loss, budget))
    ss, df1, n, worst = 0.0, 0, 0, []
    for f in per_budget:
        if not f.accepted:
            continue
        sel = (budget == f.budget) & np.array([f.in_window(v, curve=True) for v in params])
        x, y = np.log10(params[sel]), loss[sel]
        sizes = len(np.unique(np.round(x, 12)))
        if sizes < 5:
            continue
        used = 4 if f.vertex_curve == "cubic" else 3
        rss = [_rss(x, y, k) for k in (used, min(5, sizes))]
        extra, k = max(rss[0] - rss[1], 0.0), min(5, sizes) - used
        if k < 1:
            continue
        ss, df1, n = ss + extra, df1 + k, n + len(y)
        worst.append((_p_f(extra, k, sigma, dof), f.budget))
    if not df1:
        return None
    p = _p_f(ss, df1, sigma, dof)
    size = math.sqrt(ss / n) / sigma
    misfits = p < MISFIT_LEVEL and size >= MATERIAL
    bad = [budget_text(c) for q, c in sorted(worst) if q < MISFIT_LEVEL]
    head = "Approach 2 misfits" if misfits else "Approach 2 fits"
    text = f"{head} (lack of fit within the windows p={p:.2g}; its departure is {size:.1f}x the noise {sigma:.2g})"
    if bad:
        where = ", ".join(bad[:4])
        text += f": {len(bad)} of {len(worst)} budgets' curves depart from their form near the minimum ({where})"
    return Goodness("approach2", misfits, p, size, text)


def _rss(x: np.ndarray, y: np.ndarray, k: int) -> float:
    """Residual sum of squares of a polynomial with k coefficients in centred x."""
    design = np.vander(x - x.mean(), k)
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    return float(((y - design @ coef) ** 2).sum())


def tested_against(
    reference: tuple[float | None, int], sigma: float, dof: int, per_budget: list[BudgetFit] = (), min_dof: int = 3
) -> tuple[float, int]:
    """The noise both tests compare with: the largest of the model-free reference (where it has
    min_dof degrees of freedom), the budgets' parabola residuals as the verdict's noise takes them
    (a median over budgets, `diagnostics.noise_estimate`) and those residuals pooled (every window's
    sum of squares over every window's degrees of freedom). A median of budgets of 5 sizes or a few
    third differences comes out low by chance; an approach is called a misfit only against the
    largest, so noise is not taken for misfit."""
    options = [(sigma, dof)]
    if reference[0] is not None and reference[0] > 0 and reference[1] >= min_dof:
        options.append((float(reference[0]), int(reference[1])))
    windows = [f for f in per_budget if f.window_residual_ss is not None and f.n_window and f.n_window > 3]
    pooled_dof = sum(f.n_window - 3 for f in windows)
    if pooled_dof >= min_dof:
        options.append((math.sqrt(sum(f.window_residual_ss for f in windows) / pooled_dof), pooled_dof))
    return max(options)


def judge(method: str, n, d, loss, budget, a2, a3_fit, noise: tuple[float, int]) -> tuple[Speakers, dict]:
    """Both tests on one fit's runs and the rule's decision: (Speakers, {approach: Goodness or None}).

    `a2` is the `Approach2Result` (None when not fitted), `a3_fit` the `Approach3Fit` (None when
    not fitted or unusable), `noise` (sigma, dof) from `tested_against`."""
    sigma, dof = noise
    tests: dict[str, Goodness | None] = {"approach2": None, "approach3": None}
    if a2 is not None and method in ("approach2", "both"):
        tests["approach2"] = approach2_goodness(n, loss, budget, a2.per_budget, sigma, dof)
    if a3_fit is not None and a3_fit.converged and method in ("approach3", "both"):
        with np.errstate(all="ignore"):
            predicted = a3_fit.surface.loss(np.asarray(n, float), np.asarray(d, float))
        if np.all(np.isfinite(predicted)):
            tests["approach3"] = approach3_goodness(n, loss, budget, predicted, sigma, dof)
    return speakers(method, tests), tests
