"""Identifiability forecast: can a planned study determine the exponent a, before it runs?

Simulate the study many times: the planned (N, D) of every run, the loss a prior
surface L(N, D) predicts there, plus Gaussian noise of the cluster's measured
std (0.012 by default); fit each simulated study and look at the spread of the
fitted `a`.

What is fitted, and why: Approach 2 (per-budget parabolas, then the power law),
in closed form and batched over all simulations at once (a few milliseconds for
200 studies). It is the approach that fails first when the N spread is small or
the grid is off the optimum (no minimum, an edge minimum), which is what a plan
must catch; Approach 3 would cost 200 nonlinear fits and, warm-started from the
truth, would understate exactly that failure. The same per-budget rules as the
real fit apply (>= 3 distinct N, positive curvature, vertex inside the sampled
range) and the same N-spread and signal-to-noise thresholds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from prism.isoflop import approach2, diagnostics
from prism.isoflop.records import CI_LEVEL, Surface, format_budget

DEFAULT_SIMULATIONS = 200
# A budget must give a usable vertex in at least this share of simulated studies.
MIN_ACCEPT_RATE = 0.8


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
    noise: float = 0.012,
    n_sims: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
    max_ci_width: float = diagnostics.MAX_CI_WIDTH,
    min_spread: float = diagnostics.MIN_SPREAD_DECADES,
) -> Forecast:
    """Simulate and fit the planned grid `n_sims` times; say whether `a` is determined and why not."""
    params, tokens, budget = (np.asarray(v, dtype=float) for v in (params, tokens, budget))
    truth = surface.loss(params, tokens)
    rng = np.random.default_rng(seed)
    budgets = np.unique(budget)
    vertices, accepted, per_budget = [], [], []
    for c in budgets:
        sel = budget == c
        x = np.log10(params[sel])
        y = truth[sel][None, :] + noise * rng.standard_normal((n_sims, int(sel.sum())))
        coef, distinct = approach2.parabola_batch(x, y)
        lo, hi = np.full(n_sims, x.min()), np.full(n_sims, x.max())
        xv, _, code = approach2.vertex_and_verdict(coef, distinct, lo, hi)
        ok = code == approach2.OK
        vertices.append(np.where(ok, xv, np.nan))
        accepted.append(ok)
        clean, dclean = approach2.parabola_batch(x, truth[sel][None, :])
        grid = np.linspace(x.min(), x.max(), 64)
        curve = clean[0, 0] + clean[0, 1] * grid + clean[0, 2] * grid**2 if dclean[0] >= 3 else np.zeros(1)
        xv0, _, code0 = approach2.vertex_and_verdict(clean, dclean, lo[:1], hi[:1])
        per_budget.append(
            BudgetForecast(
                budget=float(c),
                n_runs=int(sel.sum()),
                n_spread_decades=float(x.max() - x.min()),
                accept_rate=float(ok.mean()),
                snr=float((curve.max() - curve.min()) / noise),
                n_opt_true=float(10 ** xv0[0]) if code0[0] == approach2.OK else None,
            )
        )
    log_c = np.log10(budgets)
    xv, ok = np.stack(vertices, 1), np.stack(accepted, 1)
    _, a = approach2.power_law_batch(log_c, xv, ok)
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
    if good < 2:
        reasons.insert(0, f"{good} budget(s) would give a usable minimum; the exponent needs at least 2")
    if a_ci is None:
        reasons.insert(0, "no simulated study gives an exponent")
    elif a_ci[1] - a_ci[0] > max_ci_width:
        reasons.insert(
            0,
            f"expected {int(100 * CI_LEVEL)}% interval of a is {a_ci[1] - a_ci[0]:.3f} wide (> {max_ci_width})",
        )
    if usable_share < MIN_ACCEPT_RATE:
        reasons.append(f"only {100 * usable_share:.0f}% of simulated studies give an exponent at all")
    determined = good >= 2 and a_ci is not None and a_ci[1] - a_ci[0] <= max_ci_width and usable_share >= MIN_ACCEPT_RATE
    if determined:
        reasons.insert(
            0,
            f"expected {int(100 * CI_LEVEL)}% interval of a is {a_ci[1] - a_ci[0]:.3f} wide "
            f"(<= {max_ci_width}) with {good} usable budgets",
        )
    return determined, reasons
