"""The fit stage: records in, one JSON-ready dict out (Approach 2, Approach 3, diagnostics).

`fit_records` is pure (records -> dict); `fit_csv` is the CLI's one call: read,
fit, write JSON and Markdown atomically.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from prism.errors import PrismError
from prism.isoflop import approach2, approach3, diagnostics
from prism.isoflop.records import CI_LEVEL, RunRecord, format_budget

METHODS = ("approach2", "approach3", "both")


def _arrays(records: list[RunRecord]):
    return tuple(np.array([getattr(r, k) for r in records], dtype=float) for k in ("params", "tokens", "loss", "budget"))


def _approach2_json(res: approach2.Approach2Result) -> dict:
    n, d = res.n_law, res.d_law
    return {
        "a": n.exponent if n else None,
        "a_ci": list(n.exponent_ci) if n and n.exponent_ci else None,
        "k": n.k if n else None,
        "b": d.exponent if d else None,
        "b_ci": list(d.exponent_ci) if d and d.exponent_ci else None,
        "k_d": d.k if d else None,
        "band": {
            "budgets": n.band_budgets if n else [],
            "n_opt_lo": n.band_lo if n else [],
            "n_opt_hi": n.band_hi if n else [],
            "d_opt_lo": d.band_lo if d else [],
            "d_opt_hi": d.band_hi if d else [],
        },
        "n_boot": res.n_boot,
        "n_boot_used": res.n_boot_used,
        "reason": res.reason,
        "per_budget": [f.to_json() for f in res.per_budget],
    }


def _approach3_json(fit, boot: np.ndarray | None, level: float) -> dict:
    s = fit.surface
    out = {
        "E": s.E,
        "A": s.A,
        "B": s.B,
        "alpha": s.alpha,
        "beta": s.beta,
        "a": s.a,
        "b": s.b,
        # N_opt = k * C^a and D_opt = C / (6 N_opt) when C = 6ND (Hoffmann et al. eq. 4).
        "k": float(s.n_opt(1.0)),
        "objective": fit.objective,
        "grad_norm": fit.grad_norm,
        "converged": fit.converged,
        "convergence_note": fit.convergence_note,
        "n_points": fit.n_points,
        "n_starts": fit.n_starts,
        "n_local": fit.n_local,
        "n_boot_used": 0,
    }
    for key in ("E", "A", "B", "alpha", "beta", "a", "b"):
        out[f"{key}_ci"] = None
    if boot is not None and len(boot):
        e, a_, b_, alpha, beta = boot.T
        cols = {"E": e, "A": a_, "B": b_, "alpha": alpha, "beta": beta, "a": beta / (alpha + beta), "b": alpha / (alpha + beta)}
        for key, v in cols.items():
            ci = approach3.interval(v, level)
            out[f"{key}_ci"] = list(ci) if ci else None
        out["n_boot_used"] = int(np.isfinite(cols["a"]).sum())
    return out


def fit_records(
    records: list[RunRecord],
    method: str = "both",
    n_boot: int = 1000,
    seed: int = 0,
    approach3_options: approach3.Approach3Options = approach3.Approach3Options(),
) -> dict:
    """Fit the runs; the result holds every number the JSON report needs."""
    if method not in METHODS:
        raise PrismError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    n, d, loss, budget = _arrays(records)
    a2 = approach2.fit_approach2(n, d, loss, budget, n_boot=n_boot, seed=seed)
    out: dict = {"method": method, "bootstrap": n_boot, "seed": seed, "ci_level": CI_LEVEL}
    if method in ("approach2", "both"):
        out["approach2"] = _approach2_json(a2)
    a3_fit = None
    if method in ("approach3", "both"):
        if len(records) < 5:
            out["approach3"] = {"converged": False, "reason": f"{len(records)} runs; 5 parameters need at least 5"}
        else:
            try:
                a3_fit = approach3.fit_approach3(n, d, loss, approach3_options)
                try:
                    boot = (
                        approach3.bootstrap_approach3(n, d, loss, a3_fit, n_boot, seed, approach3_options)
                        if n_boot > 0 else None
                    )
                except ArithmeticError:
                    boot = None  # resamples diverge: no interval rather than a crash
                out["approach3"] = _approach3_json(a3_fit, boot, CI_LEVEL)
            except ArithmeticError as err:
                # A coefficient ran off to 0 or infinity: the runs do not constrain L(N, D) (say so, do not crash).
                a3_fit = None
                out["approach3"] = {"converged": False,
                                    "reason": f"Approach 3 diverged ({err}): the runs do not constrain L(N, D)"}
    out["diagnostics"] = _diagnostics(a2, a3_fit, out, n, d, budget, records)
    return out


def _diagnostics(a2, a3_fit, out, n, d, budget, records) -> dict:
    sigma, dof, source = diagnostics.noise_estimate(a2.per_budget)
    a_ci, interval_source = None, None
    if "approach3" in out and out["approach3"].get("a_ci"):
        a_ci, interval_source = tuple(out["approach3"]["a_ci"]), "Approach 3 bootstrap over runs"
    elif a2.n_law is not None and a2.n_law.exponent_ci is not None:
        a_ci, interval_source = a2.n_law.exponent_ci, "Approach 2 bootstrap over runs"
    if dof < diagnostics.MIN_NOISE_DOF and a3_fit is not None and a_ci is not None:
        # Parabolas through 3 points fit them exactly: resampling such runs reproduces the same
        # vertices (a degenerate, too narrow interval). Simulate instead: the fitted surface at
        # these runs plus the assumed noise, refitted (the plan's forecast, on measured numbers).
        from prism.isoflop.forecast import forecast

        simulated = forecast(n, d, budget, a3_fit.surface, noise=sigma, seed=int(out.get("seed", 0)))
        # No interval (too few usable simulated studies): as undetermined as an infinitely wide one.
        a_ci = simulated.a_ci or (-math.inf, math.inf)
        interval_source = (f"simulated: Approach 3's surface at these runs plus noise {sigma:g}, refitted "
                           f"{simulated.n_sims} times ({dof} residual degrees of freedom: a bootstrap over "
                           "runs would be degenerate)")
    a3_conv = None if "approach3" not in out else bool(out["approach3"].get("converged"))
    note = "" if a3_fit is None else a3_fit.convergence_note
    if "approach3" in out and a3_fit is None:
        note = out["approach3"]["reason"]
    ok, reasons = diagnostics.verdict(a2.per_budget, sigma, a_ci, a3_conv, note)
    a2_a = a2.n_law.exponent if a2.n_law else None
    a3_a = a3_fit.surface.a if a3_fit is not None else None
    a2_on_a3 = None
    if a3_fit is not None:
        clean = approach2.fit_approach2(n, d, a3_fit.surface.loss(n, d), budget)
        a2_on_a3 = clean.n_law.exponent if clean.n_law else None
    used = [f for f in a2.per_budget if f.accepted]
    return {
        "identifiable": ok,
        "reasons": reasons,
        "noise": sigma,
        "noise_dof": dof,
        "noise_source": source,
        "a_interval": list(a_ci) if a_ci else None,
        "a_interval_source": interval_source,
        "points_used": len(records),
        "budgets_used": [f.budget for f in used],
        "budgets_dropped": [{"budget": f.budget, "reason": f.reason} for f in a2.per_budget if not f.accepted],
        "n_spread_decades": {format_budget(f.budget): f.n_spread_decades for f in a2.per_budget},
        "budgets": diagnostics.budget_table(a2.per_budget, sigma),
        "approach_agreement": diagnostics.approach_agreement(
            a2_a if "approach2" in out else None, a3_a, a2_on_a3
        ),
        "thresholds": {
            "min_spread_decades": diagnostics.MIN_SPREAD_DECADES,
            "min_snr": diagnostics.MIN_SNR,
            "max_ci_width": diagnostics.MAX_CI_WIDTH,
        },
    }


def _clean(obj):
    """JSON without NaN/inf (they are not JSON): None instead."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        return _clean(obj.item())
    return obj


