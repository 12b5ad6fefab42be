"""What a fit keeps to predict (`prediction_model`) and how well it predicts a budget it did not see.

The backtest refits the study without its largest budget (and without its two largest, where at
least MIN_BUDGETS accepted budgets remain) and predicts the left-out budget's optimum N and minimum
loss, as Llama 3 checked its flagship's loss against its IsoFLOP forecast. The error is given as a
ratio and in interval units: the measured value's distance from the prediction over the interval's
half-width on that side (within 1: inside the interval). Beyond FAR_UNITS it is a warning on the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from prism.core.ids import format_budget
from prism.isoflop.fit import linefit
from prism.isoflop.fit.predict import DEFAULT_REACH, Prediction, PredictModel, ols_line, predict
from prism.isoflop.records import CI_LEVEL, RunRecord

# The fewest accepted budgets a backtest's refit keeps (the verdict's MIN_BUDGETS: a line with scatter).
MIN_REMAINING = 3
# A measured optimum this many interval half-widths from the prediction makes the backtest a warning.
FAR_UNITS = 2.0


def flops_per_token_law(records: list[RunRecord]) -> tuple[float, float]:
    """(log10 f0, g) of FLOPs per token = f0 N^g over the runs with a FLOPs count; 6N without one."""
    pts = [(r.params, r.flops / r.tokens) for r in records if r.flops and r.tokens and r.params]
    if len(pts) < 2 or np.ptp(np.log10([p for p, _ in pts])) < 1e-9:
        return (math.log10(6.0), 1.0)
    slope, icpt = np.polyfit(np.log10([p for p, _ in pts]), np.log10([f for _, f in pts]), 1)
    return (float(icpt), float(slope))


def _a2_lines(a2, noise: float | None, within_dof: int):
    """Approach 2's N line with the variance `approach2.summarize` gives its interval, and the loss line."""
    acc = a2.accepted
    if a2.n_law is None or len(acc) < 2:
        return None, None
    x = np.log10([f.budget for f in acc])
    y = np.log10([f.n_opt for f in acc])
    base = ols_line(x, y)
    s2 = base.var if len(acc) > 2 else None
    w2 = None
    if noise is not None and within_dof > 0 and all(f.vertex_var_unit is not None for f in acc):
        w2 = float(np.mean([noise**2 * f.vertex_var_unit for f in acc]))
    n_line = base
    if s2 is not None or w2 is not None:
        var, dof, _ = linefit.scatter_variance(s2, len(acc) - 2, w2, within_dof)
        n_line = ols_line(x, y, var, dof)
    return n_line, _loss_line(x, np.array([f.loss_min for f in acc]), noise, within_dof)


def _loss_line(x: np.ndarray, loss: np.ndarray, noise: float | None, within_dof: int):
    """log10 of the minima's losses on log10 C; their scatter pooled with the runs' noise (in log10 L) as
    the N line's is, so three nearly collinear minima do not make an interval narrower than one run's noise."""
    y = np.log10(loss)
    base = ols_line(x, y)
    s2 = base.var if len(x) > 2 else None
    w2 = None
    if noise is not None and within_dof > 0:
        w2 = float(np.mean((noise / (loss * math.log(10))) ** 2))
    if s2 is None and w2 is None:
        return base
    var, dof, _ = linefit.scatter_variance(s2, len(x) - 2, w2, within_dof)
    return ols_line(x, y, var, dof)


def prediction_model(
    records: list[RunRecord],
    a2,
    noise: float | None,
    within_dof: int,
    a3_fit,
    a3_boot: np.ndarray | None,
    rests_on: str | None,
    reach: float = DEFAULT_REACH,
    tokens_per_sample: float | None = None,
) -> PredictModel | None:
    """The PredictModel of a fit (`a2`: an Approach2Result or None; `a3_fit`: a converged Approach3Fit or
    None; `a3_boot`: its bootstrap rows); None when neither approach gave a law."""
    n_line, loss_line = _a2_lines(a2, noise, within_dof) if a2 is not None else (None, None)
    theta = boot3 = None
    if a3_fit is not None and a3_fit.converged:
        s = a3_fit.surface
        theta = (s.E, s.A, s.B, s.alpha, s.beta)
        if a3_boot is not None:
            boot3 = [tuple(float(v) for v in row) for row in np.asarray(a3_boot) if np.all(np.isfinite(row))]
    if n_line is None and theta is None:
        return None
    pairs = []
    if n_line is not None and a2.boot is not None:
        pairs = [(float(k), float(e)) for k, e in zip(a2.boot["logk_n"], a2.boot["a"], strict=True)]
    budgets = [f.budget for f in a2.accepted] if a2 is not None and a2.accepted else sorted({r.budget for r in records})
    params = [r.params for r in records]
    return PredictModel(
        budgets=budgets,
        n_range=(float(min(params)), float(max(params))),
        fpt=flops_per_token_law(records),
        tokens_per_sample=tokens_per_sample,
        rests_on=rests_on,
        reach=reach,
        level=CI_LEVEL,
        a2_n=n_line,
        a2_loss=loss_line,
        a2_boot=pairs,
        a3_theta=theta,
        a3_boot=boot3 or [],
        loss_noise=noise if noise and within_dof > 0 else None,
        loss_noise_dof=within_dof if noise else 0,
    )


