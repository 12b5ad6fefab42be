"""The IsoFLOP plan: which runs (backbone x variant) each budget trains, and what they cost.

Per budget, independently of the other budgets (adding a budget never changes
the runs already planned for another, so a study grows incrementally):
1. every candidate gets its N (trainable params), FLOPs and tokens per sample from
   its calibration JSON, or counted in-process where there is none (`candidates.py`);
   samples = C / flops_per_sample; a global batch (given, or the largest power of two
   that still leaves `min_steps` steps) and
   steps = round(samples / batch), so the FLOPs spent are within 1% of C
   (rounding moves at most half a step: <= 1% from 50 steps on);
2. candidates that cannot be run are dropped with the reason: too few steps, FLOPs
   off by more than 1%, more passes over the training split than `max_epochs`
   (each row shows its `epochs` when the plan knows the data);
3. the grid is centred on the predicted optimum N_opt(C) = k C^a (explicit prior
   flags, else the centre of the existing plan at `--out`, else a previous round's
   identifiable fit copied to `{study dir}/prior.json`, else the default prior) and
   candidates more than `window` decades away are dropped;
4. a budget whose remaining candidates do not bracket N_opt is refused, naming
   what to add.
Then the identifiability forecast simulates the planned grid (`forecast.py`) on a
loss surface: a previous round's Approach 3 surface and measured noise when the
centre came from that fit (or prior.json gives `E, A, B, alpha, beta`), else a range
of plausible surfaces through the centre (one Chinchilla-shaped surface overstated
the loss differences of a small ladder: forecast 32-48x the noise, measured 3.6-7.5x).

The planning maths only: the settings are `planoptions.py`, a run's price `pricing.py`, the
files it reads `planinputs.py`, and its text and files `plantext.py` and `planwrite.py`.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from prism.core.errors import PrismError
from prism.core.families import FamilySpec, family_spec
from prism.core.ids import format_budget, run_id
from prism.core.options import validate
from prism.data.batching import check_batch
from prism.data.volume import MAX_EPOCHS, epochs_refusal, train_samples
from prism.isoflop.design.candidates import Candidate, load_candidates
from prism.isoflop.design.centre import Centre, find_centre
from prism.isoflop.design.placement import Devices, place_rows
from prism.isoflop.design.planinputs import check_data_spec, lr_reference
from prism.isoflop.design.planoptions import DEFAULT_WINDOW, PlanOptions
from prism.isoflop.design.pricing import Cost, cost_summary, priced
from prism.isoflop.design.refusals import EPOCHS, FLOPS, STEPS, WINDOW, limits_text, no_sizes_text
from prism.isoflop.design.trajectories import DEFAULT_COOLDOWN_FRACTION, DEFAULT_MIN_STEPS, schedule_costs
from prism.isoflop.records import PlanRow, Surface
from prism.train.lr_rule import LrRule

MAX_AUTO_BATCH = 512
FLOP_TOLERANCE = 0.01


def ranks_text(job_ranks: int) -> str:
    """Where a study's ranks per job come from, for the line that refuses a batch."""
    return f"each training job (--job-ranks {job_ranks}: the launcher's ranks per node x a job's nodes)"


class NoBudget(PrismError):
    """Every budget is refused: no data, calibration or job can change that, so the workflow stops at once."""


@dataclass
class BudgetPlan:
    budget: float
    n_opt: float
    runs: list[PlanRow] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)
    refused: str | None = None


def law_batch(budget: float, tokens_per_sample: float, law: tuple[float, float]) -> int:
    """The batch in samples that a critical-batch law B_tokens = c C^b gives at this budget (at least 1).

    The critical batch grows with compute (DeepSeek LLM's fit: c 0.292, b 0.3271, B in tokens, C in
    FLOPs): a fixed batch trains the large budgets' runs with too many small steps, the small ones'
    with too few."""
    c, b = law
    return max(1, int(c * budget**b / tokens_per_sample))


