"""Approach 2: a parabola of loss in log10 N per IsoFLOP curve, then power laws in C.

Everything here is batched: the parabola solver takes a leading replicate axis,
so the point fit, the bootstrap (all replicates' resampling indices drawn at
once) and the planning forecast (all simulated studies at once) are the same
few numpy calls.

A budget is rejected, with the reason, when it has fewer than 3 distinct N,
when its curvature is not positive (no minimum), or when the parabola's
minimum lies outside the sampled N range (the losses still fall toward an edge:
the vertex is an extrapolation). D_opt on an accepted budget is read off the
budget's own N -> D relation (a line in log-log fitted to its runs), so it is
exact for C = 6ND and still right when frozen parts make FLOPs per token differ
from 6N.

A wide grid's IsoFLOP curve is not a parabola in log N (an under-trained tail at the
largest sizes rises faster than the flat side), and a parabola through all of it
misfits: its residuals are misfit, not noise, and the far tail moves its vertex. So
each budget's parabola is tested for lack of fit against the noise the runs show
locally (`reference_noise`: third differences of neighbouring sizes, which no smooth
curve survives), and with `window="auto"` the minimum is fitted on the largest window
of sizes around the lowest loss (at least WINDOW_MIN_SIZES) where that test no longer
detects misfit. `window="full"` is the parabola through every size.

Here: the window, the per-budget fits, the C-laws and their bootstrap, and the summary. The
batched solvers are `parabola.py`, the misfit tests `misfit.py`, the line through the minima
`linefit.py`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from prism.isoflop.fit import asymmetric
from prism.isoflop.fit.linefit import line_fit, power_law_curvature
from prism.isoflop.fit.misfit import (
    LACK_OF_FIT_LEVEL,
    WINDOW_MIN_SIZES,
    lack_of_fit_p,
    reference_noise,
    runs_test,
    size_means,
)
from prism.isoflop.fit.parabola import (
    MIN_POINTS,
    NOT_CONVEX,
    OK,
    TOO_FEW,
    parabola,
    parabola_batch,
    power_law_batch,
    vertex_and_verdict,
)
from prism.isoflop.fit.result import Approach2Summary, Band, Minimum
from prism.isoflop.records import CI_LEVEL, BudgetFit, PowerLaw

WINDOWS = ("auto", "full")
# A wider window is kept while its vertex stays within this many standard errors of every smaller one's.
WINDOW_K = 2.0


def _centred(ux: np.ndarray, j: int, k: int) -> tuple[float, float]:
    i0 = min(max(j - (k - 1) // 2, 0), len(ux) - k)
    return float(ux[i0]), float(ux[i0 + k - 1])


def choose_window(
    x: np.ndarray,
    y: np.ndarray,
    sigma: float | None,
    dof: int,
    level: float = LACK_OF_FIT_LEVEL,
    p_full: float | None = None,
) -> tuple[float, float, float | None, float | None]:
    """(lo, hi) in log10 N of the window of sizes around the lowest-loss size the minimum is
    fitted on, with the p of the parabola's lack of fit over the full grid and over the window.

    The full grid when its parabola shows no lack of fit (or it cannot be tested). Otherwise
    windows of WINDOW_MIN_SIZES sizes and more, centred on the lowest mean loss as far as the
    grid's edges allow: the largest one whose parabola shows no lack of fit and whose vertex
    stays within WINDOW_K standard errors of every smaller window's (the intervals intersect:
    a vertex the tail moves leaves the smaller windows' intervals before the misfit shows in
    the residuals).
    """
    ux, means, _, _ = size_means(x, y)
    m = len(ux)
    if p_full is None:
        p_full = lack_of_fit_p(x, y, sigma, dof)
    if p_full is None or p_full >= level or m <= WINDOW_MIN_SIZES:
        return float(ux[0]), float(ux[-1]), p_full, p_full
    j = int(np.argmin(means))
    best = None
    lo_int, hi_int = -np.inf, np.inf
    for k in range(WINDOW_MIN_SIZES, m + 1):
        lo, hi = _centred(ux, j, k)
        sel = (x >= lo - 1e-9) & (x <= hi + 1e-9)
        coef, distinct = parabola_batch(x[sel], y[sel][None])
        c0, c1, c2 = coef[0]
        p = lack_of_fit_p(x[sel], y[sel], sigma, dof)
        if not (c2 > 0):
            if best is None:
                best = (lo, hi, p)
            break
        xv = -c1 / (2 * c2)
        se = sigma * math.sqrt(max(_vertex_var_unit(x[sel], coef[0]), 0.0))
        lo_int, hi_int = max(lo_int, xv - WINDOW_K * se), min(hi_int, xv + WINDOW_K * se)
        if lo_int > hi_int or (p is not None and p < level and best is not None):
            break
        best = (lo, hi, p)
    lo, hi, p = best
    return lo, hi, p_full, p


def _reason(
    code: int,
    budget: float,
    xv: float,
    c2: float,
    x_lo: float,
    x_hi: float,
    n: int,
    distinct: int,
    windowed: bool = False,
    p_full: float | None = None,
) -> str:
    c = budget_text(budget)
    if code == OK:
        return "ok"
    if code == TOO_FEW:
        return f"{c}: {distinct} distinct N ({n} runs); a parabola needs at least {MIN_POINTS}"
    where = f"the {distinct} sizes around the lowest loss" if windowed else "the sampled sizes"
    if code == NOT_CONVEX:
        return f"{c}: no minimum: curvature {c2:.3g} <= 0 over {where}; the grid is too narrow there or noise dominates"
    side = "larger" if xv > x_hi else "smaller"
    text = f"{c}: parabola minimum at N={10**xv:.3g} is outside the sampled range [{10**x_lo:.3g}, {10**x_hi:.3g}]"
    if windowed:
        return text + f" of {where} (the lowest loss is at the grid's edge: no minimum inside it); add {side} N"
    if p_full is not None and p_full < LACK_OF_FIT_LEVEL:
        return text + (
            f": a tail-driven vertex (the parabola misfits this grid, lack of fit p={p_full:.2g}; "
            "--span auto fits the sizes near the minimum)"
        )
    return text + f" (loss still falls toward the edge); add {side} N"


def budget_text(budget: float) -> str:
    """A budget for people: three significant digits (`4.37e17`); run ids keep `format_budget`."""
    mantissa, exponent = f"{float(budget):.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def fit_budgets(
    params,
    tokens,
    loss,
    budget,
    window="full",
    level: float = LACK_OF_FIT_LEVEL,
    reference: tuple[float | None, int] | None = None,
    lean: bool = True,
) -> list[BudgetFit]:
    """The per-budget parabolas of the point fit, one BudgetFit per distinct budget (ascending).

    `window`: "full" (every size), "auto" (`choose_window`), or {budget: (lo, hi) log10 N}
    to refit on windows already chosen (Approach 2 on another surface at the same sizes).
    `reference` is the (sigma, dof) of the lack-of-fit test (default `reference_noise`). `lean`:
    read the minima off cubics where the curves lean (`_lean`); False, the parabolas' vertices.
    """
    params, tokens, loss, budget = (np.asarray(v, dtype=float) for v in (params, tokens, loss, budget))
    sigma_ref, dof_ref = reference if reference is not None else reference_noise(params, loss, budget)
    fits = []
    for c in np.unique(budget):
        sel = budget == c
        x_all, y_all, logd = np.log10(params[sel]), loss[sel], np.log10(tokens[sel])
        full, full_rss = _full_grid(x_all, y_all, sigma_ref, dof_ref)
        if isinstance(window, dict) and float(c) in window:
            w_lo, w_hi = window[float(c)]
            p_win = None
        elif window == "auto":
            w_lo, w_hi, _, p_win = choose_window(x_all, y_all, sigma_ref, dof_ref, level, full["lack_of_fit_p"])
        else:
            w_lo, w_hi, p_win = float(x_all.min()), float(x_all.max()), full["lack_of_fit_p"]
        in_win = (x_all >= w_lo - 1e-9) & (x_all <= w_hi + 1e-9)
        x, y = x_all[in_win], y_all[in_win]
        windowed = bool(in_win.sum() < len(x_all))
        lo, hi = float(x.min()), float(x.max())
        coef, distinct = parabola_batch(x, y[None])
        xv, lv, code = vertex_and_verdict(coef, distinct, np.array([lo]), np.array([hi]))
        coef, xv, lv, code, distinct = coef[0], float(xv[0]), float(lv[0]), int(code[0]), int(distinct[0])
        x_lo_all, x_hi_all = float(x_all.min()), float(x_all.max())
        common = dict(
            budget=float(c),
            n_points=int(sel.sum()),
            n_min=float(10**x_lo_all),
            n_max=float(10**x_hi_all),
            n_spread_decades=x_hi_all - x_lo_all,
            accepted=code == OK,
            reason=_reason(code, c, xv, coef[2], lo, hi, int(in_win.sum()), distinct, windowed, full["lack_of_fit_p"]),
            n_window=int(in_win.sum()),
            n_sizes=len(np.unique(np.round(x_all, 12))),
            window_sizes=distinct,
            window_n_min=float(10**lo),
            window_n_max=float(10**hi),
            window_lack_of_fit_p=p_win,
            **full,
        )
        if code == TOO_FEW:
            fits.append(BudgetFit(**common))
            continue
        fitted = parabola(coef, x)
        rss = float(((y - fitted) ** 2).sum())
        grid = np.linspace(lo, hi, 64)
        curve = parabola(coef, grid)
        extra = dict(
            coef=tuple(float(v) for v in coef),
            residual_ss=full_rss,
            window_residual_ss=rss,
            signal=float(curve.max() - curve.min()),
        )
        if code == OK:
            extra.update(
                n_opt=float(10**xv),
                d_opt=float(10 ** _d_at(x_all, logd, xv)),
                loss_min=lv,
                vertex_var_unit=_vertex_var_unit(x, coef),
                d_slope=_d_slope(x_all, logd),
            )
        fits.append(BudgetFit(**common, **extra))
    return _lean(fits, params, tokens, budget, loss, sigma_ref, dof_ref) if lean else fits


def _lean(fits: list[BudgetFit], params, tokens, budget, loss, sigma: float | None, dof: int) -> list[BudgetFit]:
    """The fits with each accepted budget's minimum read off a cubic in log N where the budgets'
    windows lean together (`asymmetric`): every budget's cubic p recorded, its vertex moved only
    where the pooled test detects the lean and the cubic has a minimum inside the window."""
    if sigma is None:
        return fits
    windows, ts = {}, []
    for f in fits:
        if not f.accepted:
            continue
        sel = (budget == f.budget) & np.array([f.in_window(n) for n in params])
        x, y = np.log10(params[sel]), loss[sel]
        t = asymmetric.cubic_t(x, y, sigma)
        if t is not None:
            windows[f.budget] = (x, y, t, np.log10(params[budget == f.budget]), np.log10(tokens[budget == f.budget]))
            ts.append(t)
    from scipy import special  # noqa: PLC0415 lazy: scipy

    p = asymmetric.pooled_p(ts, dof)
    leans = p is not None and p < asymmetric.CUBIC_LEVEL
    out = []
    for f in fits:
        if f.budget not in windows:
            out.append(f)
            continue
        x, y, t, x_all, logd = windows[f.budget]
        own_p = float(special.fdtrc(1, dof, t * t))
        sel = budget == f.budget
        lo, hi = _cubic_window(x_all, loss[sel], x, sigma, dof) if leans else (None, None)
        found = asymmetric.vertex(*_within(x_all, loss[sel], lo, hi)) if leans else None
        if found is None:
            out.append(dataclasses.replace(f, cubic_p=own_p))
            continue
        xv, lv, var = found
        out.append(
            dataclasses.replace(
                f,
                cubic_p=own_p,
                vertex_curve="cubic",
                n_opt=float(10**xv),
                d_opt=float(10 ** _d_at(x_all, logd, xv)),
                loss_min=lv,
                vertex_var_unit=var,
                cubic_n_min=float(10**lo),
                cubic_n_max=float(10**hi),
            )
        )
    return out


def _within(x: np.ndarray, y: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    sel = (x >= lo - 1e-9) & (x <= hi + 1e-9)
    return x[sel], y[sel]


def _cubic_window(x: np.ndarray, y: np.ndarray, x_win: np.ndarray, sigma: float, dof: int) -> tuple[float, float]:
    """(lo, hi) log10 N of the cubic's window: the widest centred on the lowest loss, from the
    parabola's window up, where the cubic shows no lack of fit. The cubic absorbs the lean that
    made the parabola's window narrow, and a cubic on few sizes places its vertex poorly."""
    ux, means, _, _ = size_means(x, y)
    j = int(np.argmin(means))
    best = (float(x_win.min()), float(x_win.max()))
    for k in range(len(np.unique(np.round(x_win, 12))) + 1, len(ux) + 1):
        lo, hi = _centred(ux, j, k)
        p = asymmetric.cubic_lack_of_fit_p(*_within(x, y, lo, hi), sigma, dof)
        if p is not None and p < LACK_OF_FIT_LEVEL:
            break
        best = (lo, hi)
    return best


