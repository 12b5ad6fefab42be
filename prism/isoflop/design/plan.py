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
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import yaml

from prism.atomic import write_text_atomic
from prism.data.batching import check_batch
from prism.data.volume import MAX_EPOCHS, epochs_refusal, train_samples
from prism.errors import PrismError
from prism.families import FamilySpec, check_same_spec, family_spec, spec_from_manifest
from prism.ids import format_budget, run_id
from prism.isoflop.design.candidates import INTERPOLATED, Candidate, load_candidates
from prism.isoflop.design.centre import DEFAULT_PRIOR_A, DEFAULT_PRIOR_K, Centre, find_centre
from prism.isoflop.design.gate import plan_notes, plan_stop, plan_summary
from prism.isoflop.design.placement import Devices, place_rows
from prism.isoflop.design.plantext import cost_text, forecast_text, plan_csv_text, plan_table, short_budgets_text
from prism.isoflop.design.pricing import priced
from prism.isoflop.design.trajectories import DEFAULT_COOLDOWN_FRACTION, DEFAULT_MIN_STEPS, saving_text, schedule_costs
from prism.isoflop.records import PlanRow, Surface
from prism.options import option, validate
from prism.train.lr_rule import LrRule, read_rule

DEFAULT_WINDOW = 0.6
DEFAULT_MFU = 0.4
MAX_AUTO_BATCH = 512
FLOP_TOLERANCE = 0.01