@dataclass(frozen=True)
class Backtest:
    """The largest budget(s) left out, the left-out budget predicted, and how far off that was."""

    left_out: list[float]
    budget: float
    approach: str
    n_pred: float
    n_ci: tuple[float, float] | None
    n_measured: float
    n_ratio: float  # measured / predicted
    n_units: float | None  # signed: (log measured - log predicted) / the interval's half-width that side
    loss_pred: float | None
    loss_ci: tuple[float, float] | None
    loss_measured: float | None
    loss_diff: float | None  # measured - predicted
    loss_units: float | None

    @property
    def far(self) -> bool:
        return any(u is not None and abs(u) > FAR_UNITS for u in (self.n_units, self.loss_units))

    @property
    def inside(self) -> bool:
        return self.n_units is not None and abs(self.n_units) <= 1


def units(measured: float, predicted: float, ci: tuple[float, float] | None, log: bool = True) -> float | None:
    """The signed distance of `measured` from `predicted` in half-widths of the interval on its side."""
    if ci is None:
        return None
    f = math.log10 if log else float
    side = ci[1] if measured >= predicted else ci[0]
    half = abs(f(side) - f(predicted))
    return (f(measured) - f(predicted)) / half if half > 0 else None


def compare(left_out: list[float], prediction: Prediction, measured) -> Backtest | None:
    """The backtest record of `prediction` against the full fit's BudgetFit `measured` at that budget."""
    e = prediction.answer
    if e is None or measured is None or not measured.accepted or measured.n_opt is None:
        return None
    loss_units = loss_diff = None
    if e.loss is not None and measured.loss_min is not None:
        loss_diff = measured.loss_min - e.loss
        loss_units = units(measured.loss_min, e.loss, e.loss_ci, log=False)
    return Backtest(
        left_out=list(left_out),
        budget=prediction.budget,
        approach=e.approach,
        n_pred=e.n_opt,
        n_ci=e.n_ci,
        n_measured=measured.n_opt,
        n_ratio=measured.n_opt / e.n_opt,
        n_units=units(measured.n_opt, e.n_opt, e.n_ci),
        loss_pred=e.loss,
        loss_ci=e.loss_ci,
        loss_measured=measured.loss_min,
        loss_diff=loss_diff,
        loss_units=loss_units,
    )


def backtests(records: list[RunRecord], per_budget, refit: Callable[[list[RunRecord]], object]) -> list[Backtest]:
    """Leave out the largest accepted budget, then the two largest (where MIN_REMAINING remain), refit
    the rest with `refit` (records -> a FitResult with a prediction) and predict the smallest left out."""
    accepted = sorted(f.budget for f in per_budget if f.accepted)
    by_budget = {f.budget: f for f in per_budget}
    out = []
    for k in (1, 2):
        if len(accepted) - k < MIN_REMAINING:
            break
        left = accepted[-k:]
        kept = [r for r in records if r.budget < left[0]]
        try:
            result = refit(kept)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError):
            continue
        model = result.prediction.model if result.prediction is not None else None
        if model is None:
            continue
        record = compare(left, predict(model, [left[0]])[0], by_budget.get(left[0]))
        if record is not None:
            out.append(record)
    return out


def backtest_line(b: Backtest) -> str:
    """One line: `the largest budget predicted from the others: N_opt x1.08, inside its 80% interval; ...`."""
    which = "largest budget" if len(b.left_out) == 1 else f"{len(b.left_out)} largest budgets"
    where = "no interval"
    if b.n_units is not None:
        where = "inside its 80% interval" if abs(b.n_units) <= 1 else f"{abs(b.n_units):.1f} half-widths off"
    text = (
        f"the {which} left out, {format_budget(b.budget)} predicted from the others ({b.approach}): "
        f"N_opt measured x{b.n_ratio:.2f} the prediction, {where}"
    )
    if b.loss_diff is not None:
        lu = "" if b.loss_units is None else f" ({abs(b.loss_units):.1f} half-widths)"
        text += f"; minimum loss {b.loss_diff:+.4f}{lu}"
    return text + (" - FAR OFF: trust the extrapolation less" if b.far else "")
