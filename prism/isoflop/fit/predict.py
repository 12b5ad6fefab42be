"""The compute-optimal allocation at a budget the study did not train: N_opt, D_opt, loss, with intervals.

A fit keeps what a prediction needs (`PredictModel`: each approach's law and its joint uncertainty,
the study's FLOPs per token, the range of its data) so that the fit job and `prism isoflop predict`
answer from the same record with the same function, and agree to the last digit.

- Approach 2: log10 N_opt is the regression line through the per-budget minima. Its interval at a
  budget is the regression's prediction interval (the joint uncertainty of intercept and slope, plus
  one minimum's scatter around the line: it widens with the distance from the budgets' mean), spanned
  with the within-budget bootstrap's band of its (log10 k, a) pairs where that reaches further. The
  loss at its allocation is Approach 3's surface there where Approach 3 converged (Approach 2 has no
  loss model; a power law through the minima's losses, its fallback, has no floor and overshoots).
  The loss's interval is for the run a user will train there: the surface's spread widened in
  quadrature by one run's noise (the fit's residual sd), so a measured loss is held as often as the
  level says, not only the surface's mean.
- Approach 3: N_opt minimises the fitted L(N, D) on the budget, D = C / (FLOPs per token at N), in
  closed form; its interval is the spread of that optimum over the bootstrap's surfaces, widened in
  quadrature by the minima's scatter around a smooth law (what a single budget's optimum adds).
- D always comes from C and N through the study's own FLOPs per token (a power law in N over its
  runs), so N, D and C agree; D's and tokens-per-parameter's intervals are N's mapped through it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from prism.isoflop.records import CI_LEVEL

# Decades beyond the data (in C or N) past which a prediction is marked an extrapolation.
DEFAULT_REACH = 2.0

Interval = tuple[float, float]


@dataclass(frozen=True)
class Line:
    """log10 y = icpt + slope * log10 C through m points, with what its prediction interval needs."""

    icpt: float
    slope: float
    var: float | None  # variance of a point around the line (None: not measurable)
    dof: int
    m: int
    xbar: float
    sxx: float

    def at(self, x: float) -> float:
        return self.icpt + self.slope * x

    def half_width(self, x: float, level: float) -> float | None:
        """t * the standard error of a new point at x: the line's own uncertainty plus one point's scatter."""
        from scipy import stats  # noqa: PLC0415 lazy: scipy

        if self.var is None or self.dof <= 0 or self.sxx <= 0:
            return None
        t = float(stats.t.ppf((1 + level) / 2, self.dof))
        return t * math.sqrt(self.var * (1 + 1 / self.m + (x - self.xbar) ** 2 / self.sxx))


def ols_line(x, y, var: float | None = None, dof: int | None = None) -> Line:
    """The least-squares line; its point variance is `var` (with `dof`) when given, else the residuals'."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    m = len(x)
    xbar = float(x.mean())
    sxx = float(((x - xbar) ** 2).sum())
    slope = float(((x - xbar) * (y - y.mean())).sum() / sxx) if sxx > 0 else 0.0
    icpt = float(y.mean() - slope * xbar)
    if var is None and m > 2:
        var, dof = float(((y - icpt - slope * x) ** 2).sum()) / (m - 2), m - 2
    return Line(icpt, slope, var, int(dof or 0), m, xbar, sxx)


