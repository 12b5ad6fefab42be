"""A fit's files: the runs CSV read, fitted, and written as fit/REGIME.json and its Markdown report.

The fit (prism.isoflop.fit) is maths on records and reads no file; this is the one call of `prism isoflop
fit` (and the fit job) that reads the runs table and the plan beside it and writes what it found. The
learning rate's lines of a study folder (`family_lr_share`) are read here too, for the report and the
summary alike.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import yaml

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.core.ids import parse_run_id
from prism.isoflop.design.totrain import row_length, study_plan
from prism.isoflop.fit.fit import FitOptions, fit_records
from prism.isoflop.fit.lr_sensitivity import LrShare, lr_offset, lr_sensitivity, reference_lines, sensitivity_lines
from prism.isoflop.fit.result import Exclusion, FitResult
from prism.isoflop.present.report import fit_markdown
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
    rows = row_length(study_plan(Path(csv).parent))
    result = fit_records(loaded.records, options, excluded=upstream, tokens_per_sample=rows)
    result = dataclasses.replace(result, input={"csv": str(csv), **loaded.summary()})
    a2, a3 = result.approach2, result.approach3
    if (a2 is None or a2.a is None) and (a3 is None or a3.a is None):
        per = "; ".join(b.reason for b in (a2.per_budget if a2 else []) if not b.accepted)
        raise PrismError(
            f"{csv}: nothing could be fitted ({len(loaded.records)} runs): "
            f"{(a2.reason if a2 else '') or (a3.reason if a3 else '')}" + (f"; rejected budgets: {per}" if per else "")
        )
    write_text_atomic(output_json, json.dumps(result.to_json(), indent=2) + "\n")
    lr = family_lr_share(Path(csv).parent, tuple(a2.a_ci) if a2 is not None and a2.a_ci else None)
    write_text_atomic(output_md, fit_markdown(result, lr_lines=lr.lines, lr_note=lr.verdict_note()))
    return result


def family_lr_share(folder: Path, a_ci: tuple[float, float] | None) -> LrShare:
    """The learning rate's lines of a family folder, its plan's rule (plan.yaml) and the runs (runs.csv),
    with the lr's share of a's interval (`a_ci`) and whether it dominates it (none where no plan lies there).

    A study planned before plans recorded their rule has no line (nothing to say about it).
    """
    plan_file = folder / "plan.yaml"
    if not plan_file.is_file():
        return LrShare([])
    plan = yaml.safe_load(plan_file.read_text()) or {}
    if not plan.get("lr_rule"):
        return LrShare([])
    rule, ref = LrRule(**plan["lr_rule"]), plan.get("lr_reference")
    if rule.kind != "fitted" and not ref:
        return LrShare(sensitivity_lines(rule, None, a_ci))
    try:
        records = load_runs(folder / "runs.csv").records
    except PrismError:
        records = []
    widths = [backbone_config(parse_run_id(r.run_id).backbone).d_model for r in records]
    if rule.kind == "fitted":
        found = lr_sensitivity(records, widths, rule)
        return LrShare(sensitivity_lines(rule, found, a_ci), abs(found.shift) if found else None, a_ci)
    # Not tuned here, but the design's sweep was measured (a previous round's): how far off, and what it does to a.
    reference = LrRule(**ref["rule"])
    offset, found = lr_offset(records, widths, rule, reference), lr_sensitivity(records, widths, reference)
    lines = sensitivity_lines(rule, None, a_ci)[:1] + reference_lines(reference, ref["file"], offset, found, a_ci)
    half = abs(offset.shift) + abs(found.shift) if offset and found else None
    return LrShare(lines, half, a_ci)