@dataclass(frozen=True)
class PlanOptions:
    """The planner's settings: `prism isoflop plan` flags and the config's `plan:` section, one field each."""

    global_batch: int | None = option(
        None,
        "samples per optimizer step of every run (none: per run, the largest power of 2 leaving min_steps steps)",
        metavar="B",
        minimum=1,
        doc=(
            "Samples per optimizer step of every run (null lets the planner choose per run). One batch for "
            "every run: a wsd trajectory serves all its budgets only at one batch. A smaller batch lowers short "
            "runs' losses but can flatten the IsoFLOP curves of the larger budgets."
        ),
    )
    min_steps: int = option(
        DEFAULT_MIN_STEPS,
        "drop runs with fewer optimizer steps (50 keeps FLOPs within 1%); half of it is every run's warm-up",
        metavar="N",
        minimum=1,
        doc=(
            "Drop runs with fewer optimizer steps than this; every run warms up over half of it, so no run "
            "spends more than half of its steps warming up."
        ),
    )
    window: float = option(
        DEFAULT_WINDOW,
        "keep candidates within this many decades of the predicted N_opt",
        metavar="DECADES",
        exclusive_minimum=0,
        doc=(
            "Keep candidates within this many decades of the predicted N_opt (either side). Wide enough for 6-8 "
            "sizes a budget, each parabola has 3-5 residual degrees of freedom and its curvature stands out of "
            "the noise; the outer sizes carry the curvature."
        ),
    )
    prior_a: float | None = option(
        None,
        f"prior exponent a of N_opt = k C^a (none: a previous round's fit, else {DEFAULT_PRIOR_A})",
        metavar="A",
        exclusive_minimum=0,
        doc=(
            "Prior exponent a of N_opt = k C^a that centres each budget's grid (null - a previous round's fit, "
            "else 0.5). Best taken, with prior_k, from a pilot of the study's own design on its own hardware: "
            "a grid centred off the optimum loses its minimum at the edge."
        ),
    )
    prior_k: float | None = option(
        None,
        f"prior coefficient k of N_opt = k C^a (none: a previous round's fit, else {DEFAULT_PRIOR_K})",
        metavar="K",
        exclusive_minimum=0,
        doc=(
            "Prior coefficient k of N_opt = k C^a (null - a previous round's fit, else 0.1); from the same "
            "pilot as prior_a."
        ),
    )
    previous_round: str | None = option(
        None,
        "folder of an earlier round (a study or family folder): its prior.json or identifiable "
        "fit/REGIME.json centres the grids and gives the forecast its loss surface",
        metavar="DIR",
        doc=(
            "Folder of an earlier round (a study or family folder, e.g. scaling-study-round1/text_image) whose "
            "prior.json or identifiable fit/REGIME.json centres the grids instead of the prior; with prior_a "
            "and prior_k given, the grids keep that centre and the round lends the forecast its loss surface "
            "and noise. Never this study's own folder, whose fit is downstream of the plan. A round made from "
            "one seed of the same design calibrates the forecast on it: its fitted surface, with the noise at "
            "which studies simulated on it come out as its seeds did (config/round0, docs/measurements.md). A "
            "path as in definitions/path, or null."
        ),
        schema={"anyOf": [{"type": "null"}, {"$ref": "#/definitions/path"}], "type": None},
    )
    node_peak_flops: float | None = option(
        None,
        "peak FLOP/s of one cluster node in the training precision; with mfu it gives each run's "
        "estimated node-hours (none: no cluster estimate)",
        metavar="FLOPS",
        exclusive_minimum=0,
        doc=(
            "Peak FLOP/s of one cluster node in the training precision; with mfu, each run's estimated "
            "node-hours (null - no estimate)."
        ),
    )
    mfu: float = option(
        DEFAULT_MFU,
        "model FLOPs utilisation assumed for the cluster estimate",
        metavar="FRACTION",
        exclusive_minimum=0,
        doc="Model FLOPs utilisation assumed for the node-hours estimate.",
        schema={"maximum": 1},
    )
    noise: float | None = option(
        None,
        "loss noise (std) the identifiability forecast assumes (none: a previous "
        "round's measured noise, else a share of the loss)",
        metavar="STD",
        exclusive_minimum=0,
        doc=(
            "Loss noise (std) the identifiability forecast assumes (null - a previous round's measured noise, "
            "else 0.5-2% of the simulated loss)."
        ),
    )
    simulations: int = option(
        200,
        "simulated studies in the forecast",
        metavar="N",
        minimum=1,
        doc="Simulated studies in the identifiability forecast.",
    )
    forecast_seed: int = option(
        0, "seed of the forecast's simulations", metavar="S", minimum=0, doc="Seed of the forecast's simulations."
    )
    max_epochs: float = option(
        MAX_EPOCHS,
        "drop runs that would pass over their training split more often than this (repeated data bends the loss curve)",
        metavar="EPOCHS",
        exclusive_minimum=0,
        doc="Drop runs that would pass over their training split more often than this.",
    )
    sizes_per_budget: int | None = option(
        None,
        "take backbones from the shape rule: per budget at least this many sizes inside its window, evenly "
        "spaced in log N, beside any given backbones (none: the given backbones only; e2e only)",
        metavar="K",
        minimum=1,
        doc=(
            "Take backbones from the shape rule (prism.model.sizes): per budget at least this many sizes inside"
            " its window, evenly spaced in log N, computed from the config alone so every calibration job is "
            "known in advance; beside the `backbones` list. null: that list only. e2e only. 6 or more leave "
            "each budget's parabola residual degrees of freedom to measure its noise."
        ),
    )
    size_rule: str = option(
        "n",
        "the shape rule of sizes_per_budget: n (CPU shapes) or g (accelerator shapes, Llama-2 proportions)",
        choices=("n", "g"),
        doc=(
            "The shape rule of sizes_per_budget: n (CPU shapes, two heads up to width 128) or g (accelerator "
            "shapes, Llama-2 proportions)."
        ),
    )
    allow_undetermined: bool = option(
        False,
        "write the plan (and train it) even when a budget is refused or the forecast is UNDETERMINED: "
        "a pilot; otherwise the plan fails with one line naming what to change",
        doc=(
            "Train even when a budget is refused or the forecast is UNDETERMINED (a pilot); otherwise the plan "
            "job fails, before any training job starts, with one line naming what to change."
        ),
    )


def ranks_text(job_ranks: int) -> str:
    """Where a study's ranks per job come from, for the line that refuses a batch."""
    return f"each training job (--job-ranks {job_ranks}: the launcher's ranks per node x a job's nodes)"


def parse_budgets(text: str) -> list[float]:
    """`1e17,3e17` -> [1e17, 3e17], ascending, no duplicates; a clear error for anything else."""
    out = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            raise PrismError(f"--budgets: {part!r} is not a number (use e.g. 1e17,3e17)") from None
        if not (value > 0 and math.isfinite(value)):
            raise PrismError(f"--budgets: {part!r} must be a positive FLOP count")
        out.append(value)
    if not out:
        raise PrismError("--budgets: no budget given (use e.g. 1e17,3e17)")
    return sorted(set(out))