def choose_batch(samples: float, min_steps: int, global_batch: int | None, job_ranks: int = 1,
                 cap: int | None = None) -> int | None:  # fmt: skip
    """The given batch, or the largest `job_ranks` x 2^k (<= MAX_AUTO_BATCH and `cap`, a batch law's, or
    `job_ranks` itself) leaving >= min_steps steps: every rank of the job then takes the same
    power-of-two share, so the batch stays divisible among them."""
    if global_batch is not None:
        return global_batch
    rows_per_rank = min(MAX_AUTO_BATCH, cap or MAX_AUTO_BATCH) // job_ranks
    batch = job_ranks * 2 ** max(0, rows_per_rank.bit_length() - 1)
    while batch >= job_ranks:
        if round(samples / batch) >= min_steps:
            return batch
        batch //= 2
    return None


def plan_budget(
    budget: float,
    candidates: list[Candidate],
    family: str,
    regime: str,
    centre: Centre,
    window: float = DEFAULT_WINDOW,
    global_batch: int | None = None,
    min_steps: int = DEFAULT_MIN_STEPS,
    split_samples: int | None = None,
    max_epochs: float = MAX_EPOCHS,
    cost: Cost = Cost(),
    job_ranks: int = 1,
    batch_law: tuple[float, float] | None = None,
) -> BudgetPlan:
    """The runs of one budget (pure: depends on this budget and the candidates only); where the plan
    chooses the batch, `batch_law` (c, b) caps it at the critical batch c C^b tokens."""
    n_opt = centre.n_opt(budget)
    out = BudgetPlan(budget=budget, n_opt=n_opt)
    for cand in candidates:
        rid = run_id(cand.backbone, cand.variant, regime, budget)
        distance = math.log10(cand.params / n_opt)
        if abs(distance) > window:
            reason = f"N={cand.params:.3g} is {distance:+.2f} decades from N_opt={n_opt:.3g} (window +-{window})"
            out.dropped.append(_dropped(rid, budget, cand, reason, WINDOW))
            continue
        samples = budget / cand.flops_per_sample
        cap = law_batch(budget, cand.tokens_per_sample, batch_law) if batch_law else None
        batch = choose_batch(samples, min_steps, global_batch, job_ranks, cap)
        steps = 0 if batch is None else round(samples / batch)
        if batch is None or steps < min_steps:
            reason = (
                f"too few steps: {samples:.3g} samples make {steps} steps at batch {batch or 1} "
                f"(< {min_steps}); use a larger budget or a smaller backbone"
            )
            # The budget at which the smallest batch the plan may choose makes min_steps steps.
            needs = min_steps * (global_batch or job_ranks) * cand.flops_per_sample
            out.dropped.append(_dropped(rid, budget, cand, reason, STEPS, needs))
            continue
        flops = steps * batch * cand.flops_per_sample
        if abs(flops / budget - 1) > FLOP_TOLERANCE:
            reason = (
                f"{steps} steps x batch {batch} spend {flops:.3g} FLOPs, "
                f"{100 * (flops / budget - 1):+.1f}% off the budget"
            )
            out.dropped.append(_dropped(rid, budget, cand, reason, FLOPS))
            continue
        epochs = None if split_samples is None else steps * batch / split_samples
        refusal = None if epochs is None else epochs_refusal(rid, epochs, max_epochs)
        if refusal is not None:
            out.dropped.append(_dropped(rid, budget, cand, refusal, EPOCHS, epochs))
            continue
        out.runs.append(_plan_row(rid, family, regime, budget, cand, batch, steps, epochs, cost))
    why_dropped = limits_text(out.dropped, min_steps, max_epochs)
    out.refused = _refusal(budget, n_opt, candidates, out.runs, why_dropped)
    return out


def _dropped(rid: str, budget: float, cand: Candidate, reason: str, limit: str, needs: float | None = None) -> dict:
    """A candidate the budget does not run, why, and which limit (refusals.STEPS ...) removed it with the
    number that would admit it (the budget for steps, the passes over the data for epochs)."""
    return {
        "run_id": rid,
        "budget": budget,
        "backbone": cand.backbone,
        "variant": cand.variant,
        "params": cand.params,
        "reason": reason,
        "limit": limit,
        "needs": needs,
    }


