"""Can this study determine the exponent? Noise, spread, signal and the verdict.

The rules (thresholds are module constants, quoted in every reason string):
- A budget only informs the exponent when its parabola was accepted, its runs
  span at least MIN_SPREAD_DECADES of N, and the loss difference its sizes make
  (the fitted parabola's range over the sampled N) is at least MIN_SNR times the
  noise. A study needs at least 2 such budgets.
- With a bootstrap, the interval of `a` must be narrower than MAX_CI_WIDTH. When the
  parabolas have fewer than MIN_NOISE_DOF residual degrees of freedom (3 runs per
  budget fit exactly), resampling runs cannot measure the uncertainty, and the
  interval is simulated instead (`prism.isoflop.fit`: the fitted surface plus noise).
- Approach 3 must have converged when it was run.
The noise is estimated from the parabola residuals (pooled over budgets, with
their degrees of freedom); with too few degrees of freedom the cluster's
measured noise DEFAULT_NOISE is assumed, and the report says so.
"""

from __future__ import annotations

import math

import numpy as np

from prism.isoflop.records import BudgetFit, format_budget

DEFAULT_NOISE = 0.012
MIN_SPREAD_DECADES = 0.1
MIN_SNR = 3.0
MAX_CI_WIDTH = 0.15
MIN_NOISE_DOF = 3


def noise_estimate(per_budget: list[BudgetFit]) -> tuple[float, int, str]:
    """(sigma, degrees of freedom, source): pooled parabola residual std, or the default."""
    fitted = [f for f in per_budget if f.coef is not None]
    dof = sum(f.n_points - 3 for f in fitted)
    if dof >= MIN_NOISE_DOF:
        sigma = math.sqrt(sum(f.residual_ss for f in fitted) / dof)
        return sigma, dof, "parabola residuals"
    return DEFAULT_NOISE, dof, f"assumed ({dof} residual degrees of freedom < {MIN_NOISE_DOF})"


def budget_table(per_budget: list[BudgetFit], sigma: float) -> list[dict]:
    """Per budget: N spread, signal and its ratio to the noise."""
    rows = []
    for f in per_budget:
        snr = None if f.signal is None else f.signal / max(sigma, 1e-12)
        rows.append(
            {
                "budget": f.budget,
                "n_points": f.n_points,
                "n_spread_decades": f.n_spread_decades,
                "signal": f.signal,
                "snr": snr,
                "accepted": f.accepted,
            }
        )
    return rows


def verdict(
    per_budget: list[BudgetFit],
    sigma: float,
    a_ci: tuple[float, float] | None,
    approach3_converged: bool | None,
    approach3_note: str = "",
) -> tuple[bool, list[str]]:
    """identifiable, and the reasons (failures when false, the evidence when true)."""
    narrow, rejected, weak, informative = [], [], [], []
    for f in per_budget:
        c = format_budget(f.budget)
        if f.n_spread_decades < MIN_SPREAD_DECADES:
            narrow.append(f"{f.n_spread_decades:.2f} decades at {c}")
        elif not f.accepted:
            rejected.append(f.reason)
        elif f.signal / max(sigma, 1e-12) < MIN_SNR:
            weak.append(f"{f.signal:.3g} ({f.signal / max(sigma, 1e-12):.1f}x) at {c}")
        else:
            informative.append(c)
    problems = []
    if narrow:
        problems.append(
            f"N spread {_few(narrow)} (< {MIN_SPREAD_DECADES} decades): exponent undetermined there; "
            "add a larger (or smaller) backbone"
        )
    if rejected:
        problems.append(f"{len(rejected)} budget(s) rejected: {_few(rejected, 4, '; ')}")
    if weak:
        problems.append(
            f"loss differences between sizes span {_few(weak)}, under {MIN_SNR:g}x the noise {sigma:.3g}: "
            "widen the N range"
        )
    reasons = []
    ok = True
    if len(informative) < 2:
        ok = False
        reasons.append(
            f"{len(informative)} informative budget(s) ({', '.join(informative) or 'none'}); "
            "the exponent needs at least 2"
        )
    if a_ci is not None and a_ci[1] - a_ci[0] > MAX_CI_WIDTH:
        ok = False
        reasons.append(f"interval of a is {a_ci[1] - a_ci[0]:.3f} wide (> {MAX_CI_WIDTH})")
    if approach3_converged is False:
        ok = False
        reasons.append(f"Approach 3 did not converge: {approach3_note}")
    if ok:
        reasons.append(f"{len(informative)} informative budgets ({', '.join(informative)})")
        if a_ci is not None:
            reasons.append(f"interval of a is {a_ci[1] - a_ci[0]:.3f} wide (<= {MAX_CI_WIDTH})")
    # Problems with single budgets are worth saying even when the study as a whole is fine.
    return ok, reasons + problems


def _few(items: list[str], n: int = 6, sep: str = ", ") -> str:
    """A list for one line: the first n items and how many more."""
    head = sep.join(items[:n])
    return head + (f" and {len(items) - n} more" if len(items) > n else "")


def approach_agreement(a2: float | None, a3: float | None, a2_on_a3_surface: float | None) -> dict:
    """How far the approaches disagree, and how much of it Approach 2's method bias explains.

    `a2_on_a3_surface` is Approach 2 run on the Approach 3 surface's noise-free
    losses at the very (N, D) points of the study: its difference from
    Approach 3's `a` is the bias Approach 2 has on this grid even without noise
    (large when alpha and beta differ, or the grid is wide or off-centre).
    """
    out = {
        "approach2_a": a2,
        "approach3_a": a3,
        "difference": None,
        "approach2_bias_expected": None,
        "note": "",
    }
    if a2 is None or a3 is None:
        out["note"] = "only one approach gave an exponent"
        return out
    out["difference"] = a2 - a3
    if a2_on_a3_surface is not None and np.isfinite(a2_on_a3_surface):
        bias = a2_on_a3_surface - a3
        out["approach2_bias_expected"] = bias
        explained = abs(out["difference"] - bias)
        out["note"] = (
            f"Approach 2 differs from Approach 3 by {a2 - a3:+.4f}; on Approach 3's own noise-free "
            f"surface sampled at these runs Approach 2 would be off by {bias:+.4f} (its method bias: "
            "the parabola in log N is not the true isoFLOP curve when alpha != beta or the grid is "
            f"wide/off-centre); the unexplained rest is {explained:.4f}. Prefer Approach 3 when it converged."
        )
    else:
        out["note"] = f"Approach 2 differs from Approach 3 by {a2 - a3:+.4f}"
    return out
