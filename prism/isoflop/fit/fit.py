"""The fit stage: records in, one FitResult out (input checks, outliers, the fit methods, the verdict).

The methods (Approach 2, Approach 3, any registered later) are prism.isoflop.fit.methods's; this
module fits the grid they share, runs the ones `FitOptions.method` chooses and weighs their answers.

`fit_records` is pure (records -> FitResult, no I/O); the files it is read from and written to
are prism.isoflop.present.fitfiles's (`fit_csv`). Every option is a field of `FitOptions`, with
its default here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from prism.core.errors import PrismError
from prism.core.options import option
from prism.isoflop.fit import (
    approach2,
    approach3,
    backtest,
    checks,
    diagnostics,
    goodness,
    linefit,
    methods,
    sensitivity,
)
from prism.isoflop.fit import predict as prediction_maths
from prism.isoflop.fit.method import BOTH, MethodFit, MethodInput
from prism.isoflop.fit.methods import METHODS
from prism.isoflop.fit.result import Diagnostics, Exclusion, FitResult, MethodSummary, PredictionSection
from prism.isoflop.records import RunRecord


@dataclass(frozen=True)
class FitOptions:
    """How `prism isoflop fit` fits; `help` in each field's metadata is the CLI flag's help."""

    # Old key -> new: refused with a hint naming the new one (the config check, the flag). `window` was
    # renamed `span`: plan.window is a width in decades, this one which sizes the parabola is fitted on.
    RENAMED: ClassVar[dict[str, str]] = {"window": "span"}

    method: str = option(
        "both",
        "approach2 (IsoFLOP parabolas), approach3 (parametric L(N, D)) or both; the verdict uses "
        "the interval(s) of what was fitted",
        choices=METHODS,
        doc="Approach 2 (per-budget parabolas), Approach 3 (parametric), or both.",
    )
    bootstrap: int = option(
        1000,
        "bootstrap resamples for the intervals (0 = none: Approach 2 keeps its regression interval)",
        doc="Bootstrap resamples for the confidence intervals.",
        schema={"minimum": 0},
    )
    seed: int = option(0, "bootstrap seed", doc="Seed of the bootstrap.", schema={"minimum": 0})
    huber_delta: float = option(
        approach3.HUBER_DELTA,
        "Approach 3's Huber delta on log-loss residuals (1e-3 as Hoffmann et al.; a large delta, "
        "e.g. 10, is least squares)",
        doc=(
            "Approach 3's Huber delta on log-loss residuals (1e-3 as Hoffmann et al.; a large delta, e.g. 10, "
            "is least squares)."
        ),
        schema={"exclusiveMinimum": 0},
    )
    budget_tolerance: float = option(
        checks.DEFAULT_BUDGET_TOLERANCE,
        "exclude runs whose FLOPs (or 6ND without a flops column) differ by more than this fraction from both "
        "their budget and the grid's FLOPs / budget trend with size",
        doc=(
            "Exclude runs whose FLOPs (or 6ND without a flops column) differ by more than this fraction from both "
            "their budget and the grid's FLOPs / budget trend with size (a user's count may differ from 6ND "
            "smoothly with N)."
        ),
        schema={"exclusiveMinimum": 0},
    )
    span: str = option(
        "auto",
        "sizes each budget's Approach 2 minimum is fitted on: auto (the largest span of sizes around the "
        "lowest loss, at least 5 sizes, where the parabola shows no lack of fit) or full (every size)",
        choices=approach2.WINDOWS,
        doc=(
            "Sizes each budget's Approach 2 minimum is fitted on - auto (the largest span of sizes around the "
            "lowest loss, at least 5 sizes, where the parabola shows no lack of fit) or full (every size). "
            "Not plan.window, the planned grid's width in decades."
        ),
    )
    outlier_threshold: float = option(
        diagnostics.OUTLIER_K,
        "exclude a run whose leave-one-out residual from its budget's parabola exceeds this many "
        "times the robust noise (0 = keep every run)",
        doc=(
            "Exclude a run whose leave-one-out residual from its budget's parabola exceeds this many times the "
            "robust noise (0 - keep every run)."
        ),
        schema={"minimum": 0},
    )
    predict: str | None = option(
        None,
        "budgets (FLOPs) to predict N_opt, D_opt and the loss at, comma-separated (e.g. 1e21,1e22); the "
        "study's own budgets are always predicted",
        metavar="C1,C2",
        doc=(
            "Budgets (training FLOPs) the fit predicts the compute-optimal N, D and loss at, with 80% "
            "intervals, beside the study's own budgets (fit/REGIME.md, the JSON, scaling_laws.png). A list "
            "here; `prism isoflop fit --predict` takes them comma-separated. `prism isoflop predict` answers "
            "any budget from a finished fit."
        ),
        schema={"type": "array", "items": {"$ref": "#/definitions/budget"}, "default": []},
    )
    reach: float = option(
        prediction_maths.DEFAULT_REACH,
        "decades beyond the data (in C or N) past which a prediction is marked an extrapolation",
        doc=(
            "Decades beyond the study's data, in compute or in N, past which a prediction still prints but is "
            "marked an extrapolation the study cannot vouch for."
        ),
        schema={"exclusiveMinimum": 0},
    )

    def validate(self) -> None:
        if self.method not in METHODS:
            raise PrismError(f"unknown method {self.method!r}; valid: {', '.join(METHODS)}")
        if self.bootstrap < 0:
            raise PrismError(f"--bootstrap must be >= 0, got {self.bootstrap}")
        if not (self.huber_delta > 0 and math.isfinite(self.huber_delta)):
            raise PrismError(f"--huber-delta must be a positive number, got {self.huber_delta}")
        if not self.budget_tolerance > 0:
            raise PrismError(f"--budget-tolerance must be > 0, got {self.budget_tolerance}")
        if self.span not in approach2.WINDOWS:
            raise PrismError(f"unknown span {self.span!r}; valid: {', '.join(approach2.WINDOWS)}")
        if self.outlier_threshold < 0:
            raise PrismError(f"--outlier-threshold must be >= 0, got {self.outlier_threshold}")
        if not self.reach > 0:
            raise PrismError(f"--reach must be > 0, got {self.reach}")
        self.predict_budgets()

    def predict_budgets(self) -> list[float]:
        """The budgets of `predict` as numbers (a PrismError naming the key for one that is not)."""
        return prediction_maths.parse_budgets(self.predict or "", "--predict (config fit.predict)")

    def approach3_options(self) -> approach3.Approach3Options:
        return approach3.Approach3Options(huber_delta=self.huber_delta)


# The fewest budgets a fit can answer from (Approach 2's power law through their minima).
MIN_FIT_BUDGETS = 2


def too_few_budgets(family: str, budgets: list[str]) -> str | None:
    """One line when the plan of `family` (its `budgets`) cannot be fitted; None when it can.

    The workflow asks before the fit job runs, even before the plan exists (the config's budgets
    are the plan's at most): a failed fit job would have lost the previous fit, and the first
    call of a fresh study would end without a reason.
    """
    if len(budgets) >= MIN_FIT_BUDGETS:
        return None
    return (
        f"config budgets: the plan of {family} has {len(budgets)} budget(s) ({', '.join(budgets) or 'none'}); "
        f"the fit needs at least {MIN_FIT_BUDGETS} (a power law in C): add budgets (--config 'budgets=[...]'), "
        f"or name only collect_{family}; the previous fit and figures are kept"
    )


def _arrays(records: list[RunRecord]):
    return tuple(
        np.array([getattr(r, k) for r in records], dtype=float) for k in ("params", "tokens", "loss", "budget")
    )


def _checked(records: list[RunRecord], options: FitOptions, excluded) -> tuple[list, list, list[str]]:
    """Stage 1: the runs the fit may use (kept), the exclusions so far, and the warnings."""
    exclusions = list(excluded)
    kept, dropped, warnings = checks.check_inputs(list(records), options.budget_tolerance)
    exclusions += dropped
    # What training flagged (a loss spike, ...) is worth seeing before trusting the point.
    warnings += [f"run {r.run_id}: {r.warnings}" for r in kept if r.warnings]
    if not kept:
        raise PrismError(
            f"nothing to fit: every one of {len(records)} runs was excluded: {diagnostics.exclusion_groups(exclusions)}"
        )
    return kept, exclusions, warnings


def _without_outliers(kept: list[RunRecord], loss_se: np.ndarray, has_se: bool, options: FitOptions):
    """Stage 2: outliers against the robust noise of all runs; (kept, loss_se, outlier exclusions, warnings)."""
    n, d, loss, budget = _arrays(kept)
    sigma0, _, _ = diagnostics.noise_estimate(
        approach2.fit_budgets(n, d, loss, budget, reference=(None, 0)),
        loss,
        loss_se if has_se else None,
        skip_misfit=False,
    )
    if options.outlier_threshold <= 0:
        return kept, loss_se, [], []
    outliers = diagnostics.find_outliers(n, loss, budget, sigma0, options.outlier_threshold)
    if outliers and options.span == "auto":
        # Runs at a grid's edge beyond the window its minimum rests on are the curve's tail
        # (no parabola describes it, and the window leaves it out), not outliers of one.
        pre = approach2.fit_budgets(n, d, loss, budget, window="auto")
        outliers = diagnostics.drop_tails(outliers, n, budget, pre)
    if not outliers:
        return kept, loss_se, [], []
    drop = {i for i, _ in outliers}
    excluded = [checks.exclusion(kept[i], why, "outlier") for i, why in outliers]
    warning = f"excluded {len(drop)} outlier run(s): " + ", ".join(kept[i].run_id for i, _ in outliers)
    kept = [r for i, r in enumerate(kept) if i not in drop]
    return kept, loss_se[[i for i in range(len(loss_se)) if i not in drop]], excluded, [warning]


def _approach2_on_approach3(fits: dict[str, MethodFit], data: MethodInput) -> float | None:
    """Approach 2's exponent on Approach 3's noiseless surface, at the sizes the point fit used: the
    bias of this very fit, windows included (None when Approach 3 gave no exponent)."""
    a3 = fits.get("approach3")
    a3_fit = a3.parts.get("a3_fit") if a3 is not None else None
    if a3_fit is None or a3.a is None:
        return None
    try:
        with np.errstate(all="ignore"):
            windows = {
                f.budget: (math.log10(f.window_n_min), math.log10(f.window_n_max))
                for f in data.grid.per_budget
                if f.window_n_min is not None
            }
            loss = a3_fit.surface.loss(data.n, data.d)
            clean = approach2.fit_approach2(data.n, data.d, loss, data.budget, window=windows)
        return clean.n_law.exponent if clean.n_law else None
    except (ArithmeticError, ValueError, np.linalg.LinAlgError):
        return None


def _agreement(fits: dict[str, MethodFit], data: MethodInput) -> dict:
    """How far the two approaches disagree (`diagnostics.approach_agreement`): reported beside the verdict,
    in the shape earlier rounds wrote, whichever methods were fitted."""
    two = [fits[name].a if name in fits else None for name in BOTH]
    return diagnostics.approach_agreement(*two, _approach2_on_approach3(fits, data))


def _fits(kept: list[RunRecord], loss_se: np.ndarray, has_se: bool, options: FitOptions):
    """Stage 3: the grid every method shares (Approach 2's per-budget parabolas), the noise, and each
    chosen method's fit; (the grid's input, {name: MethodFit}, the noise's source, the agreement)."""
    n, d, loss, budget = _arrays(kept)
    chosen = methods.selected(options.method)
    boot = options.bootstrap if any(m.grid_bootstrap for m in chosen) else 0
    grid = approach2.fit_approach2(n, d, loss, budget, n_boot=boot, seed=options.seed, window=options.span)
    sigma, dof, source = diagnostics.noise_estimate(
        grid.per_budget, loss, loss_se if has_se else None, reference=grid.reference
    )
    data = MethodInput(
        records=kept,
        n=n,
        d=d,
        loss=loss,
        budget=budget,
        grid=grid,
        sigma=sigma,
        dof=dof,
        within_dof=_within_dof(grid, dof),
        tested=goodness.tested_against(grid.reference, sigma, dof, grid.per_budget),
        options=options,
    )
    fits = {m.name: m.fit(data) for m in chosen}
    return data, fits, source, _agreement(fits, data)


def _within_dof(a2, dof: int) -> int:
    """The degrees of freedom of the minima's own noise: a measured noise (enough residual degrees of
    freedom) is pooled with the minima's scatter; an assumed one only stands in where 2 budgets leave the
    line no scatter to measure."""
    accepted = sum(f.accepted for f in a2.per_budget)
    return dof if dof >= diagnostics.MIN_NOISE_DOF else (linefit.ASSUMED_DOF if accepted == 2 else 0)


def _diagnostics(kept, loss_se, has_se, data: MethodInput, source, agreement, options: FitOptions) -> Diagnostics:
    """Stage 5: what the report shows beside the verdict (noise, budgets used, thresholds, offsets)."""
    n, loss, budget, a2, sigma, dof = data.n, data.loss, data.budget, data.grid, data.sigma, data.dof
    return Diagnostics(
        noise=sigma,
        noise_dof=dof,
        noise_source=source,
        budgets=diagnostics.budget_table(a2.per_budget, sigma),
        budgets_used=[f.budget for f in a2.per_budget if f.accepted],
        budgets_dropped=[{"budget": f.budget, "reason": f.reason} for f in a2.per_budget if not f.accepted],
        points_used=len(kept),
        approach_agreement=agreement,
        thresholds={
            "min_spread_decades": diagnostics.MIN_SPREAD_DECADES,
            "min_snr": diagnostics.MIN_SNR,
            "max_ci_width": diagnostics.MAX_CI_WIDTH,
            "min_budgets": diagnostics.MIN_BUDGETS,
            "outlier_threshold": options.outlier_threshold,
        },
        loss_se_median=float(np.nanmedian(loss_se)) if has_se and np.isfinite(loss_se).any() else None,
        size_offsets=diagnostics.size_offsets(n, loss, budget, a2.per_budget, sigma, [r.run_id for r in kept]),
    )


def fit_records(
    records: list[RunRecord],
    options: FitOptions = FitOptions(),
    excluded: list[Exclusion] | tuple = (),
    with_backtest: bool = True,
    tokens_per_sample: float | None = None,
    **overrides,
) -> FitResult:
    """Fit the runs: checks, outliers, Approach 2 and/or 3, noise, intervals, the verdict and the predictions.

    `excluded` are rows already left out upstream (status, NaN), listed with the fit's own.
    `with_backtest`: refit without the largest budget(s) to test the prediction (the backtest's own refits
    do not). `tokens_per_sample`: the study's row length, to give D_opt in samples too.
    `overrides` replace FitOptions fields (`fit_records(recs, bootstrap=0)`).
    """
    options = dataclasses.replace(options, **overrides) if overrides else options
    options.validate()
    kept, exclusions, warnings = _checked(records, options, excluded)
    loss_se = np.array([np.nan if r.loss_se is None else r.loss_se for r in kept])
    has_se = bool(np.isfinite(loss_se).any())
    kept, loss_se, outliers, outlier_warnings = _without_outliers(kept, loss_se, has_se, options)
    exclusions += outliers
    warnings += outlier_warnings
    data, fits, source, agreement = _fits(kept, loss_se, has_se, options)
    moves = [m for fit in fits.values() for m in fit.moves]
    heard = goodness.speakers(options.method, {name: fit.goodness for name, fit in fits.items()})
    # Stage 4: the verdict.
    verdict = diagnostics.verdict(
        options.method,
        data.grid.per_budget,
        data.sigma,
        [(methods.get(name), fit) for name, fit in fits.items()],
        n_runs=len(kept),
        vanished=diagnostics.vanished_budgets(
            [r.budget for r in records] + [e.budget for e in excluded], data.budget, exclusions
        ),
        moves=moves,
        heard=heard,
    )
    moves = sensitivity.placed(moves, verdict.interval)
    # a method that misfits decides nothing: its moves are in the table, not among the reasons
    if line := sensitivity.outside_line([m for m in moves if not heard.heard or heard.may_speak(m.approach)]):
        verdict.reasons.append(line)
    if any(e.kind == "outlier" for e in exclusions):
        verdict.reasons.append(
            f"{sum(e.kind == 'outlier' for e in exclusions)} outlier run(s) excluded (listed with their residuals)"
        )
    parts = {k: v for fit in fits.values() for k, v in fit.parts.items()}
    model = backtest.prediction_model(
        kept,
        parts.get("a2"),
        data.sigma,
        data.within_dof,
        parts.get("a3_fit"),
        parts.get("a3_boot"),
        verdict.rests_on,
        options.reach,
        tokens_per_sample,
    )
    prediction = _prediction(kept, data.grid, model, options, with_backtest, tokens_per_sample)
    warnings += [f"backtest: {backtest.backtest_line(b)}" for b in prediction.backtests if b.far]
    return FitResult(
        method=options.method,
        bootstrap=options.bootstrap,
        seed=options.seed,
        huber_delta=options.huber_delta,
        budget_tolerance=options.budget_tolerance,
        verdict=verdict,
        diagnostics=_diagnostics(kept, loss_se, has_se, data, source, agreement, options),
        **{fit.section: fit.summary for fit in fits.values() if fit.section},
        methods=[MethodSummary.of(fit, methods.get(fit.name).label) for fit in fits.values() if not fit.section],
        exclusions=exclusions,
        warnings=warnings,
        sensitivity=moves,
        prediction=prediction,
    )


def _prediction(kept, a2, model, options: FitOptions, with_backtest: bool, tokens_per_sample) -> PredictionSection:
    """The study's own budgets and the asked ones predicted, and the backtest (refits without it)."""
    asked = options.predict_budgets()
    if model is None:
        return PredictionSection(None, asked=asked)
    own = [f.budget for f in a2.per_budget if f.accepted]
    budgets = own + [c for c in asked if c not in own]
    tests = []
    if with_backtest:
        quiet = dataclasses.replace(options, predict=None)

        def refit(records):
            return fit_records(records, quiet, with_backtest=False, tokens_per_sample=tokens_per_sample)

        tests = backtest.backtests(kept, a2.per_budget, refit)
    return PredictionSection(model, prediction_maths.predict(model, budgets), asked, tests)