def _plan_row(
    rid: str, family: str, regime: str, budget: float, cand: Candidate, batch: int, steps: int, epochs, cost: Cost
) -> PlanRow:
    """The run of a candidate the budget keeps, with its FLOPs, tokens and estimated hours."""
    flops = steps * batch * cand.flops_per_sample
    return PlanRow(
        run_id=rid,
        family=family,
        backbone=cand.backbone,
        variant=cand.variant,
        regime=regime,
        budget=budget,
        params=cand.params,
        params_total=cand.params_total,
        flops_per_sample=cand.flops_per_sample,
        tokens_per_sample=cand.tokens_per_sample,
        global_batch=batch,
        samples=steps * batch,
        steps=steps,
        tokens=steps * batch * cand.tokens_per_sample,
        flops=flops,
        hours_here=None if not cand.samples_per_s else steps * batch / cand.samples_per_s / 3600.0,
        node_hours=cost.node_hours(cand, steps * batch, flops),
        epochs=epochs,
    )


def _refusal(
    budget: float, n_opt: float, candidates: list[Candidate], runs: list[PlanRow], why_dropped: str = ""
) -> str | None:
    """Why a budget cannot be fitted (None: it can): no candidates, no runnable candidate (`why_dropped`: what
    removed them, `refusals.limits_text`), or a grid that does not bracket N_opt."""
    c = format_budget(budget)
    if not candidates:
        return f"budget {c}: no candidates"
    if not runs:
        unbracketed = _bracket(n_opt, [cand.params for cand in candidates], "every candidate")
        return f"budget {c}: no candidate left (N_opt={n_opt:.3g}): {why_dropped}" + (
            f"; besides, {unbracketed}" if unbracketed else ""
        )
    unbracketed = _bracket(n_opt, [r.params for r in runs], "every kept candidate")
    return None if unbracketed is None else f"budget {c}: {unbracketed}"


def _bracket(n_opt: float, ns: list[float], which: str) -> str | None:
    """Why sizes `ns` do not bracket N_opt, with the size to add (None: they do)."""
    if min(ns) > n_opt:
        return (
            f"the grid does not bracket the predicted optimum N_opt={n_opt:.3g}: {which} is larger (smallest "
            f"N={min(ns):.3g}); add a smaller backbone or variant (N <= {n_opt:.3g}) or drop this budget"
        )
    if max(ns) < n_opt:
        return (
            f"the grid does not bracket the predicted optimum N_opt={n_opt:.3g}: {which} is smaller (largest "
            f"N={max(ns):.3g}); add a larger backbone (N >= {n_opt:.3g}) or drop this budget"
        )
    return None


@dataclass
class StudyPlan:
    """The runs of every budget and where their centre came from (no forecast): what the DAG needs."""

    centre: Centre
    plans: list[BudgetPlan]
    cost: Cost
    speed_sources: list[str] = field(default_factory=list)
    # Sizes whose speed here is interpolated from the measured ones (candidates.INTERPOLATED).
    interpolated: list[str] = field(default_factory=list)

    @property
    def runs(self) -> list[PlanRow]:
        return [r for p in self.plans if not p.refused for r in p.runs]


def study_centre(
    family: str,
    regime: str,
    options: PlanOptions,
    out: str | Path | None = None,
    scaling_study_dir: str | Path | None = None,
) -> Centre:
    """The N_opt(C) a study's grids are centred on (its own plan, a previous round, or the prior)."""
    return find_centre(
        Path(out) if out else None,
        Path(scaling_study_dir) if scaling_study_dir else None,
        family,
        regime,
        options.prior_a,
        options.prior_k,
        Path(options.previous_round) if options.previous_round else None,
    )


