"""Approach 3 as a fit method: the parametric surface L(N, D) = E + A/N^alpha + B/D^beta fitted to every
run, a and b from its exponents, a's interval from the profile likelihood (the bootstrap's beside it).

The maths is prism.isoflop.fit.approach3's; this module runs it for the fit (its bootstrap, its summary,
its moves and lack-of-fit test) and states its part of the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prism.isoflop.fit import approach3, goodness, sensitivity
from prism.isoflop.fit.diagnostics import MIN_NOISE_DOF
from prism.isoflop.fit.method import Judged, MethodFit, MethodInput
from prism.isoflop.fit.result import Approach3Summary
from prism.isoflop.records import CI_LEVEL


def summary(
    fit: approach3.Approach3Fit,
    boot: np.ndarray | None,
    level: float,
    delta: float,
    profile: approach3.ProfileInterval | None = None,
) -> Approach3Summary:
    """The summary of a point fit: the bootstrap's percentile intervals of every parameter, except a and
    b, whose interval is the profile likelihood's where there is one (the bootstrap's is kept beside it)."""
    s = fit.surface
    try:
        k = float(s.n_opt(1.0)) if s.alpha > 0 and s.beta > 0 else None
    except (ArithmeticError, ValueError):
        k = None
    if k is not None and not (math.isfinite(k) and k > 0):
        k = None
    has_exponents = s.alpha + s.beta > 0
    cis = {}
    n_used = 0
    if boot is not None and len(boot):
        e, a_, b_, alpha, beta = boot.T
        with np.errstate(divide="ignore", invalid="ignore"):
            cols = {
                "E": e,
                "A": a_,
                "B": b_,
                "alpha": alpha,
                "beta": beta,
                "a": beta / (alpha + beta),
                "b": alpha / (alpha + beta),
            }
        for key, v in cols.items():
            cis[f"{key}_ci"] = approach3.interval(v, level)
        n_used = int(np.isfinite(cols["a"]).sum())
    a_boot = cis.get("a_ci")
    method = f"bootstrap over runs ({n_used} resamples)" if a_boot else ""
    if profile is not None:
        cis["a_ci"], cis["b_ci"] = profile.interval, (1 - profile.hi, 1 - profile.lo)
        method = profile.describe()
    return Approach3Summary(
        converged=fit.converged,
        reason="" if fit.converged else fit.convergence_note,
        E=s.E,
        A=s.A,
        B=s.B,
        alpha=s.alpha,
        beta=s.beta,
        a=s.a if has_exponents else None,
        b=s.b if has_exponents else None,
        k=k,
        objective=fit.objective,
        grad_norm=fit.grad_norm,
        convergence_note=fit.convergence_note,
        huber_delta=delta,
        n_points=fit.n_points,
        n_starts=fit.n_starts,
        n_local=fit.n_local,
        n_boot_used=n_used,
        a_ci_bootstrap=a_boot,
        a_interval_method=method,
        **cis,
    )


def fit_approach3(n, d, loss, options):
    """Approach 3 and its bootstrap: (summary, the fit, the bootstrap's rows); never raises on valid runs
    (an unusable optimum is a reason)."""
    if len(n) < 5:
        return Approach3Summary(converged=False, reason=f"{len(n)} runs; 5 parameters need at least 5"), None, None
    opts = options.approach3_options()
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            fit = approach3.fit_approach3(n, d, loss, opts)
    except (ArithmeticError, ValueError, np.linalg.LinAlgError) as err:
        return (
            Approach3Summary(converged=False, reason=f"Approach 3 failed ({err}): the runs do not constrain L(N, D)"),
            None,
            None,
        )
    boot, profile = None, None
    if fit.converged:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            profile = approach3.profile_a(n, d, loss, fit, CI_LEVEL, opts)
    if options.bootstrap > 0 and fit.converged:
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                boot = approach3.bootstrap_approach3(n, d, loss, fit, options.bootstrap, options.seed, opts)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError):
            boot = None  # resamples diverge: no interval rather than a crash
    return summary(fit, boot, CI_LEVEL, options.huber_delta, profile), fit, boot


@dataclass(frozen=True)
class Approach3Method:
    name: str = "approach3"
    label: str = "Approach 3"
    grid_bootstrap: bool = False

    def fit(self, data: MethodInput) -> MethodFit:
        a3, fit, boot = fit_approach3(data.n, data.d, data.loss, data.options)
        moves = sensitivity.approach3_moves(
            data.n, data.d, data.loss, data.budget, fit, data.options.approach3_options()
        )
        return MethodFit(
            name=self.name,
            a=a3.a,
            a_ci=a3.a_ci,
            interval_method=a3.a_interval_method,
            reason=a3.reason,
            summary=a3,
            section="approach3",
            moves=moves,
            goodness=_goodness(data, fit),
            parts={"a3_fit": fit, "a3_boot": boot},
        )

    def judge(self, fit: MethodFit, good: list[str], n_runs: int) -> Judged:
        """Fitted, converged, enough runs for its 5 parameters, and its interval."""
        a3 = fit.summary
        if not a3.fitted:
            return Judged([f"Approach 3 not fitted: {a3.reason}"])
        failures = []
        if not a3.converged:
            failures.append(f"Approach 3 did not converge: {a3.convergence_note}")
        if n_runs - 5 < MIN_NOISE_DOF:
            failures.append(
                f"{n_runs} runs for Approach 3's 5 parameters: under {MIN_NOISE_DOF} residual degrees of "
                "freedom, its uncertainty cannot be measured"
            )
        if a3.a_ci is None:
            if a3.converged:
                failures.append("Approach 3 has no interval of a (too few runs to measure its residual scale)")
            return Judged(failures)
        how = a3.a_interval_method or f"bootstrap over runs ({a3.n_boot_used} resamples)"
        return Judged(failures, interval=a3.a_ci, source=f"Approach 3: {how}")


def _goodness(data: MethodInput, fit: approach3.Approach3Fit | None):
    """The surface's optima against the grid's minima (None when it did not converge or gives no finite loss)."""
    if fit is None or not fit.converged:
        return None
    with np.errstate(all="ignore"):
        predicted = fit.surface.loss(np.asarray(data.n, float), np.asarray(data.d, float))
    if not np.all(np.isfinite(predicted)):
        return None
    return goodness.approach3_goodness(data.n, data.budget, predicted, data.grid.per_budget, *data.tested)


APPROACH3 = Approach3Method()