def fit_csv(
    csv: str | Path,
    output_json: str | Path,
    output_md: str | Path,
    family: str | None = None,
    backbone: str | None = None,
    regime: str | None = "any",
    method: str = "both",
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict:
    """`prism isoflop fit`: read the CSV, fit, write the JSON and the Markdown (atomically)."""
    from prism.atomic import write_text_atomic
    from prism.isoflop.report import fit_markdown
    from prism.isoflop.table import load_runs

    if bootstrap < 0:
        raise PrismError(f"--bootstrap must be >= 0, got {bootstrap}")
    loaded = load_runs(csv, family=family, backbone=backbone, regime=regime)
    result = fit_records(loaded.records, method=method, n_boot=bootstrap, seed=seed)
    result = {"input": {"csv": str(csv), **loaded.summary()}, **result}
    result["diagnostics"]["points_dropped"] = {
        "nan": len(loaded.excluded_nan),
        "status": {k: len(v) for k, v in loaded.excluded_status.items()},
        "filtered_out": loaded.filtered_out,
    }
    result = _clean(result)
    a2 = result.get("approach2") or {}
    a3 = result.get("approach3") or {}
    if a2.get("a") is None and a3.get("a") is None:
        # Nothing is written: a fit file must never stand for a fit that did not happen.
        per = "; ".join(b["reason"] for b in a2.get("per_budget", []) if not b["accepted"])
        raise PrismError(
            f"{csv}: nothing could be fitted ({len(loaded.records)} runs): "
            f"{a2.get('reason') or a3.get('reason', '')}" + (f"; rejected budgets: {per}" if per else "")
        )
    write_text_atomic(output_json, json.dumps(result, indent=2) + "\n")
    write_text_atomic(output_md, fit_markdown(result))
    return result
