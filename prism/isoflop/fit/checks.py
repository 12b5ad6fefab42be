"""Input checks before a fit: rows that would bias it are left out, each with its reason.

- An exact duplicate (same params, tokens, loss and budget as an earlier row) is
  dropped: fitted twice, it would count its run twice and narrow the intervals.
- A run whose FLOPs differ from its budget by more than `tolerance` (relative) is
  excluded: fitted under the wrong budget it moves that budget's parabola. The
  FLOPs are the runs CSV's `flops` column, or 6ND where the CSV has none.
Both are pure functions of the records (no I/O), so they are tested on hand-made rows.
"""

from __future__ import annotations

from prism.ids import format_budget
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


def check_budgets(records: list[RunRecord], tolerance: float) -> tuple[list[RunRecord], list[Exclusion]]:
    """Exclude runs whose FLOPs (or 6ND) are not their budget within `tolerance`."""
    kept, dropped = [], []
    for r in records:
        flops, source = (r.flops, "flops") if r.flops else (6.0 * r.params * r.tokens, "6ND")
        rel = flops / r.budget - 1.0
        if abs(rel) > tolerance:
            dropped.append(
                exclusion(
                    r,
                    f"{source} {flops:.3g} differs from its budget {format_budget(r.budget)} by {100 * rel:+.0f}% "
                    f"(> {100 * tolerance:g}%): a mislabelled budget would move that budget's parabola",
                    "budget",
                )
            )
            continue
        kept.append(r)
    return kept, dropped


def check_inputs(
    records: list[RunRecord], tolerance: float = DEFAULT_BUDGET_TOLERANCE
) -> tuple[list[RunRecord], list[Exclusion], list[str]]:
    """(records to fit, exclusions, warnings): duplicates dropped, mislabelled budgets excluded."""
    kept, dup = drop_duplicates(records)
    kept, bad = check_budgets(kept, tolerance)
    warnings = []
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
