"""Which approach may speak: each approach's lack of fit against the noise the runs measure.

Approach 3's form L = E + A/N^alpha + B/D^beta does not hold on every grid (an irreducible
loss that depends on size, an interaction of N and D), and Approach 2's parabola does
not hold over every window. A form that misfits the runs is not evidence that the
exponent is undetermined; it is a reason not to let that form decide. So each approach
is tested against the same noise, measured without either form (replicates and third
differences of neighbouring sizes, `misfit.reference_noise`; the budgets' parabola
residuals where no budget has 4 sizes), and only on the misfit that moves the answer:
with hundreds of runs any smooth structure is significant, and one that moves no minimum
moves no a.

- Approach 3: the optima its surface implies (the same curve each minimum was read off,
  fitted to the surface's noiseless loss over the same sizes) against the budgets' minima,
  in units of the minima's errors, about their common offset (an offset moves no a; a
  drift of the loss's level along C moves no optimum).
- Approach 2: each budget's next order (the tilt of a parabola, the lean of a cubic) within
  the window its minimum rests on, and how far it would move the minimum.

An approach misfits when its test's p is below MISFIT_LEVEL and the misfit is material: it
moves the minima by at least MATERIAL times their errors in root mean square.
Each method runs its own test (`MethodFit.goodness`); `speakers` turns the tests into the
verdict's rule, which the prediction shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prism.isoflop.fit.approach2 import budget_text
from prism.isoflop.fit.method import chosen
from prism.isoflop.records import BudgetFit

MISFIT_LEVEL = 0.01
MATERIAL = 1.0


@dataclass(frozen=True)
class Goodness:
    """One approach's lack-of-fit test: whether it misfits, its p, and the evidence in words."""

    approach: str
    misfits: bool
    p: float | None
    # root mean square of the misfit's effect on the minima, over their errors
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
    fitted = list(chosen(method))
    bad = [a for a in fitted if tests.get(a) is not None and tests[a].misfits]
    good = [a for a in fitted if a not in bad]
    reasons = tuple(tests[a].evidence for a in bad)
    if bad and not good:
        why = "; ".join(reasons)
        return Speakers((), (), reasons, f"no approach fits the runs: {why}")
    return Speakers(tuple(good), tuple(bad), reasons)


def _vertex_of(x: np.ndarray, y: np.ndarray, k: int, near: float | None = None) -> float | None:
    """log10 N at the minimum of the polynomial with k coefficients through (x, y): the one inside
    the sizes nearest `near` (their middle when None); None where the curve has no minimum there."""
    xm = float(x.mean())
    poly = np.poly1d(np.polyfit(x - xm, y, k - 1))
    slope, bend = poly.deriv(), poly.deriv(2)
    roots = [r.real + xm for r in np.atleast_1d(slope.roots) if abs(r.imag) < 1e-9 and bend(r.real) > 0]
    inside = [r for r in roots if x.min() - 1e-9 <= r <= x.max() + 1e-9]
    if not inside:
        return None
    target = xm if near is None else near
    return float(min(inside, key=lambda r: abs(r - target)))