def _full_grid(x: np.ndarray, y: np.ndarray, sigma_ref: float | None, dof_ref: int) -> dict:
    """What the parabola through every size of a budget says: for the report's comparison."""
    coef, distinct = parabola_batch(x, y[None])
    out = dict(full_coef=None, full_n_opt=None, lack_of_fit_p=None, residual_signs=None, runs_p=None)
    if distinct[0] < MIN_POINTS:
        return out, 0.0
    xv, _, code = vertex_and_verdict(coef, distinct, np.array([x.min()]), np.array([x.max()]))
    resid = y - parabola(coef[0], x)
    signs, runs_p = runs_test(x, resid)
    out.update(
        full_coef=tuple(float(v) for v in coef[0]),
        full_n_opt=float(10 ** xv[0]) if code[0] == OK else None,
        lack_of_fit_p=lack_of_fit_p(x, y, sigma_ref, dof_ref),
        residual_signs=signs,
        runs_p=runs_p,
    )
    return out, float((resid**2).sum())


def _vertex_var_unit(x: np.ndarray, coef) -> float:
    """Var(x*) / sigma^2 of the vertex x* = -c1 / (2 c2): gradient' (X'X)^-1 gradient (delta method)."""
    design = np.stack([np.ones_like(x), x, x * x], 1)
    _, c1, c2 = coef
    grad = np.array([0.0, -1.0 / (2 * c2), c1 / (2 * c2 * c2)])
    return float(grad @ np.linalg.pinv(design.T @ design) @ grad)