def rule_sizes(
    family: str,
    budgets: list[float],
    options: PlanOptions,
    *,
    regime: str = "e2e",
    variants: list[str] | None = None,
    out: str | Path | None = None,
    scaling_study_dir: str | Path | None = None,
    centre: Centre | None = None,
    spec: FamilySpec | None = None,
) -> dict[float, list[str]]:
    """`{budget: rule sizes}` of `options.sizes_per_budget` (empty without it), centred as `plan_runs` centres,
    their N counted at `spec` (the family's shape and tokenizer; None: its laptop default).

    The workflow calls this to know the calibrations a study needs before any exists.
    """
    from prism.isoflop.design.ladder import study_sizes  # noqa: PLC0415 lazy: the CLI's parser imports this module

    if not options.sizes_per_budget:
        return {}
    if centre is None:
        centre = study_centre(family, regime, options, out, scaling_study_dir)
    return study_sizes(
        sorted(set(budgets)),
        centre.n_opt,
        options.window,
        options.sizes_per_budget,
        family,
        regime,
        list(variants or ["BASE"]),
        options.size_rule,
        spec,
    )


def budget_candidates(
    family: str,
    budgets: list[float],
    calibration_dir: str | Path | None,
    options: PlanOptions,
    *,
    regime: str,
    backbones: list[str] | None,
    variants: list[str] | None,
    centre: Centre,
    spec: FamilySpec | None,
) -> tuple[list[Candidate], dict[float, list[Candidate]]]:
    """Every calibrated candidate, and each budget's: a size of the shape rule is a candidate of the
    budgets that picked it, a given backbone of all of them."""
    by_budget = rule_sizes(family, budgets, options, regime=regime, variants=variants, centre=centre, spec=spec)
    if not by_budget:
        cands = load_candidates(calibration_dir, family, regime, backbones, variants, spec)
        return cands, {b: cands for b in set(budgets)}
    from prism.isoflop.design.ladder import union  # noqa: PLC0415 lazy: the CLI's parser imports this module

    given = list(backbones or [])
    names = list(dict.fromkeys(given + union(by_budget)))
    cands = load_candidates(calibration_dir, family, regime, names, list(variants or ["BASE"]), spec)
    return cands, {b: [c for c in cands if c.backbone in given or c.backbone in by_budget[b]] for b in set(budgets)}


def check_batch_settings(options: PlanOptions, job_ranks: int, batch_law: tuple[float, float] | None) -> None:
    """Refuse, before any planning, settings that cannot give every run a batch: bad option values, a
    given batch the job's ranks cannot split, a batch law beside a given batch."""
    validate(options)
    if options.global_batch is None:
        return
    check_batch(options.global_batch, job_ranks, "plan.global_batch", ranks_text(job_ranks))
    if batch_law:
        raise PrismError(
            f"tune.batch_rule compute: plan.global_batch is {options.global_batch}, so no batch is chosen; "
            "set plan.global_batch to null for the rule to choose each run's, or tune.batch_rule to largest"
        )


