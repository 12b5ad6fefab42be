"""The planner's settings (`prism isoflop plan` flags, the config's `plan:` section) and its budgets flag.

Declarations only: the planning maths that reads them is `plan.py`, the pricing `pricing.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prism.core.errors import PrismError
from prism.core.options import option
from prism.data.volume import MAX_EPOCHS
from prism.isoflop.design.centre import DEFAULT_PRIOR_A, DEFAULT_PRIOR_K
from prism.isoflop.design.trajectories import DEFAULT_MIN_STEPS

DEFAULT_WINDOW = 0.6
DEFAULT_MFU = 0.4


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