def _d_slope(x: np.ndarray, logd: np.ndarray) -> float:
    return float(np.polyfit(x, logd, 1)[0]) if np.ptp(x) > 1e-12 else 0.0


def _d_at(x: np.ndarray, logd: np.ndarray, xv) -> np.ndarray:
    """log10 D at log10 N = xv from the budget's own log-log N -> D line."""
    if np.ptp(x) < 1e-12:
        return np.full_like(np.asarray(xv, dtype=float), logd.mean())
    slope, icpt = np.polyfit(x, logd, 1)
    return icpt + slope * np.asarray(xv)


@dataclass(frozen=True)
class Approach2Result:
    per_budget: list[BudgetFit]
    n_law: PowerLaw | None
    d_law: PowerLaw | None
    n_boot: int
    n_boot_used: int
    reason: str
    # The replicates of the within-budget bootstrap (None without one): a, b, log10 k, log10 k_d,
    # and the per-budget log10 N_opt, log10 D_opt (n_boot x accepted budgets; NaN where rejected).
    boot: dict | None = None
    window: str = "full"
    # (sigma, dof) of `reference_noise`: what the lack-of-fit tests compared with
    reference: tuple[float | None, int] = (None, 0)

    @property
    def accepted(self) -> list[BudgetFit]:
        return [f for f in self.per_budget if f.accepted]


