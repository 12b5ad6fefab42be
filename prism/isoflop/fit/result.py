"""The fit's one typed record: what `prism isoflop fit` writes, and what the report, the
plots and the next round's plan read back (`FitResult.to_json` / `FitResult.from_json`).

The JSON keeps the shape earlier rounds wrote (`approach2.a`, `approach3.converged`,
`diagnostics.identifiable`, ...), so an older reader still finds its keys; the verdict
lives in `verdict` and is mirrored into `diagnostics` for those readers. Numbers that
are not finite are written as null (JSON has no NaN).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from prism.core.atomic import json_safe
from prism.core.ids import format_budget
from prism.isoflop.fit.backtest import Backtest
from prism.isoflop.fit.predict import Prediction, PredictModel
from prism.isoflop.records import CI_LEVEL, BudgetFit, Surface

RESULT_VERSION = 2

Interval = tuple[float, float]


def _pair(v) -> Interval | None:
    return None if v is None else (float(v[0]), float(v[1]))


def _known(cls, data: dict) -> dict:
    """The keys of `data` that are fields of `cls` (a newer writer may add more)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class Exclusion:
    """A run the fit did not use, and why (`kind`: status, nan, duplicate, budget, outlier)."""

    run_id: str
    reason: str
    kind: str
    params: float | None = None
    tokens: float | None = None
    loss: float | None = None
    budget: float | None = None


@dataclass(frozen=True)
class Minimum:
    """One accepted budget's compute-optimal point, with its within-budget bootstrap interval."""

    budget: float
    n_opt: float
    d_opt: float
    n_opt_ci: Interval | None = None
    d_opt_ci: Interval | None = None


@dataclass(frozen=True)
class Band:
    """The interval of N_opt(C) and D_opt(C) at each accepted budget (for the plot's band)."""

    budgets: list[float] = field(default_factory=list)
    n_opt_lo: list[float] = field(default_factory=list)
    n_opt_hi: list[float] = field(default_factory=list)
    d_opt_lo: list[float] = field(default_factory=list)
    d_opt_hi: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Approach2Summary:
    """Approach 2: per-budget parabolas, then N_opt = k C^a and D_opt = k_d C^b.

    `a_ci` is the interval the verdict uses: the regression over the per-budget minima
    (`a_ci_regression`, a t interval with m - 2 degrees of freedom: the minima's scatter
    around the line) and the within-budget bootstrap (`a_ci_bootstrap`, the noise of each
    minimum), whichever reaches further at each end (`interval_method` says so in words).
    `a_loo` is the range of a with each budget left out in turn.
    """

    a: float | None
    b: float | None
    k: float | None
    k_d: float | None
    a_ci: Interval | None
    b_ci: Interval | None
    k_ci: Interval | None
    a_ci_regression: Interval | None
    a_ci_bootstrap: Interval | None
    b_ci_regression: Interval | None
    b_ci_bootstrap: Interval | None
    a_loo: Interval | None
    b_loo: Interval | None
    interval_method: str
    n_boot: int
    n_boot_used: int
    reason: str
    per_budget: list[BudgetFit]
    minima: list[Minimum] = field(default_factory=list)
    band: Band = field(default_factory=Band)
    # log10 N_opt = c0 + c1 log10 C + c2 (log10 C)^2 over the minima: c2, its t and p (None under 4
    # budgets). A straight power law is an assumption; a small p says the exponent changes with C.
    curvature: dict | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        out["per_budget"] = [f.to_json() for f in self.per_budget]
        return out

    @classmethod
    def from_json(cls, data: dict) -> Approach2Summary:
        d = _known(cls, data)
        for key in (
            "a_ci",
            "b_ci",
            "k_ci",
            "a_ci_regression",
            "a_ci_bootstrap",
            "b_ci_regression",
            "b_ci_bootstrap",
            "a_loo",
            "b_loo",
        ):
            d[key] = _pair(d.get(key))
        d.setdefault("interval_method", "")
        d.setdefault("n_boot", 0)
        d.setdefault("n_boot_used", 0)
        d.setdefault("reason", "")
        d.setdefault("k_d", None)
        for key in ("a", "b", "k"):
            d.setdefault(key, None)
        d["per_budget"] = [_budget_fit(b) for b in data.get("per_budget", [])]
        d["minima"] = [
            Minimum(**(m | {"n_opt_ci": _pair(m.get("n_opt_ci")), "d_opt_ci": _pair(m.get("d_opt_ci"))}))
            for m in data.get("minima", [])
        ]
        d["band"] = Band(**_known(Band, data.get("band") or {}))
        d.setdefault("curvature", None)
        return cls(**d)


