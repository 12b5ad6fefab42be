"""Plain records passed between the IsoFLOP stages (plan, collect, fit, report, plot).

No numpy-heavy logic lives here: the maths modules take these records (or the
numpy arrays built from them) and return new ones, so every stage can be tested
on hand-made values without Snakemake, torch or matplotlib.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from prism.core.errors import PrismError
from prism.core.families import FAMILIES
from prism.core.ids import run_id as make_run_id
from prism.model.config import REGIMES, is_backbone, projector_variant

# Loss-surface parameters of the Chinchilla form L = E + A / N^alpha + B / D^beta.
SURFACE_KEYS = ("E", "A", "B", "alpha", "beta")

# The intervals reported everywhere (fit and forecast): the 10th-90th percentile,
# as Chinchilla reported its exponents.
CI_LEVEL = 0.8


@dataclass(frozen=True)
class RunRecord:
    """One finished training run as the fit sees it: N, D, final loss, its budget.

    `loss_se` is the standard error of the loss (from the run's final evaluation), `flops`
    the FLOPs it spent and `warnings` what training flagged, when the runs CSV has them.
    """

    run_id: str
    params: float
    tokens: float
    loss: float
    budget: float
    loss_se: float | None = None
    flops: float | None = None
    # the run's own warnings (e.g. a loss spike), as the runs CSV's `warnings` column holds them
    warnings: str | None = None


@dataclass(frozen=True)
class Surface:
    """A loss surface L(N, D) = E + A / N^alpha + B / D^beta (a prior or a fit)."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def loss(self, n, d):
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    @property
    def a(self) -> float:
        """Exponent of N_opt(C) ~ C^a under C = 6ND."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def n_opt(self, budget):
        """The compute-optimal N at budget C when C = 6ND (Hoffmann et al. eq. 4)."""
        g = (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / (self.alpha + self.beta))
        return g * (budget / 6.0) ** self.a


# Epoch AI's refit of Chinchilla (Besiroglu et al. 2024): the default prior surface.
CHINCHILLA_EPOCH = Surface(E=1.8172, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658)


@dataclass(frozen=True)
class PowerLaw:
    """y = k * C^exponent, with the bootstrap interval of the exponent (None without bootstrap)."""

    k: float
    exponent: float
    exponent_ci: tuple[float, float] | None = None
    # (lo, hi) of k * C^exponent at each budget of `band_budgets`, for the plot's band.
    band_budgets: list[float] = field(default_factory=list)
    band_lo: list[float] = field(default_factory=list)
    band_hi: list[float] = field(default_factory=list)

    def __call__(self, budget):
        return self.k * budget**self.exponent


@dataclass(frozen=True)
class BudgetFit:
    """Approach 2 on one IsoFLOP curve: the parabola of loss in log10 N and what it implies."""

    budget: float
    n_points: int
    n_min: float
    n_max: float
    n_spread_decades: float
    accepted: bool
    reason: str
    # loss = c0 + c1 * x + c2 * x^2 with x = log10 N; None when not fitted.
    coef: tuple[float, float, float] | None = None
    n_opt: float | None = None
    d_opt: float | None = None
    loss_min: float | None = None
    # Residual sum of squares of the parabola through every run of the budget (the full grid, misfit
    # included); `window_residual_ss` is that of `coef` over the runs of its window.
    residual_ss: float = 0.0
    # max - min of the fitted parabola over the sampled N: the signal a size change makes.
    signal: float | None = None
    # Variance of the vertex log10 N_opt per unit noise variance (delta method on the parabola's
    # coefficients), and d log10 D / d log10 N of the budget's runs: the minimum's own uncertainty.
    vertex_var_unit: float | None = None
    d_slope: float | None = None
    # The window of sizes the parabola above was fitted on (every size unless a window was chosen):
    # runs and distinct sizes in it, its N range, and the p of the parabola's lack of fit there.
    n_window: int | None = None
    n_sizes: int | None = None
    window_sizes: int | None = None
    window_n_min: float | None = None
    window_n_max: float | None = None
    window_lack_of_fit_p: float | None = None
    window_residual_ss: float | None = None
    # The parabola through every size, for comparison: coefficients, vertex (None unless inside the
    # grid and convex), lack-of-fit p, residual signs ordered by N and the runs test's p of so few
    # sign changes.
    full_coef: tuple[float, float, float] | None = None
    full_n_opt: float | None = None
    lack_of_fit_p: float | None = None
    residual_signs: str | None = None
    runs_p: float | None = None
    # The curve the vertex was read off: "parabola", or "cubic" in log N where the window's curves
    # lean the same way (the asymmetry moves a parabola's vertex); `cubic_p`, the p of the cubic term
    # over this budget's window (None with under 5 sizes or no reference noise).
    vertex_curve: str = "parabola"
    cubic_p: float | None = None
    # the sizes the cubic was fitted on (its own window, at least the parabola's); None: no cubic
    cubic_n_min: float | None = None
    cubic_n_max: float | None = None

    @property
    def windowed(self) -> bool:
        return self.n_window is not None and self.n_window < self.n_points

    def in_window(self, n: float, curve: bool = False) -> bool:
        """Whether size `n` is one the parabola was fitted on (beyond its window it describes nothing);
        `curve`: one the minimum's curve was fitted on (the cubic's window where there is one)."""
        lo, hi = self.window_n_min, self.window_n_max
        if curve and self.vertex_curve == "cubic" and self.cubic_n_min is not None:
            lo, hi = self.cubic_n_min, self.cubic_n_max
        if lo is None or hi is None:
            return True
        return lo * (1 - 1e-9) <= n <= hi * (1 + 1e-9)

    def to_json(self) -> dict:
        out = asdict(self)
        out["coef"] = list(self.coef) if self.coef is not None else None
        out["full_coef"] = list(self.full_coef) if self.full_coef is not None else None
        return out


@dataclass(frozen=True)
class Approach3Fit:
    """The parametric fit, with whether the optimiser really converged."""

    surface: Surface
    objective: float
    grad_norm: float
    converged: bool
    convergence_note: str
    n_points: int
    n_starts: int
    n_local: int
    # log-space parameters (a, b, e, alpha, beta) of the optimum, for warm starts.
    theta: tuple[float, float, float, float, float]


@dataclass(frozen=True)
class PlanRow:
    """One planned training run (a row of plan.yaml / plan.csv)."""

    run_id: str
    family: str
    backbone: str
    variant: str
    regime: str
    budget: float
    params: float
    params_total: float
    flops_per_sample: float
    tokens_per_sample: float
    global_batch: int
    samples: int
    steps: int
    tokens: float
    flops: float
    # Estimated wall hours of the run on the machine that measured samples/s (None: not measured).
    hours_here: float | None
    # Estimated node-hours on the cluster from the stated node throughput (None: none stated).
    node_hours: float | None
    # Passes over the training split (None: the plan was made without the data).
    epochs: float | None = None
    # Where it trains (prism.isoflop.design.placement): its devices, the rows each takes per micro-step
    # (None: global_batch / devices) and the micro-steps per optimizer step;
    # global_batch = devices x micro_batch x accum_steps. The defaults read an older plan back.
    devices: int = 1
    micro_batch: int | None = None
    accum_steps: int = 1
    # Its peak learning rate and the rule that gave it (prism.train.lr_rule: hand, given or fitted);
    # a hand-rule run's command leaves it to `prism train`'s default, the same value.
    lr: float | None = None
    lr_rule: str = "hand"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: Any, where: str = "plan.yaml: a row") -> PlanRow:
        """The row of a read-back plan (plan.yaml), checked once: its keys, their types and its run id.

        `where` names the row (e.g. "STUDY/F/plan.yaml: runs[3]"); every refusal is one PrismError
        naming it, the run id and the key. Keys an older plan lacks take their defaults; the cost
        fields without one (params, flops, hours, ...) are None there.
        """
        if not isinstance(row, dict):
            raise PrismError(f"{where} is not a mapping of run settings: {row!r}")
        where = f"{where} ({row.get('run_id', 'no run_id')})"
        unknown = sorted(set(row) - set(PLAN_ROW_FIELDS))
        if unknown:
            raise PrismError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; a plan row has "
                             f"{', '.join(PLAN_ROW_FIELDS)} (re-plan with `prism isoflop plan`)")  # fmt: skip
        for key in PLAN_ROW_REQUIRED:
            if row.get(key) is None:
                raise PrismError(f"{where}: no {key}")
        _check_names(row, where)
        values = {key: _typed(key, value, where) for key, value in row.items()}
        missing = {f.name: None for f in fields(cls) if f.default is MISSING and f.name not in values}
        out = cls(**values, **missing)
        expected = make_run_id(out.backbone, out.variant, out.regime, out.budget)
        if out.run_id != expected:
            raise PrismError(f"{where}: run_id does not match its backbone, variant, regime and budget "
                             f"(they give {expected}); re-plan, or correct the row")  # fmt: skip
        return out


def plan_rows(runs: Any, source: str) -> list[PlanRow]:
    """A read-back plan's `runs:` list (plan.yaml at `source`) as checked rows; PlanRow.from_dict says why not."""
    if not isinstance(runs, list):
        raise PrismError(f"{source}: `runs:` is not a list of plan rows; re-plan with `prism isoflop plan`")
    return [PlanRow.from_dict(row, f"{source}: runs[{i}]") for i, row in enumerate(runs)]