def plan_runs(
    family: str,
    budgets: list[float],
    calibration_dir: str | Path | None,
    options: PlanOptions = PlanOptions(),
    *,
    regime: str = "e2e",
    backbones: list[str] | None = None,
    variants: list[str] | None = None,
    out: str | Path | None = None,
    scaling_study_dir: str | Path | None = None,
    data: str | Path | None = None,
    job_ranks: int = 1,
    ranks_per_node: int | None = None,
    spec: FamilySpec | None = None,
    devices: Devices | None = None,
    lr_rule: LrRule | None = None,
    probe: str | Path | None = None,
    lr_tokens: str = "run",
    batch_law: tuple[float, float] | None = None,
) -> StudyPlan:
    """The planned runs: a function of these arguments and the files they name (calibrations, speed
    files, an existing plan at `out`, prior files), nothing else.

    `prism isoflop plan` writes its result to plan.yaml and the workflow calls it, with the same
    arguments, to know the training jobs while the plan job has not run yet; so the two agree.
    `data` is the shard directory the runs train on: its training split's size gives each run's
    epochs (and the refusal above `options.max_epochs`). `job_ranks` is what every training job's
    global batch must divide among (its launcher's ranks per node x its nodes): a given
    `options.global_batch` that does not is refused here, before any job is submitted. With
    `ranks_per_node`, the measured speeds are those of one of a cluster node's ranks, and price
    each run's node-hours. `spec` is the family's shape and tokenizer (None: its laptop default):
    sizes are counted at it, and data or calibrations made at another are refused. Each run is
    placed on `devices` (None: one device of this host; prism.isoflop.design.placement), a run
    none holds refused. Each run's peak lr is `lr_rule`'s (None: the hand rule), recorded in its
    row, at its own tokens (`lr_tokens` run) or, where one wsd trajectory serves a size's budgets at
    one lr (`lr_tokens` size), at the geometric mean tokens of that size's runs; a fitted rule that
    does not cover the grid's widths is refused. `batch_law` (c, b): where the plan chooses the batch
    (`options.global_batch` null), each run's is at most the critical batch c C^b tokens of its budget.
    """
    check_data_spec(family, data, spec)
    check_batch_settings(options, job_ranks, batch_law)
    centre = study_centre(family, regime, options, out, scaling_study_dir)
    cands, per_budget = budget_candidates(
        family, budgets, calibration_dir, options, regime=regime, backbones=backbones, variants=variants,
        centre=centre, spec=spec,
    )  # fmt: skip
    # `probe`: the probe record a cluster study prices its jobs by, once it exists (pricing.priced).
    cost = priced(Cost.from_options(options, ranks_per_node), probe, cands)
    split = None if data is None else train_samples(data)
    plans = [
        plan_budget(
            c, per_budget[c], family, regime, centre, options.window, options.global_batch,
            options.min_steps, split, options.max_epochs, cost, job_ranks, batch_law,
        )
        for c in sorted(set(budgets))
    ]  # fmt: skip
    for p in plans:
        p.runs = place_rows(p.runs, devices or Devices(), family_spec(family, spec))
        if not per_budget[p.budget]:
            sizes = [c.params for c in cands] + smallest_size(family, regime, variants, options, spec)
            p.refused = no_sizes_text(p.budget, p.n_opt, options.window, sizes, centre.a, centre.k)
    with_lr(plans, lr_rule or LrRule(), lr_tokens)
    lr_covers([r for p in plans if not p.refused for r in p.runs], lr_rule or LrRule())
    study = StudyPlan(
        centre,
        plans,
        cost,
        sorted({c.speed_source for c in cands if c.speed_source and not c.speed_interpolated}),
        sorted({c.backbone for c in cands if c.speed_interpolated}),
    )
    if not study.runs:
        raise NoBudget("no budget can be planned: " + "; ".join(p.refused or "" for p in plans if p.refused))
    return study


def smallest_size(
    family: str, regime: str, variants: list[str] | None, options: PlanOptions, spec: FamilySpec | None
) -> list[float]:
    """The N of the shape rule's smallest size (none without `plan.sizes_per_budget`): where a study none of
    whose budgets reaches a size learns how far off they are."""
    from prism.model.config import smallest_rule_size  # noqa: PLC0415 lazy: the CLI's parser imports this module
    from prism.model.paramcount import trainable_params  # noqa: PLC0415 lazy: the CLI's parser imports this module

    if not options.sizes_per_budget:
        return []
    try:
        name = smallest_rule_size(options.size_rule)
        return [float(trainable_params(family, name, (variants or ["BASE"])[0], regime, spec))]
    except PrismError:
        return []


def _width(backbone: str) -> int:
    from prism.model.config import backbone_config  # noqa: PLC0415 lazy: the CLI's parser imports this module

    return backbone_config(backbone).d_model


def with_lr(plans: list[BudgetPlan], rule: LrRule, lr_tokens: str = "run") -> None:
    """Set each run's peak lr, `rule`'s at its width and tokens (`lr_tokens` size: at the geometric mean
    tokens of its size's runs over the budgets, one lr per wsd trajectory), and the rule's kind."""
    if lr_tokens not in ("run", "size"):
        raise PrismError(f"plan: lr_tokens {lr_tokens!r}; valid: run, size")
    logs: dict[tuple, list[float]] = {}
    for r in (r for p in plans if not p.refused for r in p.runs):
        logs.setdefault((r.backbone, r.variant, r.regime), []).append(math.log(r.tokens))

    def tokens(r: PlanRow) -> float:
        found = logs.get((r.backbone, r.variant, r.regime)) or [math.log(r.tokens)]
        return math.exp(sum(found) / len(found)) if lr_tokens == "size" else r.tokens

    for p in plans:
        p.runs = [replace(r, lr=float(f"{rule.lr(_width(r.backbone), tokens(r)):.4g}"), lr_rule=rule.kind)
                  for r in p.runs]  # fmt: skip
    rule.check_covers([], "plan", [tokens(r) for p in plans if not p.refused for r in p.runs])