@dataclass(frozen=True)
class PredictModel:
    """What a fit keeps to predict at any budget (JSON-safe: plain numbers and lists)."""

    budgets: list[float]  # the accepted budgets the laws were fitted on
    n_range: Interval  # the smallest and largest N the runs trained
    # FLOPs per token = 10**fpt[0] * N**fpt[1] over the study's runs (6N without a flops column)
    fpt: tuple[float, float] = (math.log10(6.0), 1.0)
    tokens_per_sample: float | None = None
    rests_on: str | None = None  # the verdict's: approach2, approach3 or envelope
    reach: float = DEFAULT_REACH
    level: float = CI_LEVEL
    a2_n: Line | None = None
    a2_loss: Line | None = None
    a2_boot: list[tuple[float, float]] = field(default_factory=list)  # (log10 k, a) pairs
    a3_theta: tuple[float, ...] | None = None  # (E, A, B, alpha, beta) of the point fit
    a3_boot: list[tuple[float, ...]] = field(default_factory=list)  # the bootstrap's surfaces
    # One run's loss noise (sd) and its degrees of freedom: what a run trained at the predicted allocation
    # adds to the surface's own uncertainty there (None: not measured, the surface's spread alone).
    loss_noise: float | None = None
    loss_noise_dof: int = 0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> PredictModel:
        d = dict(data)
        for key in ("a2_n", "a2_loss"):
            d[key] = Line(**d[key]) if d.get(key) else None
        d["n_range"] = tuple(d["n_range"])
        d["fpt"] = tuple(d.get("fpt") or (math.log10(6.0), 1.0))
        d["a2_boot"] = [tuple(p) for p in d.get("a2_boot") or []]
        d["a3_boot"] = [tuple(p) for p in d.get("a3_boot") or []]
        d["a3_theta"] = tuple(d["a3_theta"]) if d.get("a3_theta") else None
        return cls(**d)


@dataclass(frozen=True)
class Estimate:
    """One approach's (or the answer's) allocation at a budget; intervals at the model's level."""

    approach: str  # approach2, approach3, or both (the span where they disagree)
    n_opt: float
    n_ci: Interval | None
    d_opt: float
    d_ci: Interval | None
    loss: float | None
    loss_ci: Interval | None
    tokens_per_param: float
    tpp_ci: Interval | None
    samples: float | None = None


@dataclass(frozen=True)
class Prediction:
    """The answer at one budget, each approach's estimate, and how far it lies beyond the data."""

    budget: float
    answer: Estimate | None
    approaches: list[Estimate]
    decades_c: float  # beyond the fitted budgets (0 inside their range)
    decades_n: float  # beyond the trained sizes (0 inside their range)
    extrapolation: bool  # beyond the model's reach in C or N

    @classmethod
    def from_json(cls, data: dict) -> Prediction:
        def est(e):
            if e is None:
                return None
            e = dict(e)
            for key in ("n_ci", "d_ci", "loss_ci", "tpp_ci"):
                e[key] = tuple(e[key]) if e.get(key) else None
            return Estimate(**e)

        d = dict(data)
        d["answer"] = est(d.get("answer"))
        d["approaches"] = [est(e) for e in d.get("approaches") or []]
        return cls(**d)


def tokens_at(model: PredictModel, budget: float, n: np.ndarray) -> np.ndarray:
    """D = C / (FLOPs per token at N): the tokens that spend the budget at size N."""
    return budget / (10 ** model.fpt[0] * np.asarray(n, float) ** model.fpt[1])


