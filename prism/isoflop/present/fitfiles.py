"""A fit's files: the runs CSV read, fitted, and written as fit/REGIME.json and its Markdown report.

The fit (prism.isoflop.fit) is maths on records and reads no file; this is the one call of `prism isoflop
fit` (and the fit job) that reads the runs table and the plan beside it, once each, and writes what it
found. The learning rate's lines of a study folder (`family_lr_share`) are read here too, for the report
and the summary alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.core.ids import id_backbone
from prism.core.studylayout import FamilyFolder
from prism.isoflop.design.totrain import row_length, study_plan
from prism.isoflop.fit.fit import FitOptions, fit_records
from prism.isoflop.fit.lr_sensitivity import LrShare, lr_offset, lr_sensitivity, reference_lines, sensitivity_lines
from prism.isoflop.fit.result import Exclusion, FitResult
from prism.isoflop.fitread import write_fit
from prism.isoflop.present.report import fit_markdown
from prism.isoflop.records import RunRecord
from prism.isoflop.runs.table import load_runs
from prism.model.config import backbone_config
from prism.train.lr_rule import LrRule


def fit_csv(
    csv: str | Path,
    output_json: str | Path,
    output_md: str | Path,
    family: str | None = None,
    backbone: str | None = None,
    regime: str | None = "any",
    options: FitOptions | None = None,
    **overrides,
) -> FitResult:
    """`prism isoflop fit`: read the CSV, fit, write the JSON and the Markdown (atomically).

    Raises PrismError (and writes nothing) when no exponent could be fitted at all: a fit
    file must never stand for a fit that did not happen. `options`: FitOptions' defaults unless given.
    """
    options = options if options is not None else FitOptions()
    options = dataclasses.replace(options, **overrides) if overrides else options
    options.validate()
    loaded = load_runs(csv, family=family, backbone=backbone, regime=regime)
    upstream = [Exclusion(**e) for e in loaded.excluded_runs]
    plan = study_plan(Path(csv).parent)
    result = fit_records(loaded.records, options, excluded=upstream, tokens_per_sample=row_length(plan))
    result = dataclasses.replace(result, input={"csv": str(csv), **loaded.summary()})
    a2, a3 = result.approach2, result.approach3
    if all(m is None or m.a is None for m in (a2, a3, *result.methods)):
        per = "; ".join(b.reason for b in (a2.per_budget if a2 else []) if not b.accepted)
        why = next((m.reason for m in (a2, a3, *result.methods) if m is not None and m.reason), "")
        raise PrismError(
            f"{csv}: nothing could be fitted ({len(loaded.records)} runs): {why}"
            + (f"; rejected budgets: {per}" if per else "")
        )
    write_fit(output_json, result)
    lr = plan_lr_share(plan, a_interval(result), lambda: loaded.records)
    write_text_atomic(output_md, fit_markdown(result, lr_lines=lr.lines, lr_note=lr.verdict_note()))
    return result


def a_interval(result: FitResult) -> tuple[float, float] | None:
    """Approach 2's interval of a, which the lr's share is weighed against."""
    a2 = result.approach2
    return tuple(a2.a_ci) if a2 is not None and a2.a_ci else None


def family_lr_share(folder: Path, a_ci: tuple[float, float] | None, plan: dict | None = None) -> LrShare:
    """The learning rate's lines of a family folder: `plan_lr_share` of its plan (`plan`, read where not given)
    and its runs table."""

    def records() -> list[RunRecord]:
        try:
            return load_runs(FamilyFolder(folder).runs_table).records
        except PrismError:
            return []

    return plan_lr_share(plan if plan is not None else study_plan(folder), a_ci, records)


def plan_lr_share(plan: dict | None, a_ci: tuple[float, float] | None, runs: Callable[[], list[RunRecord]]) -> LrShare:
    """The learning rate's lines of a study: its plan's rule and the runs (`runs`, asked only where the rule
    was fitted or weighed against a sweep), with the lr's share of a's interval (`a_ci`) and whether it
    dominates it (none where there is no plan).

    A study planned before plans recorded their rule has no line (nothing to say about it).
    """
    if not plan or not plan.get("lr_rule"):
        return LrShare([])
    rule, ref = LrRule(**plan["lr_rule"]), plan.get("lr_reference")
    if rule.kind != "fitted" and not ref:
        return LrShare(sensitivity_lines(rule, None, a_ci))
    records = runs()
    widths = [backbone_config(id_backbone(r.run_id)).d_model for r in records]
    if rule.kind == "fitted":
        found = lr_sensitivity(records, widths, rule)
        return LrShare(sensitivity_lines(rule, found, a_ci), abs(found.shift) if found else None, a_ci)
    # Not tuned here, but the design's sweep was measured (a previous round's): how far off, and what it does to a.
    reference = LrRule(**ref["rule"])
    offset, found = lr_offset(records, widths, rule, reference), lr_sensitivity(records, widths, reference)
    lines = sensitivity_lines(rule, None, a_ci)[:1] + reference_lines(reference, ref["file"], offset, found, a_ci)
    half = abs(offset.shift) + abs(found.shift) if offset and found else None
    return LrShare(lines, half, a_ci)