def _budget_fit(b: dict) -> BudgetFit:
    d = _known(BudgetFit, b)
    for key in ("coef", "full_coef"):
        if d.get(key) is not None:
            d[key] = tuple(d[key])
    if d.get("residual_ss") is None:
        d["residual_ss"] = 0.0
    return BudgetFit(**d)


@dataclass(frozen=True)
class Approach3Summary:
    """Approach 3: L(N, D) = E + A / N^alpha + B / D^beta over every run, Huber on log L.

    The values are None when it was not fitted (`reason` says why); `converged` is false
    then, and also when the optimum is not determined (`convergence_note`).
    """

    converged: bool
    reason: str = ""
    E: float | None = None
    A: float | None = None
    B: float | None = None
    alpha: float | None = None
    beta: float | None = None
    a: float | None = None
    b: float | None = None
    # N_opt = k C^a (and D_opt = C / (6 N_opt)) when C = 6ND (Hoffmann et al. eq. 4).
    k: float | None = None
    E_ci: Interval | None = None
    A_ci: Interval | None = None
    B_ci: Interval | None = None
    alpha_ci: Interval | None = None
    beta_ci: Interval | None = None
    a_ci: Interval | None = None
    b_ci: Interval | None = None
    objective: float | None = None
    grad_norm: float | None = None
    convergence_note: str = ""
    huber_delta: float | None = None
    n_points: int = 0
    n_starts: int = 0
    n_local: int = 0
    n_boot_used: int = 0
    # a_ci is the profile likelihood's (`a_interval_method` says so); the bootstrap's beside it
    a_ci_bootstrap: Interval | None = None
    a_interval_method: str = ""

    @property
    def fitted(self) -> bool:
        return self.alpha is not None and self.beta is not None

    @property
    def surface(self) -> Surface | None:
        if not self.fitted or None in (self.E, self.A, self.B):
            return None
        return Surface(E=self.E, A=self.A, B=self.B, alpha=self.alpha, beta=self.beta)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Approach3Summary:
        d = _known(cls, data)
        for key in ("E", "A", "B", "alpha", "beta", "a", "b"):
            d[f"{key}_ci"] = _pair(d.get(f"{key}_ci"))
        d["a_ci_bootstrap"] = _pair(d.get("a_ci_bootstrap"))
        d["converged"] = bool(d.get("converged"))
        return cls(**d)


@dataclass(frozen=True)
class MethodSummary:
    """A registered fit method's answer where it has no section of its own (the approaches keep theirs,
    whose keys older readers know): its a, its interval and how it was found, or why it gave none."""

    name: str
    label: str
    a: float | None
    a_ci: Interval | None = None
    interval_method: str = ""
    reason: str = ""

    @classmethod
    def of(cls, fit, label: str) -> MethodSummary:
        """From a `prism.isoflop.fit.method.MethodFit`."""
        return cls(fit.name, label, fit.a, fit.a_ci, fit.interval_method, fit.reason)

    @classmethod
    def from_json(cls, data: dict) -> MethodSummary:
        d = _known(cls, data)
        return cls(**{**d, "a_ci": _pair(d.get("a_ci"))})


@dataclass(frozen=True)
class BudgetDiagnostics:
    """Per budget: how many runs, their N spread, the signal sizes make, the noise of its parabola."""

    budget: float
    n_points: int
    n_spread_decades: float
    signal: float | None
    snr: float | None
    accepted: bool
    # std of the parabola's residuals over its window of sizes (None with 3 runs: it fits them exactly)
    noise: float | None = None
    noise_dof: int = 0
    # std of the residuals of the parabola through every size: noise plus any lack of fit
    full_grid_noise: float | None = None
    # p of the parabola's lack of fit over every size and over its window; `misfit`: still detected there
    lack_of_fit_p: float | None = None
    window_lack_of_fit_p: float | None = None
    misfit: bool = False


@dataclass(frozen=True)
class SizeOffset:
    """One model size's residuals from its budgets' parabolas (`diagnostics.size_offsets`)."""

    params: float
    label: str
    # budget (as spelled in run ids) -> loss minus the budget's parabola at this size
    residuals: dict[str, float]
    mean: float
    # mean / (noise / sqrt(budgets)); flagged when |t| >= diagnostics.OFFSET_K
    t: float
    flagged: bool