# plan_runs' keyword arguments (what make_plan passes on; the rest of its keywords are PlanOptions fields).
PLAN_RUNS_KEYWORDS = frozenset(inspect.signature(plan_runs).parameters) - {
    "family",
    "budgets",
    "calibration_dir",
    "options",
}


def lr_covers(runs: list[PlanRow], rule: LrRule) -> None:
    """Refuse a rule fitted on widths the grid's runs go beyond (by more than its margin)."""
    rule.check_covers([_width(r.backbone) for r in runs], "plan")


def make_plan(
    family: str,
    budgets: list[float],
    calibration_dir: str | Path | None,
    options: PlanOptions | None = None,
    cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
    **keywords,
) -> dict:
    """The whole plan as a dict (the plan.yaml content): `plan_runs` plus the forecast. `cooldown_fraction`:
    the wsd cooldown the study trains with, what the grid costs as trajectories (`schedules`), not which runs
    it holds. `keywords` are plan_runs' own (regime, backbones, out, data, lr_rule, ...: passed on as given),
    and fields of PlanOptions that replace `options`'s (e.g. `window=0.3`, for tests and scripts)."""
    own = {key: keywords.pop(key) for key in list(keywords) if key in PLAN_RUNS_KEYWORDS}
    options = replace(options or PlanOptions(), **keywords)
    study = plan_runs(family, budgets, calibration_dir, options, **own)
    regime, lr_rule = own.get("regime", "e2e"), own.get("lr_rule")
    centre, plans, runs = study.centre, study.plans, study.runs
    refused = [{"budget": p.budget, "reason": p.refused} for p in plans if p.refused]
    return {
        "family": family,
        "regime": regime,
        "calibration_dir": None if calibration_dir is None else str(calibration_dir),
        "budgets": [p.budget for p in plans if not p.refused],
        "centre": asdict(centre) | {"n_opt": {format_budget(p.budget): p.n_opt for p in plans}},
        "options": asdict(options),
        "window_decades": options.window,
        "min_steps": options.min_steps,
        "cost": cost_summary(runs, study.cost, study.speed_sources, study.interpolated),
        # The same runs as independent cosine runs and as wsd trajectories with branches.
        "schedules": schedule_costs(runs, cooldown_fraction, min_steps=options.min_steps),
        "runs": [r.to_json() for r in runs],
        "lr_rule": (lr_rule or LrRule()).to_json(),
        # A sweep measured on this design (a previous round's lr_rule.json): what the fit weighs an untuned
        # rule against (prism.isoflop.fit.lr_sensitivity).
        "lr_reference": lr_reference(options.previous_round, family),
        "dropped": [d for p in plans for d in p.dropped],
        "refused": refused,
        "forecast": plan_forecast(runs, centre, options),
    }


def plan_forecast(runs: list[PlanRow], centre: Centre, options: PlanOptions) -> dict:
    """The identifiability forecast of the planned grid, on the centre's fitted surface where it has one,
    else on plausible surfaces through the centre, with the surface's source."""
    from prism.isoflop.design import forecast as fc_mod  # noqa: PLC0415 lazy: the CLI's parser imports this module

    fc = fc_mod.forecast_plan(
        [r.params for r in runs],
        [r.tokens for r in runs],
        [r.budget for r in runs],
        centre.a,
        centre.k,
        surface=Surface(**centre.surface) if centre.surface else None,
        noise=options.noise if options.noise is not None else centre.noise,
        n_sims=options.simulations,
        seed=options.forecast_seed,
    )
    surface_source = (
        f"fitted surface of {centre.source}"
        if centre.surface
        else f"{fc.scenarios} plausible surfaces through the centre (first round; a previous round's fit in "
        "prior.json gives its own surface and noise)"
    )
    return fc.to_json() | {"surface_source": surface_source}
