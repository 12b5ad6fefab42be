"""The power law through the per-budget minima (log10 N_opt or D_opt on log10 C) and how far their
errors let it move: ordinary least squares with t intervals, and the test of a bend in it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prism.isoflop.records import CI_LEVEL

# Degrees of freedom that mark a noise as assumed (no residuals measured it): treated as known.
ASSUMED_DOF = 1000


@dataclass(frozen=True)
class LineFit:
    """OLS of log10 y on log10 C over the accepted budgets, with its t intervals."""

    slope: float
    icpt: float
    slope_ci: tuple[float, float] | None
    icpt_ci: tuple[float, float] | None
    band_lo: np.ndarray | None  # log10 y interval of the line at each budget
    band_hi: np.ndarray | None
    loo: tuple[float, float] | None  # slope range with each budget left out
    var_source: str = ""


def line_fit(log_c, log_y, level: float = CI_LEVEL, within_var=None, within_dof: int = 0) -> LineFit:
    """The power law through the minima and how far their errors let it move.

    The minima scatter around the line by their own noise and by any misfit of the power
    law. Two estimates of that scatter's variance: the residuals around the line (m - 2
    degrees of freedom) and `within_var`, each minimum's variance propagated from the noise
    of its parabola (`within_dof`: the parabolas' residual degrees of freedom). The interval
    uses their pooled estimate, or the residuals' alone when they scatter more (the power
    law then misses the minima by more than their noise), with t at the pooled degrees of
    freedom. Over simulated studies this covers the true exponent at close to its nominal
    rate (tests/isoflop/fit/test_intervals.py); either estimate alone did not.
    """
    from scipy import stats  # noqa: PLC0415 lazy: scipy

    x, y = np.asarray(log_c, float), np.asarray(log_y, float)
    m = len(x)
    xbar = x.mean()
    sxx = float(((x - xbar) ** 2).sum())
    slope = float(((x - xbar) * (y - y.mean())).sum() / sxx)
    icpt = float(y.mean() - slope * xbar)
    res_dof = m - 2
    s2 = float(((y - icpt - slope * x) ** 2).sum()) / res_dof if res_dof > 0 else None
    w2 = float(np.mean(within_var)) if within_var is not None and within_dof > 0 else None
    if s2 is None and w2 is None:
        return LineFit(slope, icpt, None, None, None, None, None, "no degree of freedom to measure the scatter")
    var, dof, source = scatter_variance(s2, res_dof, w2, within_dof)
    t = float(stats.t.ppf((1 + level) / 2, dof))
    se_slope = math.sqrt(var / sxx)
    se_icpt = math.sqrt(var * (1 / m + xbar**2 / sxx))
    se_line = np.sqrt(var * (1 / m + (x - xbar) ** 2 / sxx))
    line = icpt + slope * x
    loo = None
    if m >= 3:
        slopes = [float(np.polyfit(x[np.arange(m) != i], y[np.arange(m) != i], 1)[0]) for i in range(m)]
        loo = (min(slopes), max(slopes))
    return LineFit(
        slope,
        icpt,
        (slope - t * se_slope, slope + t * se_slope),
        (icpt - t * se_icpt, icpt + t * se_icpt),
        line - t * se_line,
        line + t * se_line,
        loo,
        source,
    )


def power_law_curvature(log_c, log_y) -> dict | None:
    """The quadratic term of log y in log C over the minima, with its t and two-sided p (m - 3
    degrees of freedom); None under 4 budgets."""
    from scipy import stats  # noqa: PLC0415 lazy: scipy

    x, y = np.asarray(log_c, float), np.asarray(log_y, float)
    m = len(x)
    if m < 4:
        return None
    xc = x - x.mean()
    design = np.stack([np.ones_like(xc), xc, xc * xc], 1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    dof = m - 3
    s2 = float(((y - design @ coef) ** 2).sum()) / dof
    se = math.sqrt(max(s2, 1e-300) * float(np.linalg.pinv(design.T @ design)[2, 2]))
    t = float(coef[2]) / se
    return {"c2": float(coef[2]), "t": t, "p": float(2 * stats.t.sf(abs(t), dof)), "dof": dof}


def scatter_variance(s2: float | None, res_dof: int, w2: float | None, within_dof: int) -> tuple[float, int, str]:
    """The variance of the minima around the line that `line_fit`'s interval uses, its degrees of freedom
    and what it is: the residuals' (`s2`), the minima's own noise (`w2`), or both pooled, unless the
    residuals scatter more (the power law misses the minima by more than their noise)."""
    if w2 is None:
        var, dof, source = s2, res_dof, f"the minima's scatter around the line ({res_dof} degrees of freedom)"
    elif s2 is None:
        measured = f"{within_dof} degrees of freedom" if within_dof < ASSUMED_DOF else "an assumed noise"
        var, dof, source = (
            w2,
            within_dof,
            (f"each minimum's noise from its parabola ({measured}; 2 budgets leave the line no scatter to measure)"),
        )
    else:
        pooled = (res_dof * s2 + within_dof * w2) / (res_dof + within_dof)
        dof = res_dof + within_dof
        if s2 > pooled:
            var, source = (
                s2,
                (
                    f"the minima's scatter around the line ({res_dof} degrees of freedom), larger than "
                    "their noise within budgets"
                ),
            )
        else:
            var, source = (
                pooled,
                (
                    f"the minima's scatter around the line ({res_dof} degrees of freedom) pooled "
                    f"with each minimum's noise from its parabola ({within_dof})"
                ),
            )
    return var, dof, source