@dataclass(frozen=True)
class Cost:
    """How the plan turns a run into cluster node-hours: the speed the calibration measured on one rank
    of a node (`ranks_per_node` of them; what a cluster study's timed steps are), else a stated node
    throughput (the peak x an assumed MFU)."""

    node_flops: float | None = None  # sustained FLOP/s of one cluster node (peak x MFU), assumed
    node_source: str = ""
    ranks_per_node: int | None = None  # measured samples/s are one rank's of a node's this many
    node_peak_flops: float | None = None  # what a measured speed's MFU is of
    # Which peak that is: the vendor's figure (plan.node_peak_flops) until the probe measured one (prism.peak).
    peak_label: str = "the vendor's node peak plan.node_peak_flops"
    # The probe's samples/s per rank over the speed job's (prism.isoflop.design.pricing), and what it says.
    factor: float = 1.0
    probe_note: str = ""

    @classmethod
    def from_options(cls, options: PlanOptions, ranks_per_node: int | None = None) -> Cost:
        if options.node_peak_flops is None:
            return cls(ranks_per_node=ranks_per_node)
        return cls(
            options.node_peak_flops * options.mfu,
            f"estimate: assumed MFU {options.mfu:g} (plan.mfu, not measured) x the vendor's node peak "
            f"{options.node_peak_flops:.3g} FLOP/s (plan.node_peak_flops)",
            ranks_per_node,
            options.node_peak_flops,
        )

    def measured(self, speed_sources: list[str]) -> bool:
        """Whether node-hours come from measured speeds (ranks known and some size timed)."""
        return bool(self.ranks_per_node and speed_sources)

    def measured_source(self, runs: list[PlanRow], speed_sources: list[str], interpolated: list[str]) -> str:
        """The label of node-hours from measured speeds, with the MFU they imply of the stated node peak."""
        text = (
            f"measured: samples/s of one rank (`prism isoflop calibrate --measure-throughput` on "
            f"{', '.join(speed_sources)}) x {self.ranks_per_node} ranks a node (cluster.ranks_per_node); "
            "the steps alone: start-up, evaluations and the collectives between ranks not counted"
        )
        if self.node_peak_flops:
            mfus = [r.flops / (r.node_hours * 3600.0) / self.node_peak_flops for r in runs if r.node_hours]
            if mfus:
                text += f"; MFU {min(mfus):.2f}-{max(mfus):.2f} of {self.peak_label} {self.node_peak_flops:.3g}"
        if interpolated:
            text += f"; the speed of {', '.join(interpolated)} {INTERPOLATED}"
        return text + (f"; {self.probe_note}" if self.probe_note else "")

    def assumed_source(self) -> str:
        """The label of node-hours without measured speeds (with the probe's word, where there is one)."""
        text = self.node_source or "not estimated (set plan.node_peak_flops, and plan.mfu)"
        return text + (f"; {self.probe_note}" if self.probe_note and self.node_source else "")

    def node_hours(self, cand: Candidate, samples: int, flops: float) -> float | None:
        """A run's node-hours: at its measured (or interpolated) speed where the ranks are known, else
        at the assumed node throughput; None when neither is."""
        if self.ranks_per_node and cand.samples_per_s:
            return samples / (cand.samples_per_s * self.factor * self.ranks_per_node) / 3600.0
        return flops / self.node_flops / 3600.0 if self.node_flops else None


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
            out.dropped.append(_dropped(rid, budget, cand, reason))
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
            out.dropped.append(_dropped(rid, budget, cand, reason))
            continue
        flops = steps * batch * cand.flops_per_sample
        if abs(flops / budget - 1) > FLOP_TOLERANCE:
            reason = (
                f"{steps} steps x batch {batch} spend {flops:.3g} FLOPs, "
                f"{100 * (flops / budget - 1):+.1f}% off the budget"
            )
            out.dropped.append(_dropped(rid, budget, cand, reason))
            continue
        epochs = None if split_samples is None else steps * batch / split_samples
        refusal = None if epochs is None else epochs_refusal(rid, epochs, max_epochs)
        if refusal is not None:
            out.dropped.append(_dropped(rid, budget, cand, refusal))
            continue
        out.runs.append(_plan_row(rid, family, regime, budget, cand, batch, steps, epochs, cost))
    out.refused = _refusal(budget, n_opt, candidates, out.runs)
    return out