def a3_optimum(theta: np.ndarray, budget: float, fpt: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(N_opt, loss there) of surfaces theta (..., 5 as E, A, B, alpha, beta) at C with D = C / (f0 N^g).

    L = E + A N^-alpha + B f0^beta C^-beta N^(g beta) is least where alpha A N^-alpha equals
    g beta B f0^beta C^-beta N^(g beta): N^(alpha + g beta) = alpha A C^beta / (g beta B f0^beta).
    With f0 = 6, g = 1 this is Hoffmann et al.'s eq. 4.
    """
    theta = np.asarray(theta, float)
    e, a, b, alpha, beta = (theta[..., i] for i in range(5))
    log_f0, g = fpt[0] * math.log(10), fpt[1]
    with np.errstate(all="ignore"):
        log_n = (np.log(alpha * a / (g * beta * b)) - beta * log_f0 + beta * math.log(budget)) / (alpha + g * beta)
        n = np.exp(log_n)
        d = budget / (np.exp(log_f0) * n**g)
        loss = e + a / n**alpha + b / d**beta
    return n, loss


def _interval(lo: float, hi: float) -> Interval:
    return (float(min(lo, hi)), float(max(lo, hi)))


def _a2_estimate(model: PredictModel, budget: float) -> Estimate | None:
    """Approach 2 at C: the line's N, its prediction interval spanned with the bootstrap's (k, a) band."""
    if model.a2_n is None:
        return None
    x = math.log10(budget)
    centre = model.a2_n.at(x)
    hw = model.a2_n.half_width(x, model.level)
    lo, hi = (centre - hw, centre + hw) if hw is not None else (None, None)
    if model.a2_boot:
        pairs = np.asarray(model.a2_boot, float)
        q_lo, q_hi = np.quantile(pairs[:, 0] + pairs[:, 1] * x, [(1 - model.level) / 2, (1 + model.level) / 2])
        lo, hi = (q_lo, q_hi) if lo is None else (min(lo, q_lo), max(hi, q_hi))
    n_ci = None if lo is None else _interval(10**lo, 10**hi)
    loss = loss_ci = None
    if model.a3_theta is not None:
        loss, loss_ci = _surface_loss(model, budget, 10**centre)
    elif model.a2_loss is not None:
        lc = model.a2_loss.at(x)
        loss = 10**lc
        lhw = model.a2_loss.half_width(x, model.level)
        loss_ci = None if lhw is None else _interval(10 ** (lc - lhw), 10 ** (lc + lhw))
    return _estimate(model, budget, "approach2", 10**centre, n_ci, loss, loss_ci)


def _a3_estimate(model: PredictModel, budget: float) -> Estimate | None:
    """Approach 3 at C: the point surface's optimum; the interval from the bootstrap's surfaces."""
    if model.a3_theta is None:
        return None
    n, loss = a3_optimum(np.asarray(model.a3_theta, float), budget, model.fpt)
    n, loss = float(n), float(loss)
    if not (math.isfinite(n) and n > 0):
        return None
    n_ci = loss_ci = None
    if model.a3_boot:
        bn, bl = a3_optimum(np.asarray(model.a3_boot, float), budget, model.fpt)
        ok = np.isfinite(bn) & (bn > 0) & np.isfinite(bl)
        if ok.sum() >= 2:
            q = [(1 - model.level) / 2, (1 + model.level) / 2]
            lo, hi = np.quantile(np.log10(bn[ok]), q)
            extra = _scatter_half_width(model)
            centre = math.log10(n)
            lo = centre - math.hypot(centre - lo, extra)
            hi = centre + math.hypot(hi - centre, extra)
            n_ci = _interval(10**lo, 10**hi)
            l_lo, l_hi = np.quantile(bl[ok], q)
            loss_ci = _with_run_noise(model, loss, l_lo, l_hi)
    return _estimate(model, budget, "approach3", n, n_ci, loss, loss_ci)


def _surface_loss(model: PredictModel, budget: float, n: float) -> tuple[float, Interval | None]:
    """Approach 3's surface at the allocation (N, D(N)): the loss model Approach 2 lacks, with the
    bootstrap surfaces' spread there."""
    d = float(tokens_at(model, budget, n))
    e, a, b, alpha, beta = model.a3_theta
    loss = e + a / n**alpha + b / d**beta
    if not model.a3_boot:
        return loss, None
    rows = np.asarray(model.a3_boot, float)
    with np.errstate(all="ignore"):
        values = rows[:, 0] + rows[:, 1] / n ** rows[:, 3] + rows[:, 2] / d ** rows[:, 4]
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return loss, None
    lo, hi = np.quantile(values, [(1 - model.level) / 2, (1 + model.level) / 2])
    return loss, _with_run_noise(model, loss, lo, hi)


def _with_run_noise(model: PredictModel, loss: float, lo: float, hi: float) -> Interval:
    """The surface's band at the allocation widened in quadrature by one run's noise: the loss a run trained
    there will measure scatters about the surface by that much, however well the surface is known."""
    lo, hi = min(lo, loss), max(hi, loss)
    if not model.loss_noise or model.loss_noise_dof <= 0:
        return _interval(lo, hi)
    from scipy import stats  # noqa: PLC0415 lazy: scipy

    extra = float(stats.t.ppf((1 + model.level) / 2, model.loss_noise_dof)) * model.loss_noise
    return _interval(loss - math.hypot(loss - lo, extra), loss + math.hypot(hi - loss, extra))


def _scatter_half_width(model: PredictModel) -> float:
    """t * one budget's minimum's scatter around a smooth law (log10 N), from Approach 2's line; 0 without."""
    line = model.a2_n
    if line is None or line.var is None or line.dof <= 0:
        return 0.0
    from scipy import stats  # noqa: PLC0415 lazy: scipy

    return float(stats.t.ppf((1 + model.level) / 2, line.dof)) * math.sqrt(line.var)


def _estimate(model, budget, approach, n, n_ci, loss, loss_ci) -> Estimate:
    """The allocation that N implies at C: D through the study's FLOPs per token; intervals mapped from N's."""
    d = float(tokens_at(model, budget, n))
    d_ci = tpp_ci = None
    if n_ci is not None:
        d_ci = _interval(*(float(tokens_at(model, budget, v)) for v in n_ci))
        tpp_ci = _interval(*(float(tokens_at(model, budget, v)) / v for v in n_ci))
    samples = d / model.tokens_per_sample if model.tokens_per_sample else None
    return Estimate(approach, float(n), n_ci, d, d_ci, loss, loss_ci, d / n, tpp_ci, samples)


def _span(model: PredictModel, budget: float, a2: Estimate, a3: Estimate) -> Estimate:
    """Both approaches spanned (they disagree): N at the geometric middle, intervals covering both."""
    n = math.sqrt(a2.n_opt * a3.n_opt)
    ends = [v for e in (a2, a3) for v in (e.n_ci or (e.n_opt, e.n_opt))]
    losses = [v for v in (a2.loss, a3.loss) if v is not None]
    loss = sum(losses) / len(losses) if losses else None
    l_ends = [v for e in (a2, a3) for v in (e.loss_ci or ((e.loss, e.loss) if e.loss is not None else ()))]
    loss_ci = (min(l_ends), max(l_ends)) if l_ends else None
    return _estimate(model, budget, "both", n, (min(ends), max(ends)), loss, loss_ci)


def _answer(model: PredictModel, budget: float, a2: Estimate | None, a3: Estimate | None) -> Estimate | None:
    """The verdict's rule: the approach its interval rests on, or the span of both where they disagree."""
    if model.rests_on == "envelope" and a2 is not None and a3 is not None:
        return _span(model, budget, a2, a3)
    if model.rests_on == "approach3" and a3 is not None:
        return a3
    return a2 if a2 is not None else a3


def _beyond(lo: float, hi: float, value: float) -> float:
    """Decades of `value` outside [lo, hi] (all log10); 0 inside."""
    return max(0.0, lo - value, value - hi)


def predict(model: PredictModel, budgets) -> list[Prediction]:
    """The prediction at each budget (FLOPs), in the order given."""
    out = []
    for c in budgets:
        c = float(c)
        a2, a3 = _a2_estimate(model, c), _a3_estimate(model, c)
        answer = _answer(model, c, a2, a3)
        log_b = np.log10(model.budgets)
        dc = _beyond(float(log_b.min()), float(log_b.max()), math.log10(c))
        dn = 0.0
        if answer is not None:
            dn = _beyond(math.log10(model.n_range[0]), math.log10(model.n_range[1]), math.log10(answer.n_opt))
        approaches = [e for e in (a2, a3) if e is not None]
        out.append(Prediction(c, answer, approaches, dc, dn, max(dc, dn) > model.reach))
    return out


def parse_budgets(text: str, where: str = "--budget") -> list[float]:
    """Budgets from `1e13,1e21`; a PrismError naming `where` for anything that is not a positive number."""
    from prism.core.errors import PrismError  # noqa: PLC0415

    out = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            value = float("nan")
        if not (math.isfinite(value) and value > 0):
            raise PrismError(f"{where}: {part!r} is not a budget in FLOPs (a positive number such as 1e21)")
        out.append(value)
    return out