def fit_approach2(
    params,
    tokens,
    loss,
    budget,
    n_boot: int = 0,
    seed: int = 0,
    level: float = CI_LEVEL,
    window="full",
    reference: tuple[float | None, int] | None = None,
    lean: bool = True,
) -> Approach2Result:
    """Point fit, then (n_boot > 0) the stratified bootstrap: runs resampled within each accepted
    budget's window.

    The PowerLaw intervals here are the bootstrap's alone (noise within budgets);
    `summarize` combines them with the regression over the minima. `window` and `lean` as `fit_budgets`.
    """
    params, tokens, loss, budget = (np.asarray(v, dtype=float) for v in (params, tokens, loss, budget))
    if reference is None:
        reference = reference_noise(params, loss, budget)
    per_budget = fit_budgets(params, tokens, loss, budget, window, reference=reference, lean=lean)
    mode = window if isinstance(window, str) else "given"
    acc = [f for f in per_budget if f.accepted]
    if len(acc) < 2:
        why = f"{len(acc)} accepted budget(s); a power law in C needs at least 2"
        return Approach2Result(per_budget, None, None, n_boot, 0, why, window=mode, reference=reference)
    log_c = np.log10([f.budget for f in acc])
    logk_n, a = power_law_batch(log_c, np.log10([[f.n_opt for f in acc]]), np.ones((1, len(acc)), bool))
    logk_d, b = power_law_batch(log_c, np.log10([[f.d_opt for f in acc]]), np.ones((1, len(acc)), bool))
    n_used, a_ci, b_ci, n_band, d_band, boot = 0, None, None, None, None, None
    if n_boot > 0:
        boot = _bootstrap(params, tokens, loss, budget, acc, n_boot, seed)
        good = np.isfinite(boot["a"]) & np.isfinite(boot["b"])
        boot = {k: v[good] for k, v in boot.items()}
        n_used = int(good.sum())
        if n_used:
            a_ci = _interval(boot["a"], level)
            b_ci = _interval(boot["b"], level)
            n_band = _band(boot["logk_n"], boot["a"], log_c, level)
            d_band = _band(boot["logk_d"], boot["b"], log_c, level)
        else:
            boot = None
    budgets = [f.budget for f in acc]
    n_law = _law(logk_n[0], a[0], a_ci, budgets, n_band)
    d_law = _law(logk_d[0], b[0], b_ci, budgets, d_band)
    return Approach2Result(per_budget, n_law, d_law, n_boot, n_used, "ok", boot, window=mode, reference=reference)