@dataclass(frozen=True)
class Diagnostics:
    noise: float | None
    noise_dof: int
    noise_source: str
    budgets: list[BudgetDiagnostics]
    budgets_used: list[float]
    budgets_dropped: list[dict]
    points_used: int
    approach_agreement: dict
    thresholds: dict
    # median standard error of the runs' own losses (None when the CSV has no loss_se)
    loss_se_median: float | None = None
    size_offsets: list[SizeOffset] = field(default_factory=list)

    def to_json(self) -> dict:
        out = asdict(self)
        out["n_spread_decades"] = {format_budget(b.budget): b.n_spread_decades for b in self.budgets}
        return out

    @classmethod
    def from_json(cls, data: dict) -> Diagnostics:
        d = _known(cls, data)
        d["budgets"] = [BudgetDiagnostics(**_known(BudgetDiagnostics, b)) for b in data.get("budgets", [])]
        d["size_offsets"] = [SizeOffset(**_known(SizeOffset, s)) for s in data.get("size_offsets", [])]
        for key, default in (
            ("budgets_used", []),
            ("budgets_dropped", []),
            ("points_used", 0),
            ("approach_agreement", {}),
            ("thresholds", {}),
            ("noise_dof", 0),
            ("noise_source", ""),
            ("noise", None),
        ):
            d.setdefault(key, default)
        return cls(**d)


@dataclass(frozen=True)
class Move:
    """Where a lands under one choice a reader would question (`sensitivity.moves`).

    `choice`: "budget left out", "window", "huber" or "edges dropped"; `detail` which one
    (the budget, "every size", ...). `stretches`: an alternative on the same runs, which the
    verdict's interval is stretched to hold; the others leave runs out and are only placed.
    `outside`: how far a lies outside the verdict's interval (0 inside; None without a).
    """

    choice: str
    detail: str
    approach: str
    a: float | None
    stretches: bool = False
    outside: float | None = None


@dataclass(frozen=True)
class Verdict:
    """Does the study determine the exponent a? `interval` is the one the decision used."""

    identifiable: bool
    reasons: list[str]
    interval: Interval | None
    interval_source: str | None
    method: str
    # which interval decided: "approach2", "approach3", or "envelope" (both spanned); None without one
    rests_on: str | None = None
    # the approaches that fit the runs and so may decide (`goodness.speakers`); None: not tested
    heard: list[str] | None = None

    @classmethod
    def from_json(cls, data: dict) -> Verdict:
        return cls(
            identifiable=bool(data.get("identifiable")),
            reasons=list(data.get("reasons", [])),
            interval=_pair(data.get("interval")),
            interval_source=data.get("interval_source"),
            method=data.get("method", "both"),
            rests_on=data.get("rests_on"),
            heard=data.get("heard"),
        )


@dataclass(frozen=True)
class PredictionSection:
    """The fit's predictions: what it keeps to predict any budget, its own and the asked budgets'
    answers (`asked`: the config's `predict:`), and the backtests on its largest budgets."""

    model: PredictModel | None
    predictions: list[Prediction] = field(default_factory=list)
    asked: list[float] = field(default_factory=list)
    backtests: list[Backtest] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "model": self.model.to_json() if self.model else None,
            "predictions": [asdict(p) for p in self.predictions],
            "asked": list(self.asked),
            "backtests": [asdict(b) for b in self.backtests],
        }

    @classmethod
    def from_json(cls, data: dict) -> PredictionSection:
        def backtest(b: dict) -> Backtest:
            b = _known(Backtest, b)
            return Backtest(**b | {k: _pair(b.get(k)) for k in ("n_ci", "loss_ci")})

        return cls(
            model=PredictModel.from_json(data["model"]) if data.get("model") else None,
            predictions=[Prediction.from_json(p) for p in data.get("predictions") or []],
            asked=[float(c) for c in data.get("asked") or []],
            backtests=[backtest(b) for b in data.get("backtests") or []],
        )