def _curve_window(f: BudgetFit, params: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """The runs of budget f its minimum's curve was fitted on."""
    return np.flatnonzero((budget == f.budget) & np.array([f.in_window(v, curve=True) for v in params]))


def _minima(per_budget: list[BudgetFit], sigma: float):
    """The budgets whose minimum has an error: (fit, log10 N at the minimum, its standard error).

    The error takes the larger of the noise and the budget's own scatter about its parabola in the
    window: a budget whose runs scatter more (an outlier kept) places its minimum less surely."""
    out = []
    for f in per_budget:
        if f.accepted and f.n_opt and f.vertex_var_unit is not None and f.vertex_var_unit > 0:
            own = sigma
            if f.window_residual_ss is not None and f.n_window and f.n_window > 3:
                own = max(sigma, math.sqrt(f.window_residual_ss / (f.n_window - 3)))
            out.append((f, math.log10(f.n_opt), own * math.sqrt(f.vertex_var_unit)))
    return out


def approach3_goodness(params, budget, predicted, per_budget: list[BudgetFit], sigma: float | None, dof: int):
    """Whether Approach 3's surface puts each budget's optimum where the runs put their minimum.

    The same curve the minimum was read off (parabola or cubic, over the same sizes) is fitted to
    the surface's noiseless loss there, so the window's own bias cancels; the two vertices' gap over
    the minimum's standard error, summed in squares over the budgets, is chi-square with a degree
    of freedom each when the surface is right. A drift of the loss's level along C moves no vertex
    and is no misfit here. None without noise or without a minimum to compare."""
    if sigma is None or not sigma > 0 or dof < 1:
        return None
    params, budget, predicted = (np.asarray(v, float) for v in (params, budget, predicted))
    gaps = []
    for f, x_min, se in _minima(per_budget, sigma):
        sel = _curve_window(f, params, budget)
        x = np.log10(params[sel])
        k = 4 if f.vertex_curve == "cubic" else 3
        if len(np.unique(np.round(x, 12))) < k:
            continue
        x_surface = _vertex_of(x, predicted[sel], k, near=x_min)
        if x_surface is None and k == 4:
            x_surface = _vertex_of(x, predicted[sel], 3, near=x_min)
        gaps.append((f.budget, x_surface - x_min if x_surface is not None else None, se, x_min))
    usable = [row for row in gaps if row[1] is not None]
    if not gaps:
        return None
    if len(usable) < len(gaps) / 2:
        missing = len(gaps) - len(usable)
        text = f"Approach 3 misfits: its surface has no minimum within {missing} of {len(gaps)} budgets' sizes"
        return Goodness("approach3", True, 0.0, None, text)
    g, se, logc = (np.array([row[i] for row in usable], float) for i in (1, 2, 0))
    se = se * math.sqrt(_scatter(np.log10(logc), np.array([row[3] for row in usable]), se))
    w = 1.0 / se**2
    level = float((w * g).sum() / w.sum())
    z = (g - level) / se
    p = _p_chi2(float(z @ z), len(z) - 1, dof) if len(z) > 1 else 1.0
    size = math.sqrt(float(z @ z) / max(len(z) - 1, 1))
    misfits = p < MISFIT_LEVEL and size >= MATERIAL
    tilt = _tilt(np.log10(logc), g, w)
    return Goodness("approach3", misfits, p, size, _approach3_words(misfits, p, size, usable, level, tilt))


def _scatter(x: np.ndarray, y: np.ndarray, se: np.ndarray) -> float:
    """The minima's scatter about their own weighted line over their errors, in mean square (at
    least 1): where the minima stray from any power law beyond their errors (an outlier kept, a
    curve read off few sizes), those errors understate them, and the surface is judged against
    the minima's scatter, as Approach 2's own interval is."""
    if len(x) < 3 or np.ptp(x) == 0:
        return 1.0
    w = 1.0 / se**2
    design = np.stack([np.ones_like(x), x], axis=1) * np.sqrt(w)[:, None]
    coef = np.linalg.lstsq(design, y * np.sqrt(w), rcond=None)[0]
    resid = y * np.sqrt(w) - design @ coef
    return max(1.0, float(resid @ resid) / (len(x) - 2))


def _tilt(x: np.ndarray, g: np.ndarray, w: np.ndarray) -> float:
    """The weighted slope of the gaps along log10 C: how far the surface's a is from the minima's."""
    if len(x) < 2 or np.ptp(x) == 0:
        return 0.0
    xm = float((w * x).sum() / w.sum())
    return float((w * (x - xm) * g).sum() / (w * (x - xm) ** 2).sum())


def _p_chi2(ss: float, df: int, dof: int) -> float:
    """p of a sum of df squared standardised gaps whose noise was measured on dof degrees of
    freedom: F(df, dof)."""
    from scipy import special  # noqa: PLC0415 lazy: scipy

    return float(special.fdtrc(df, dof, ss / df))


def _approach3_words(misfits: bool, p: float, size: float, gaps: list, level: float, tilt: float) -> str:
    """The evidence: how far the surface's optima lie from the budgets' minima, and on which side."""
    head = "Approach 3 misfits" if misfits else "Approach 3 fits"
    text = (
        f"{head} (its optima's line against the budgets' minima p={p:.2g}, {size:.1f}x their errors "
        f"about a common offset of {level:+.3g} decades of N; the gaps tilt a by {tilt:+.3f})"
    )
    g = np.array([row[1] for row in gaps])
    sign = 1.0 if np.median(g) >= 0 else -1.0
    same = g[g * sign > 0]
    if not len(same):
        return text
    where = "above" if sign > 0 else "below"
    far = sum(abs(gap) > 2 * se for _, gap, se, _ in gaps)
    return text + (
        f": at {len(same)} of {len(g)} budgets its optimum lies {float(np.median(same)):+.3g} decades of N "
        f"{where} the minimum, beyond twice its error at {far}"
    )


def approach2_goodness(params, loss, budget, per_budget: list[BudgetFit], sigma: float | None, dof: int):
    """Whether Approach 2's curves misplace the minima: per accepted budget with 2 sizes beyond its
    curve's coefficients in the window, the next order's coefficient (the tilt of a parabola's
    residuals, the lean of a cubic's) tested against the noise, pooled as chi-square with one degree
    of freedom a budget; material when the vertex that order gives moves, in root mean square over
    the budgets, by the minima's standard errors. A symmetric flattening moves no vertex and is no
    misfit here. None without noise or without a budget to test."""
    if sigma is None or not sigma > 0 or dof < 1:
        return None
    params, loss, budget = (np.asarray(v, float) for v in (params, loss, budget))
    ts, shifts, bad = [], [], []
    for f, x_min, se in _minima(per_budget, sigma):
        sel = _curve_window(f, params, budget)
        x, y = np.log10(params[sel]), loss[sel]
        k = 4 if f.vertex_curve == "cubic" else 3
        if len(np.unique(np.round(x, 12))) < k + 2:
            continue
        design = np.vander(x - x.mean(), k + 1)
        coef = np.linalg.lstsq(design, y, rcond=None)[0]
        t = float(coef[0] / (sigma * math.sqrt(np.linalg.pinv(design.T @ design)[0, 0])))
        moved = _vertex_of(x, y, k + 1, near=x_min)
        ts.append(t)
        shifts.append((moved - x_min) / se if moved is not None else 0.0)
        if abs(t) > 2.58 and moved is not None and abs(moved - x_min) > se:
            bad.append(budget_text(f.budget))
    if not ts:
        return None
    t, z = np.array(ts), np.array(shifts)
    p = _p_chi2(float(t @ t), len(t), dof)
    size = math.sqrt(float(z @ z) / len(z))
    misfits = p < MISFIT_LEVEL and size >= MATERIAL
    head = "Approach 2 misfits" if misfits else "Approach 2 fits"
    text = f"{head} (its curves' tilt within the windows p={p:.2g}; it moves the minima {size:.1f}x their errors)"
    if bad:
        where = ", ".join(bad[:4])
        text += f": at {len(bad)} of {len(ts)} budgets the next order moves the minimum beyond its error ({where})"
    return Goodness("approach2", misfits, p, size, text)


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