PLAN_ROW_FIELDS = tuple(PlanRow.__dataclass_fields__)
# What a run is made from: a row without one of them cannot train.
PLAN_ROW_REQUIRED = ("run_id", "family", "backbone", "variant", "regime", "budget", "global_batch", "steps")
_STRINGS = ("run_id", "family", "backbone", "variant", "regime", "lr_rule")
_POSITIVE_INTS = ("global_batch", "steps", "devices", "micro_batch", "accum_steps")
_POSITIVE_NUMBERS = ("budget", "lr")
_COUNTS = ("samples",)  # integers, 0 allowed
_NULLABLE = tuple(f.name for f in fields(PlanRow) if "None" in str(f.type))


def _check_names(row: dict, where: str) -> None:
    """Refuse a family, regime, backbone or projector variant that no registry or rule knows."""
    registries = {"family": FAMILIES, "regime": REGIMES}
    for key, registry in registries.items():
        if row[key] not in registry:
            raise PrismError(f"{where}: {key} {row[key]!r} is not one of {', '.join(registry)}")
    if not isinstance(row["backbone"], str) or not is_backbone(row["backbone"]):
        raise PrismError(
            f"{where}: backbone {row['backbone']!r} is neither a registry backbone "
            "(`prism model list`) nor a rule size (e.g. n32e3)"
        )
    try:
        projector_variant(str(row["variant"]))
    except PrismError as err:
        raise PrismError(f"{where}: {err}") from None


def _typed(key: str, value: Any, where: str) -> Any:
    """`value` as the field `key` holds it (numbers as int or float), or a PrismError naming the key."""
    if key in _STRINGS:
        if not isinstance(value, str) or not value:
            raise PrismError(f"{where}: {key} must be a non-empty string, got {value!r}")
        return value
    if value is None and key in _NULLABLE:
        return None
    number = _number(value)
    if key in _POSITIVE_INTS + _COUNTS:
        least = 0 if key in _COUNTS else 1
        if number is None or number < least or not number.is_integer():
            kind = "a positive integer" if least else "an integer of at least 0"
            raise PrismError(f"{where}: {key} must be {kind}, got {value!r}")
        return int(number)
    if number is None or (key in _POSITIVE_NUMBERS and number <= 0):
        kind = "a positive number" if key in _POSITIVE_NUMBERS else "a number"
        raise PrismError(f"{where}: {key} must be {kind}, got {value!r}")
    return value if isinstance(value, int | float) else number


def _number(value: Any) -> float | None:
    """A finite float of a number or a numeric string (YAML reads `1e12` as a string); None otherwise."""
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None
