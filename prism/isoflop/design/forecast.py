"""Identifiability forecast: can a planned study determine the exponent a, before it runs?

Simulate the study many times: the planned (N, D) of every run, the loss a surface
L(N, D) predicts there, plus Gaussian noise; fit each simulated study and look at
the spread of the fitted `a` (its 10th-90th percentile is the interval a calibrated
fit would report on average: the fit's own interval covers at its nominal rate).

Which surface and noise:
- With a previous round (`prior_from_fit`): its fitted surface (Approach 3 when it
  converged) and the noise it measured.
- Without one (`forecast_plan`): nobody knows the surface, so a range of plausible
  ones is simulated: exponents alpha and beta across the published range (0.25-0.45,
  so a = beta / (alpha + beta) from 0.36 to 0.64), the reducible loss at the grid's
  centre 30% or 60% of the loss, noise 0.5%, 1% or 2% of the loss (relative: the
  loss scale of a study is not known in advance either). Each surface's optimum
  passes through the plan's centre at the middle budget with its own exponent, so a
  grid centred on a wrong prior drifts off the optimum at the other budgets, as it
  would. The forecast reports the median and the pessimistic (90th percentile over
  surfaces) expected width, and calls the exponent determined only when the median
  surface determines it.
Two budgets are never determined: the power law through two minima has no degree of
freedom, so nothing would measure how far it could move.

What is fitted, and why: Approach 2 (per-budget parabolas, then the power law), in
closed form and batched over all simulations at once (milliseconds per surface). It
is the approach that fails first when the N spread is small or the grid is off the
optimum (no minimum, an edge minimum), which is what a plan must catch; Approach 3
would cost 200 nonlinear fits a surface. The same per-budget rules as the real fit
apply (>= 3 distinct N, positive curvature, vertex inside the sampled range) and the
same N-spread, signal-to-noise and minimum-budget thresholds.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

import numpy as np

from prism.core.ids import format_budget
from prism.isoflop.fit import approach2, diagnostics, parabola
from prism.isoflop.fit.result import FitResult
from prism.isoflop.records import CI_LEVEL, Surface

DEFAULT_SIMULATIONS = 200
# A budget must give a usable vertex in at least this share of simulated studies.
MIN_ACCEPT_RATE = 0.8
# The plausible surfaces of a first round (see the module docstring).
RANGE_ALPHA = (0.25, 0.35, 0.45)
RANGE_BETA = (0.25, 0.35, 0.45)
RANGE_REDUCIBLE = (0.3, 0.6)
RANGE_REL_NOISE = (0.005, 0.01, 0.02)
PESSIMISTIC_QUANTILE = 0.9


@dataclass(frozen=True)
class BudgetForecast:
    budget: float
    n_runs: int
    n_spread_decades: float
    accept_rate: float
    snr: float
    n_opt_true: float | None


@dataclass(frozen=True)
class Forecast:
    determined: bool
    reasons: list[str]
    noise: float
    n_sims: int
    ci_level: float
    a_noise_free: float | None
    a_median: float | None
    a_ci: tuple[float, float] | None
    a_ci_width: float | None
    usable_share: float
    prior: dict
    per_budget: list[BudgetForecast]
    # Over a range of plausible surfaces (first round): how many, and the median and
    # pessimistic expected widths; a single surface has 1, and both widths are its own.
    scenarios: int = 1
    a_ci_width_median: float | None = None
    a_ci_width_pessimistic: float | None = None
    noise_relative: float | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        out["a_ci"] = list(self.a_ci) if self.a_ci else None
        return out


def prior_surface(a: float, k: float, alpha: float = 0.3478, E: float = 1.8172, A: float = 482.01) -> Surface:
    """A Chinchilla-shaped surface (Epoch's E, A, alpha) whose 6ND optimum is N_opt = k C^a.

    beta follows from a = beta / (alpha + beta); B from Hoffmann et al.'s
    G = (alpha A / (beta B))^(1/(alpha+beta)) with N_opt = G (C/6)^a.
    """
    if not 0 < a < 1:
        raise ValueError(f"prior exponent a must be in (0, 1), got {a}")
    beta = alpha * a / (1 - a)
    g = k * 6.0**a
    b = alpha * A / (beta * g ** (alpha + beta))
    return Surface(E=E, A=A, B=b, alpha=alpha, beta=beta)


def forecast(
    params,
    tokens,
    budget,
    surface: Surface,
    noise: float | None = None,
    n_sims: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
    max_ci_width: float = diagnostics.MAX_CI_WIDTH,
    min_spread: float = diagnostics.MIN_SPREAD_DECADES,
) -> Forecast:
    """Simulate and fit the planned grid `n_sims` times; say whether `a` is determined and why not.

    `noise` is the loss noise's std; None: diagnostics.REL_NOISE of the median predicted loss.
    """
    params, tokens, budget = (np.asarray(v, dtype=float) for v in (params, tokens, budget))
    truth = surface.loss(params, tokens)
    rel = None
    if noise is None:
        rel = diagnostics.REL_NOISE
        noise = rel * float(np.median(truth))
    rng = np.random.default_rng(seed)
    budgets = np.unique(budget)
    vertices, accepted, per_budget = [], [], []
    for c in budgets:
        sel = budget == c
        x = np.log10(params[sel])
        y = truth[sel][None, :] + noise * rng.standard_normal((n_sims, int(sel.sum())))
        coef, distinct = parabola.parabola_batch(x, y)
        lo, hi = np.full(n_sims, x.min()), np.full(n_sims, x.max())
        xv, _, code = parabola.vertex_and_verdict(coef, distinct, lo, hi)
        ok = code == parabola.OK
        vertices.append(np.where(ok, xv, np.nan))
        accepted.append(ok)
        clean, dclean = parabola.parabola_batch(x, truth[sel][None, :])
        grid = np.linspace(x.min(), x.max(), 64)
        curve = clean[0, 0] + clean[0, 1] * grid + clean[0, 2] * grid**2 if dclean[0] >= 3 else np.zeros(1)
        xv0, _, code0 = parabola.vertex_and_verdict(clean, dclean, lo[:1], hi[:1])
        per_budget.append(
            BudgetForecast(
                budget=float(c),
                n_runs=int(sel.sum()),
                n_spread_decades=float(x.max() - x.min()),
                accept_rate=float(ok.mean()),
                snr=float((curve.max() - curve.min()) / noise),
                n_opt_true=float(10 ** xv0[0]) if code0[0] == parabola.OK else None,
            )
        )
    log_c = np.log10(budgets)
    xv, ok = np.stack(vertices, 1), np.stack(accepted, 1)
    _, a = parabola.power_law_batch(log_c, xv, ok)
    usable = np.isfinite(a)
    clean_fit = approach2.fit_approach2(params, tokens, truth, budget)
    a0 = clean_fit.n_law.exponent if clean_fit.n_law else None
    a_ci = None
    if usable.any():
        lo, hi = np.quantile(a[usable], [(1 - CI_LEVEL) / 2, (1 + CI_LEVEL) / 2])
        a_ci = (float(lo), float(hi))
    determined, reasons = _verdict(per_budget, a_ci, float(usable.mean()), max_ci_width, min_spread)
    return Forecast(
        determined=determined,
        reasons=reasons,
        noise=noise,
        n_sims=n_sims,
        ci_level=CI_LEVEL,
        a_noise_free=a0,
        a_median=float(np.median(a[usable])) if usable.any() else None,
        a_ci=a_ci,
        a_ci_width=(a_ci[1] - a_ci[0]) if a_ci else None,
        usable_share=float(usable.mean()),
        prior=asdict(surface) | {"a": surface.a},
        per_budget=per_budget,
        a_ci_width_median=(a_ci[1] - a_ci[0]) if a_ci else None,
        a_ci_width_pessimistic=(a_ci[1] - a_ci[0]) if a_ci else None,
        noise_relative=rel,
    )


def _verdict(per_budget, a_ci, usable_share, max_ci_width, min_spread) -> tuple[bool, list[str]]:
    reasons = []
    good = 0
    for f in per_budget:
        c = format_budget(f.budget)
        if f.n_spread_decades < min_spread:
            reasons.append(
                f"N spread {f.n_spread_decades:.2f} decades at {c}: exponent undetermined; add a larger backbone"
            )
        elif f.accept_rate < MIN_ACCEPT_RATE:
            reasons.append(
                f"at {c} only {100 * f.accept_rate:.0f}% of simulated studies give a minimum inside the grid "
                f"(signal {f.snr:.1f}x the noise): widen or re-centre the grid"
            )
        else:
            good += 1
    if good < diagnostics.MIN_BUDGETS:
        reasons.insert(
            0,
            f"{good} budget(s) give a minimum inside the grid in at least {MIN_ACCEPT_RATE:.0%} of "
            f"simulated studies; the exponent needs at least {diagnostics.MIN_BUDGETS} (through 2 "
            "minima the power law has no degree of freedom)",
        )
    if a_ci is None:
        reasons.insert(0, "no simulated study gives an exponent")
    elif a_ci[1] - a_ci[0] > max_ci_width:
        reasons.insert(
            0,
            f"expected {int(100 * CI_LEVEL)}% interval of a is {a_ci[1] - a_ci[0]:.3f} wide (> {max_ci_width})",
        )
    if usable_share < MIN_ACCEPT_RATE:
        reasons.append(f"only {100 * usable_share:.0f}% of simulated studies give an exponent at all")
    determined = (
        good >= diagnostics.MIN_BUDGETS
        and a_ci is not None
        and a_ci[1] - a_ci[0] <= max_ci_width
        and usable_share >= MIN_ACCEPT_RATE
    )
    if determined:
        reasons.insert(
            0,
            f"expected {int(100 * CI_LEVEL)}% interval of a is {a_ci[1] - a_ci[0]:.3f} wide "
            f"(<= {max_ci_width}) with {good} usable budgets",
        )
    return determined, reasons


def scenario_surface(
    alpha: float, beta: float, reducible: float, a_centre_budget: float, n_centre: float, E: float = 1.0
) -> Surface:
    """A surface with exponents (alpha, beta) whose 6ND optimum at `a_centre_budget` is `n_centre`,
    where the reducible loss is `reducible` of the loss (E sets the scale; noise is relative to it)."""
    a = beta / (alpha + beta)
    d_centre = a_centre_budget / (6.0 * n_centre)
    # At the optimum beta B / D^beta = alpha A / N^alpha, so the reducible loss is
    # A / N^alpha (1 + alpha / beta).
    term_n = reducible / (1.0 - reducible) * E / (1.0 + alpha / beta)
    A = term_n * n_centre**alpha
    B = alpha / beta * term_n * d_centre**beta
    s = Surface(E=E, A=A, B=B, alpha=alpha, beta=beta)
    assert abs(s.a - a) < 1e-12
    return s


def forecast_range(
    params,
    tokens,
    budget,
    centre_a: float,
    centre_k: float,
    n_sims: int = 100,
    seed: int = 0,
    max_ci_width: float = diagnostics.MAX_CI_WIDTH,
) -> Forecast:
    """The first round's forecast: the plan simulated on every plausible surface (module docstring)."""
    params, tokens, budget = (np.asarray(v, dtype=float) for v in (params, tokens, budget))
    budgets = np.unique(budget)
    c_mid = float(10 ** np.mean(np.log10(budgets)))
    n_mid = centre_k * c_mid**centre_a
    runs = []
    for i, (alpha, beta, red, rel) in enumerate(
        itertools.product(RANGE_ALPHA, RANGE_BETA, RANGE_REDUCIBLE, RANGE_REL_NOISE)
    ):
        surface = scenario_surface(alpha, beta, red, c_mid, n_mid)
        noise = rel * float(np.median(surface.loss(params, tokens)))
        fc = forecast(
            params, tokens, budget, surface, noise=noise, n_sims=n_sims, seed=seed + i, max_ci_width=max_ci_width
        )
        runs.append((fc, rel))
    widths = np.array([fc.a_ci_width if fc.a_ci_width is not None else np.inf for fc, _ in runs])
    order = np.argsort(widths, kind="stable")
    median_fc, median_rel = runs[order[len(order) // 2]]
    ranked = np.sort(widths)  # by rank, no interpolation: a width may be unbounded (inf)
    median_w = float(ranked[(len(ranked) - 1) // 2])
    pess_w = float(ranked[int(round(PESSIMISTIC_QUANTILE * (len(ranked) - 1)))])
    share = float(np.mean([fc.determined for fc, _ in runs]))
    level = int(100 * CI_LEVEL)
    summary = (
        f"over {len(runs)} plausible surfaces (alpha, beta {RANGE_ALPHA[0]}-{RANGE_ALPHA[-1]}, noise "
        f"{100 * RANGE_REL_NOISE[0]:g}-{100 * RANGE_REL_NOISE[-1]:g}% of the loss): expected {level}% interval of a "
        f"{_w(median_w)} wide (median), {_w(pess_w)} (pessimistic, {int(100 * PESSIMISTIC_QUANTILE)}th "
        f"percentile); determined on {100 * share:.0f}% of them"
    )
    determined = median_fc.determined and median_w <= max_ci_width
    reasons = [summary] + [r for r in median_fc.reasons if not r.startswith("expected")]
    if determined and pess_w > max_ci_width:
        reasons.append(
            f"on the pessimistic surfaces the interval exceeds {max_ci_width}: add budgets or runs to be safe"
        )
    return Forecast(
        determined=determined,
        reasons=reasons,
        noise=median_fc.noise,
        n_sims=n_sims,
        ci_level=CI_LEVEL,
        a_noise_free=median_fc.a_noise_free,
        a_median=median_fc.a_median,
        a_ci=median_fc.a_ci,
        a_ci_width=median_w if np.isfinite(median_w) else None,
        usable_share=median_fc.usable_share,
        prior={
            "range": {
                "alpha": list(RANGE_ALPHA),
                "beta": list(RANGE_BETA),
                "reducible": list(RANGE_REDUCIBLE),
                "noise_relative": list(RANGE_REL_NOISE),
            },
            "centre": {"a": centre_a, "k": centre_k},
            "median_surface": asdict(median_fc.prior) if not isinstance(median_fc.prior, dict) else median_fc.prior,
        },
        per_budget=median_fc.per_budget,
        scenarios=len(runs),
        a_ci_width_median=median_w if np.isfinite(median_w) else None,
        a_ci_width_pessimistic=pess_w if np.isfinite(pess_w) else None,
        noise_relative=median_rel,
    )


def _w(width: float) -> str:
    return f"{width:.3f}" if np.isfinite(width) else "unbounded"


@dataclass(frozen=True)
class Prior:
    """What a previous round's fit tells the next plan: the centre, the surface, the measured noise."""

    a: float
    k: float
    surface: Surface | None
    noise: float | None
    source: str


def prior_from_fit(fit: FitResult, source: str = "previous fit") -> Prior | None:
    """A FitResult (prism.isoflop.fitread reads one) as the next round's prior; None when it determined nothing."""
    if not fit.verdict.identifiable:
        return None
    noise = fit.diagnostics.noise if fit.diagnostics.noise_dof >= diagnostics.MIN_NOISE_DOF else None
    a3, a2 = fit.approach3, fit.approach2
    if a3 is not None and a3.converged and a3.a is not None and a3.k:
        return Prior(a3.a, a3.k, a3.surface, noise, f"{source} (Approach 3)")
    if a2 is not None and a2.a is not None and a2.k:
        return Prior(a2.a, a2.k, None, noise, f"{source} (Approach 2)")
    return None


def forecast_plan(
    params,
    tokens,
    budget,
    centre_a: float,
    centre_k: float,
    surface: Surface | None = None,
    noise: float | None = None,
    n_sims: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
) -> Forecast:
    """The plan's forecast: on the given surface (a previous round's) with its noise (or the given
    one, else relative to the loss); without a surface, over the range of plausible ones."""
    if surface is not None:
        return forecast(params, tokens, budget, surface, noise=noise, n_sims=n_sims, seed=seed)
    return forecast_range(params, tokens, budget, centre_a, centre_k, n_sims=max(50, n_sims // 2), seed=seed)