@dataclass(frozen=True)
class FitResult:
    """Everything one fit decided: the options it ran with, what it left out, each method's answer, the verdict."""

    method: str
    bootstrap: int
    seed: int
    huber_delta: float
    budget_tolerance: float
    verdict: Verdict
    diagnostics: Diagnostics
    approach2: Approach2Summary | None = None
    approach3: Approach3Summary | None = None
    exclusions: list[Exclusion] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ci_level: float = CI_LEVEL
    # where the runs came from (the CSV, its filters, rows read): free-form, for the report
    input: dict = field(default_factory=dict)
    # how a moves under the choices a reader would question, placed against the verdict's interval
    sensitivity: list[Move] = field(default_factory=list)
    # N_opt, D_opt and loss at any budget, and the backtest (None from a fit that kept no laws)
    prediction: PredictionSection | None = None
    # the methods fitted beside (or instead of) the approaches, which have no section of their own
    methods: list[MethodSummary] = field(default_factory=list)

    @property
    def identifiable(self) -> bool:
        return self.verdict.identifiable

    def exponents(self) -> list[tuple[str, float]]:
        """Each method's name and a, where it gave one: the two approaches' sections, then the other methods."""
        sections = [("approach2", self.approach2), ("approach3", self.approach3)]
        named = [(name, s.a) for name, s in sections if s is not None] + [(m.name, m.a) for m in self.methods]
        return [(name, a) for name, a in named if a is not None]

    def a(self) -> float | None:
        """The exponent a of the method the verdict rests on (else Approach 3 first when it converged)."""
        if self.verdict.rests_on == "approach2" and self.approach2 is not None and self.approach2.a is not None:
            return self.approach2.a
        for m in self.methods:
            if m.name == self.verdict.rests_on and m.a is not None:
                return m.a
        if self.approach3 is not None and self.approach3.converged and self.approach3.a is not None:
            return self.approach3.a
        return self.approach2.a if self.approach2 is not None else None

    def to_json(self) -> dict:
        diag = self.diagnostics.to_json()
        # The verdict is also where readers of the first JSON shape look for it.
        diag |= {
            "identifiable": self.verdict.identifiable,
            "reasons": self.verdict.reasons,
            "a_interval": self.verdict.interval,
            "a_interval_source": self.verdict.interval_source,
        }
        out = {
            "version": RESULT_VERSION,
            "input": self.input,
            "method": self.method,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "huber_delta": self.huber_delta,
            "budget_tolerance": self.budget_tolerance,
            "ci_level": self.ci_level,
            "verdict": asdict(self.verdict),
            "exclusions": [asdict(e) for e in self.exclusions],
            "warnings": self.warnings,
            "approach2": self.approach2.to_json() if self.approach2 else None,
            "approach3": self.approach3.to_json() if self.approach3 else None,
            "diagnostics": diag,
            "sensitivity": [asdict(m) for m in self.sensitivity],
            "prediction": self.prediction.to_json() if self.prediction else None,
        }
        if self.methods:  # absent when only the approaches were fitted: those results read as they always did
            out["methods"] = [asdict(m) for m in self.methods]
        return json_safe(out, nonfinite="null")

    @classmethod
    def from_json(cls, data: dict) -> FitResult:
        """Read a fit JSON (this shape, or the first one, which had no `verdict` and `exclusions`)."""
        diag = data.get("diagnostics") or {}
        verdict = data.get("verdict") or {
            "identifiable": diag.get("identifiable"),
            "reasons": diag.get("reasons", []),
            "interval": diag.get("a_interval"),
            "interval_source": diag.get("a_interval_source"),
            "method": data.get("method", "both"),
        }
        a2, a3 = data.get("approach2"), data.get("approach3")
        return cls(
            method=data.get("method", "both"),
            bootstrap=int(data.get("bootstrap", 0)),
            seed=int(data.get("seed", 0)),
            huber_delta=float(data.get("huber_delta") or 1e-3),
            budget_tolerance=float(data.get("budget_tolerance") or 0.1),
            verdict=Verdict.from_json(verdict),
            diagnostics=Diagnostics.from_json(diag),
            approach2=Approach2Summary.from_json(a2) if a2 else None,
            approach3=Approach3Summary.from_json(a3) if a3 else None,
            exclusions=[Exclusion(**_known(Exclusion, e)) for e in data.get("exclusions", [])],
            warnings=list(data.get("warnings", [])),
            ci_level=float(data.get("ci_level", CI_LEVEL)),
            input=dict(data.get("input") or {}),
            sensitivity=[Move(**_known(Move, m)) for m in data.get("sensitivity") or []],
            prediction=PredictionSection.from_json(data["prediction"]) if data.get("prediction") else None,
            methods=[MethodSummary.from_json(m) for m in data.get("methods") or []],
        )