def summarize(res: Approach2Result, level: float = CI_LEVEL, noise: float | None = None, noise_dof: int = 0):
    """The typed Approach 2 record: power laws with intervals that cover the line's uncertainty.

    The interval of each exponent (and of k) is `line_fit`'s: the regression over the
    per-budget minima, with each minimum's noise (`noise`, propagated through its parabola)
    pooled in. The within-budget bootstrap is reported beside it (`a_ci_bootstrap`) and
    gives each minimum's interval (`minima`), but does not set the exponent's interval:
    with 5-7 runs a budget its resamples often hold 3 distinct sizes, and its intervals
    over-cover.
    """
    acc = res.accepted
    if res.n_law is None or res.d_law is None:
        return Approach2Summary(
            a=None,
            b=None,
            k=None,
            k_d=None,
            a_ci=None,
            b_ci=None,
            k_ci=None,
            a_ci_regression=None,
            a_ci_bootstrap=None,
            b_ci_regression=None,
            b_ci_bootstrap=None,
            a_loo=None,
            b_loo=None,
            interval_method="",
            n_boot=res.n_boot,
            n_boot_used=res.n_boot_used,
            reason=res.reason,
            per_budget=res.per_budget,
        )
    log_c = np.log10([f.budget for f in acc])
    var_n = var_d = None
    if noise is not None and all(f.vertex_var_unit is not None for f in acc):
        var_n = np.array([noise**2 * f.vertex_var_unit for f in acc])
        var_d = var_n * np.array([(f.d_slope or 0.0) ** 2 for f in acc])
    n_line = line_fit(log_c, np.log10([f.n_opt for f in acc]), level, var_n, noise_dof)
    d_line = line_fit(log_c, np.log10([f.d_opt for f in acc]), level, var_d, noise_dof)
    method = f"regression over the {len(acc)} per-budget minima; their variance: {n_line.var_source}"
    return Approach2Summary(
        a=res.n_law.exponent,
        b=res.d_law.exponent,
        k=res.n_law.k,
        k_d=res.d_law.k,
        a_ci=n_line.slope_ci,
        b_ci=d_line.slope_ci,
        k_ci=None if n_line.icpt_ci is None else (10 ** n_line.icpt_ci[0], 10 ** n_line.icpt_ci[1]),
        a_ci_regression=n_line.slope_ci,
        a_ci_bootstrap=res.n_law.exponent_ci,
        b_ci_regression=d_line.slope_ci,
        b_ci_bootstrap=res.d_law.exponent_ci,
        a_loo=n_line.loo,
        b_loo=d_line.loo,
        interval_method=method,
        n_boot=res.n_boot,
        n_boot_used=res.n_boot_used,
        reason=res.reason,
        per_budget=res.per_budget,
        minima=_minima(acc, res.boot, level),
        band=_summary_band(res, n_line, d_line),
        curvature=power_law_curvature(log_c, np.log10([f.n_opt for f in acc])),
    )


