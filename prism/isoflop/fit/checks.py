"""Input checks before a fit: rows that would bias it are left out, each with its reason.

- An exact duplicate (same params, tokens, loss and budget as an earlier row) is
  dropped: fitted twice, it would count its run twice and narrow the intervals.
- A run whose FLOP count is not its budget is excluded: fitted under the wrong budget it
  moves that budget's parabola. The count is the runs CSV's `flops` column, or 6ND where
  the CSV has none. The budget is the user's label, and a user's counter (attention,
  embeddings, a frozen encoder) makes count / budget differ from 1 smoothly with size:
  that ratio is fitted across the grid (`ratio_trend`: log ratio quadratic in log N,
  fitted robustly), and a run is excluded only when it is more than `tolerance` off both
  its budget and that trend (a typo, a run filed under the wrong budget), named with its
  ratio and the trend's at its size.
Both are pure functions of the records (no I/O), so they are tested on hand-made rows.
"""

from __future__ import annotations

import math

import numpy as np

from prism.core.ids import format_budget
from prism.isoflop.fit.result import Exclusion
from prism.isoflop.records import RunRecord

DEFAULT_BUDGET_TOLERANCE = 0.10


def exclusion(r: RunRecord, reason: str, kind: str) -> Exclusion:
    return Exclusion(r.run_id, reason, kind, r.params, r.tokens, r.loss, r.budget)


def drop_duplicates(records: list[RunRecord]) -> tuple[list[RunRecord], list[Exclusion]]:
    """Keep the first of each (params, tokens, loss, budget); the others are excluded naming it."""
    seen: dict[tuple, RunRecord] = {}
    kept, dropped = [], []
    for r in records:
        key = (r.params, r.tokens, r.loss, r.budget)
        if key in seen:
            dropped.append(
                exclusion(
                    r, f"exact duplicate of {seen[key].run_id} (same params, tokens, loss and budget)", "duplicate"
                )
            )
            continue
        seen[key] = r
        kept.append(r)
    return kept, dropped


# A robust fit's residual scale never below this (log ratio): counts exact to rounding have no scatter.
TREND_SCALE_FLOOR = 0.005
# The fewest runs a trend is fitted on; with fewer, each run is checked against its budget alone.
MIN_TREND_RUNS = 6
# Runs further than this many robust scales from the trend are left out of the next refit.
TREND_TRIM_K = 2.5


def _count(r: RunRecord) -> tuple[float, str]:
    return (r.flops, "flops") if r.flops else (6.0 * r.params * r.tokens, "6ND")


def ratio_trend(log_n: np.ndarray, log_ratio: np.ndarray, iterations: int = 10) -> np.ndarray:
    """The fitted log(count / budget) at each run: a polynomial in log10 N (quadratic with 4 sizes
    or more, a line with 3, a constant below), refitted on the runs within TREND_TRIM_K robust
    scales (MAD) of the last fit, so that typos and a mislabelled budget do not bend it. Under
    MIN_TREND_RUNS runs there is no rest of the grid to compare with: the trend is 1."""
    if len(log_n) < MIN_TREND_RUNS:
        return np.zeros(len(log_n))
    sizes = len(np.unique(np.round(log_n, 9)))
    deg = 2 if sizes >= 4 else 1 if sizes == 3 else 0
    keep = np.ones(len(log_n), bool)
    fitted = np.full(len(log_n), float(np.median(log_ratio)))
    for _ in range(iterations):
        if len(np.unique(np.round(log_n[keep], 9))) <= deg:
            break
        fitted = np.polyval(np.polyfit(log_n[keep], log_ratio[keep], deg), log_n)
        res = log_ratio - fitted
        centre = float(np.median(res[keep]))
        scale = max(1.4826 * float(np.median(np.abs(res[keep] - centre))), TREND_SCALE_FLOOR)
        new = np.abs(res - centre) <= TREND_TRIM_K * scale
        if (new == keep).all() or new.sum() <= deg + 1:
            break
        keep = new
    return fitted


def check_budgets(records: list[RunRecord], tolerance: float) -> tuple[list[RunRecord], list[Exclusion]]:
    """Exclude runs whose FLOP count (flops, else 6ND) is more than `tolerance` off both their
    budget and the grid's count / budget trend with size (`ratio_trend`)."""
    if not records:
        return [], []
    counts = [_count(r) for r in records]
    log_ratio = np.log([c / r.budget for (c, _), r in zip(counts, records)])
    trend = ratio_trend(np.log10([r.params for r in records]), log_ratio)
    limit = math.log1p(tolerance)
    kept, dropped = [], []
    for r, (count, source), lr, tr in zip(records, counts, log_ratio, trend):
        if abs(lr) <= limit or abs(lr - tr) <= limit:
            kept.append(r)
            continue
        rel = math.expm1(lr)
        dropped.append(
            exclusion(
                r,
                f"{source} {count:.3g} differs from its budget {format_budget(r.budget)} by {100 * rel:+.0f}% "
                f"(ratio {math.exp(lr):.3g}; the grid's {source} / budget at its size is {math.exp(tr):.3g}; "
                f"> {100 * tolerance:g}% off both): a mislabelled budget would move that budget's parabola",
                "budget",
            )
        )
    return kept, dropped


def trend_note(records: list[RunRecord], tolerance: float) -> str | None:
    """One line when the grid's count / budget departs from 1 by more than `tolerance` with size
    (runs kept as the user's FLOP count), None otherwise."""
    if len(records) < 2:
        return None
    counts = [_count(r) for r in records]
    log_n = np.log10([r.params for r in records])
    trend = ratio_trend(log_n, np.log([c / r.budget for (c, _), r in zip(counts, records)]))
    if np.abs(trend).max() <= math.log1p(tolerance):
        return None
    lo, hi = int(np.argmin(log_n)), int(np.argmax(log_n))
    return (
        f"the runs' {counts[0][1]} differs from their budgets smoothly with size ({counts[0][1]} / budget "
        f"{math.exp(trend[lo]):.3g} at N={10 ** log_n[lo]:.3g}, {math.exp(trend[hi]):.3g} at N={10 ** log_n[hi]:.3g}, "
        f"{math.exp(trend.min()):.3g}-{math.exp(trend.max()):.3g} over the grid): taken as the study's own "
        f"FLOP count; runs are checked against that trend"
    )


def check_inputs(
    records: list[RunRecord], tolerance: float = DEFAULT_BUDGET_TOLERANCE
) -> tuple[list[RunRecord], list[Exclusion], list[str]]:
    """(records to fit, exclusions, warnings): duplicates dropped, mislabelled budgets excluded."""
    kept, dup = drop_duplicates(records)
    kept, bad = check_budgets(kept, tolerance)
    warnings = [note] if (note := trend_note(kept, tolerance)) else []
    if dup:
        names = ", ".join(f"{e.run_id} ({e.reason.split(' (')[0]})" for e in dup[:8])
        more = f" and {len(dup) - 8} more" if len(dup) > 8 else ""
        warnings.append(f"dropped {len(dup)} exact duplicate row(s): {names}{more}")
    if bad:
        names = ", ".join(e.run_id for e in bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
        warnings.append(
            f"excluded {len(bad)} run(s) whose FLOPs are not their budget (tolerance {100 * tolerance:g}%): {names}"
        )
    return kept, dup + bad, warnings