def _dropped(rid: str, budget: float, cand: Candidate, reason: str) -> dict:
    """A candidate the budget does not run, and why."""
    return {
        "run_id": rid,
        "budget": budget,
        "backbone": cand.backbone,
        "variant": cand.variant,
        "params": cand.params,
        "reason": reason,
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


def _refusal(budget: float, n_opt: float, candidates: list[Candidate], runs: list[PlanRow]) -> str | None:
    """Why a budget cannot be fitted (None: it can): no candidates, a grid that does not bracket N_opt,
    or no runnable candidate."""
    ns = [r.params for r in runs] or [cand.params for cand in candidates]
    c = format_budget(budget)
    why = "every kept candidate" if runs else "no candidate is runnable (see the dropped runs) and every one"
    if not candidates:
        return f"budget {c}: no candidates"
    if min(ns) > n_opt:
        return (
            f"budget {c}: the grid does not bracket the predicted optimum N_opt={n_opt:.3g}: {why} "
            f"is larger (smallest N={min(ns):.3g}); add a smaller backbone or variant (N <= {n_opt:.3g}) "
            "or drop this budget"
        )
    if max(ns) < n_opt:
        return (
            f"budget {c}: the grid does not bracket the predicted optimum N_opt={n_opt:.3g}: {why} "
            f"is smaller (largest N={max(ns):.3g}); add a larger backbone (N >= {n_opt:.3g}) or drop this budget"
        )
    if not runs:
        return f"budget {c}: no candidate left (N_opt={n_opt:.3g}); see the dropped runs"
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


def check_data_spec(family: str, data: str | Path | None, spec: FamilySpec | None = None) -> None:
    """Refuse data made at another shape or tokenizer than the plan's `spec` (a manifest without the
    fields: none to check)."""
    path = Path(data, "manifest.json") if data is not None else None
    if path is None or not path.is_file():
        return
    manifest = json.loads(path.read_text())
    if isinstance(manifest, dict) and {"family", "modality_shape", "n_modality_tokens", "text_len"} <= manifest.keys():
        check_same_spec(family_spec(family, spec), spec_from_manifest(manifest, data), f"data {data}")


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
    validate(options)
    if options.global_batch is not None:
        check_batch(options.global_batch, job_ranks, "plan.global_batch", ranks_text(job_ranks))
        if batch_law:
            raise PrismError(
                f"tune.batch_rule compute: plan.global_batch is {options.global_batch}, so no batch is chosen; "
                "set plan.global_batch to null for the rule to choose each run's, or tune.batch_rule to largest"
            )
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
        raise PrismError("no budget can be planned: " + "; ".join(p.refused or "" for p in plans if p.refused))
    return study


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


def lr_covers(runs: list[PlanRow], rule: LrRule) -> None:
    """Refuse a rule fitted on widths the grid's runs go beyond (by more than its margin)."""
    rule.check_covers([_width(r.backbone) for r in runs], "plan")


def _total(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(values)


def cost_summary(runs: list[PlanRow], cost: Cost, speed_sources: list[str], interpolated: list[str] = ()) -> dict:
    """Totals of the estimated wall time here and node-hours on the cluster, each with its source."""
    guessed = sorted({r.backbone for r in runs if r.backbone in set(interpolated)}, key=list(interpolated).index)
    source = (
        "estimate of the training steps alone (start-up and evaluations not included): samples/s "
        "measured by `prism isoflop calibrate --measure-throughput` on " + ", ".join(speed_sources)
        if speed_sources
        else "not measured (no calibration/*.speed.json; config calibrate.measure_throughput)"
    )
    if guessed:
        source += f"; {len(guessed)} size(s) not measured yet, their speed {INTERPOLATED}: {', '.join(guessed)}"
    return {
        "hours_here_total": _total([r.hours_here for r in runs]),
        "hours_here_source": source,
        "hours_here_interpolated": guessed,
        "node_hours_total": _total([r.node_hours for r in runs]),
        "node_hours_source": (
            cost.measured_source(runs, speed_sources, guessed)
            if cost.measured(speed_sources)
            else cost.assumed_source()
        ),
    }


def make_plan(
    family: str,
    budgets: list[float],
    calibration_dir: str | Path | None,
    scaling_study_dir: str | Path | None = None,
    regime: str = "e2e",
    backbones: list[str] | None = None,
    variants: list[str] | None = None,
    out: str | Path | None = None,
    data: str | Path | None = None,
    options: PlanOptions | None = None,
    cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
    job_ranks: int = 1,
    ranks_per_node: int | None = None,
    spec: FamilySpec | None = None,
    devices: Devices | None = None,
    lr_rule: LrRule | None = None,
    probe: str | Path | None = None,
    lr_tokens: str = "run",
    batch_law: tuple[float, float] | None = None,
    **overrides,
) -> dict:
    """The whole plan as a dict (the plan.yaml content): `plan_runs` plus the forecast. `cooldown_fraction`:
    the wsd cooldown the study trains with, what the grid costs as trajectories (`schedules`), not which runs
    it holds. `overrides` replace fields of `options` (e.g. `window=0.3`), for tests and scripts."""
    from prism.isoflop.design import forecast as fc_mod  # noqa: PLC0415 lazy: the CLI's parser imports this module

    options = replace(options or PlanOptions(), **overrides)
    study = plan_runs(family, budgets, calibration_dir, options, regime=regime, backbones=backbones, variants=variants,
                      out=out, scaling_study_dir=scaling_study_dir, data=data, job_ranks=job_ranks,
                      ranks_per_node=ranks_per_node, spec=spec, devices=devices, lr_rule=lr_rule,
                      probe=probe, lr_tokens=lr_tokens, batch_law=batch_law)  # fmt: skip
    centre, plans, runs = study.centre, study.plans, study.runs
    refused = [{"budget": p.budget, "reason": p.refused} for p in plans if p.refused]
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
        "forecast": fc.to_json()
        | {
            "surface_source": (
                f"fitted surface of {centre.source}"
                if centre.surface
                else f"{fc.scenarios} plausible surfaces through the centre (first round; a previous round's fit in "
                "prior.json gives its own surface and noise)"
            )
        },
    }


def lr_reference(previous_round: str | None, family: str) -> dict | None:
    """The previous round's fitted lr rule of `family` ({"file", "rule"}), or None where it has none."""
    if not previous_round:
        return None
    path = Path(previous_round) / family / "lr_rule.json"
    return {"file": str(path), "rule": read_rule(path).to_json()} if path.is_file() else None


def lr_rule_text(plan: dict) -> list[str]:
    """The plan's lines on its lr rule and, for a fitted one, what its tuning stage cost."""
    from prism.isoflop.design.tuning import tuning_cost_line  # noqa: PLC0415 lazy: numpy

    rule = LrRule(**{k: v for k, v in (plan.get("lr_rule") or {}).items()})
    sched = plan.get("schedules") or {}
    lines = [rule.describe()]
    if plan.get("lr_reference") and rule.kind != "fitted":
        where = plan["lr_reference"]["file"]
        lines.append(f"lr sweep of this design measured in {where}: the fit weighs the rule against it")
    cost = tuning_cost_line(rule, float(sched.get("cosine_flops") or sum(r["flops"] for r in plan["runs"])))
    if cost:
        wsd = sched.get("wsd_flops")
        lines.append(cost + (f"; {100 * rule.flops / wsd:.1f}% of its {wsd:.3g} as wsd trajectories" if wsd else ""))
    return lines


class PlanStopped(PrismError):
    """A plan that cannot answer its question (and no `allow_undetermined`): nothing was written.

    The message is the one line saying why and what to change; `text` is the whole plan, for the log.
    """

    def __init__(self, line: str, text: str):
        super().__init__(line)
        self.text = text


def run_plan(out: str | Path | None, dry_run: bool, **kwargs) -> str:
    """`prism isoflop plan`: make the plan; write plan.yaml and plan.csv (atomically) unless dry run.

    Returns the text to print (the table, its cost, refusals, the forecast, and last its summary
    line). A refused budget or an UNDETERMINED forecast raises PlanStopped before anything is
    written, unless `allow_undetermined`; a dry run says it would stop.
    """
    if not dry_run and not out:
        raise PrismError("--out PLAN.yaml is required unless --dry-run")
    plan = make_plan(out=out, **kwargs)
    rows = [PlanRow(**r) for r in plan["runs"]]
    text = [plan_table(rows, set(plan["cost"]["hours_here_interpolated"])), ""]
    text.append(
        f"{len(rows)} runs on {len(plan['budgets'])} budget(s); centre N_opt = {plan['centre']['k']:.3g} C^"
        f"{plan['centre']['a']:.3g} ({plan['centre']['source']})"
    )
    text += cost_text(plan["cost"])
    text += lr_rule_text(plan)
    text += [f"dropped {d['run_id']}: {d['reason']}" for d in plan["dropped"]]
    text += short_budgets_text(rows, plan["budgets"], plan["options"].get("sizes_per_budget"))
    text += plan_notes(plan)
    text += ["", forecast_text(plan["forecast"])]

    text += ["", saving_text(rows, plan["schedules"]["cooldown_fraction"], min_steps=plan["min_steps"])]
    stop = plan_stop(plan)
    if stop and not plan["options"]["allow_undetermined"]:
        if not dry_run:
            raise PlanStopped(stop, "\n".join(text))
        text.append(f"the plan job would stop: {stop}")
    if not dry_run:
        out = Path(out)
        write_text_atomic(out.with_suffix(".csv"), plan_csv_text(rows))
        write_text_atomic(out, yaml.safe_dump(plan, sort_keys=False))
        text.append(f"wrote {out} and {out.with_suffix('.csv')}")
    text.append(plan_summary(plan))
    return "\n".join(text)