def _minima(acc: list[BudgetFit], boot: dict | None, level: float) -> list[Minimum]:
    """Each accepted budget's minimum, with the within-budget bootstrap's interval where there is one."""
    minima = []
    for j, f in enumerate(acc):
        n_ci = d_ci = None
        if boot is not None:
            n_ci = _finite_interval(boot["xv"][:, j], level)
            d_ci = _finite_interval(boot["xd"][:, j], level)
        minima.append(
            Minimum(
                f.budget,
                f.n_opt,
                f.d_opt,
                None if n_ci is None else (10 ** n_ci[0], 10 ** n_ci[1]),
                None if d_ci is None else (10 ** d_ci[0], 10 ** d_ci[1]),
            )
        )
    return minima


def _summary_band(res: Approach2Result, n_line, d_line) -> Band:
    """The power laws' band over the accepted budgets: the regression's, else the bootstrap's."""
    acc = res.accepted
    if n_line.band_lo is not None and d_line.band_lo is not None:
        return Band(
            [f.budget for f in acc],
            list(10**n_line.band_lo),
            list(10**n_line.band_hi),
            list(10**d_line.band_lo),
            list(10**d_line.band_hi),
        )
    if res.n_law.band_lo:
        return Band([f.budget for f in acc], res.n_law.band_lo, res.n_law.band_hi, res.d_law.band_lo, res.d_law.band_hi)
    return Band()


def _finite_interval(v: np.ndarray, level: float):
    v = v[np.isfinite(v)]
    return _interval(v, level) if len(v) else None


def _law(logk, exponent, ci, budgets, band) -> PowerLaw:
    lo, hi = band if band is not None else ([], [])
    return PowerLaw(
        k=float(10**logk),
        exponent=float(exponent),
        exponent_ci=ci,
        band_budgets=list(budgets) if band is not None else [],
        band_lo=list(lo),
        band_hi=list(hi),
    )


def _interval(v: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(v, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _band(logk: np.ndarray, e: np.ndarray, log_c: np.ndarray, level: float):
    curves = logk[:, None] + e[:, None] * log_c[None, :]
    lo, hi = np.quantile(curves, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return [float(10**v) for v in lo], [float(10**v) for v in hi]


def _bootstrap(params, tokens, loss, budget, accepted: list[BudgetFit], n_boot: int, seed: int) -> dict:
    """All replicates at once: per budget one (n_boot, n) index draw and one batched parabola solve."""
    rng = np.random.default_rng(seed)
    xv_all, ok_all, xd_all = [], [], []
    for f in accepted:
        sel = budget == f.budget
        x, y, logd = np.log10(params[sel]), loss[sel], np.log10(tokens[sel])
        win = np.array([f.in_window(n, curve=True) for n in params[sel]], bool)
        x, y = x[win], y[win]
        idx = rng.integers(0, len(x), size=(n_boot, len(x)))
        xb, yb = x[idx], y[idx]
        if f.vertex_curve == "cubic":
            xv, ok = asymmetric.vertex_batch(xb, yb)
        else:
            coef, distinct = parabola_batch(xb, yb)
            xv, _, code = vertex_and_verdict(coef, distinct, xb.min(axis=1), xb.max(axis=1))
            ok = code == OK
        xv_all.append(np.where(ok, xv, np.nan))
        ok_all.append(ok)
        x_all = np.log10(params[sel])
        xd_all.append(np.where(ok, _d_at(x_all, logd, np.where(ok, xv, x.mean())), np.nan))
    log_c = np.log10([f.budget for f in accepted])
    xv, ok, xd = np.stack(xv_all, 1), np.stack(ok_all, 1), np.stack(xd_all, 1)
    logk_n, a = power_law_batch(log_c, xv, ok)
    logk_d, b = power_law_batch(log_c, xd, ok)
    return {"a": a, "b": b, "logk_n": logk_n, "logk_d": logk_d, "xv": xv, "xd": xd}
