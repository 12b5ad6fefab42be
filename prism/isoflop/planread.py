"""plan.yaml read back: the one reader of a plan file, for every stage that reads one.

`prism isoflop launch`, `collect` and `status` and the workflow (the plan checkpoint's file) all
read a plan through `read_plan`, so a plan they accept is one they agree on: a mapping whose
`runs:` rows each pass `PlanRow.from_dict`, with one PrismError line (the file, the row, the fix)
for anything else. What only looks a plan up beside the runs (the fit's lr rule and row length, the
summary's dropped sizes, compare's schedules, the centre of a plan made again) reads its mapping as
written with `plan_mapping`, which gives nothing for a study planned without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from prism.core.errors import PrismError
from prism.isoflop.records import PlanRow, plan_rows

# What makes a plan file: the fix every refusal names unless its caller knows a better one.
MAKE_PLAN = "make it with `prism isoflop plan --out`"


class PlanUnreadable(PrismError):
    """A plan file that is there but cannot be read or parsed; the message says why."""


def plan_mapping(path: str | Path) -> dict[str, Any] | None:
    """The plan at `path` as written (its header and raw `runs:`), None where there is no file or it holds no
    mapping (an empty file); PlanUnreadable where it cannot be read or is not YAML."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        plan = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise PlanUnreadable(f"{path}: unreadable ({type(err).__name__}: {str(err).splitlines()[0]})") from None
    return plan if isinstance(plan, dict) else None


@dataclass(frozen=True)
class PlanFile:
    """A plan read back: its header (every top-level key but `runs`) and its checked rows by run id."""

    header: dict[str, Any]
    rows: dict[str, PlanRow]


def read_plan(path: str | Path, label: str | None = None, fix: str = MAKE_PLAN) -> PlanFile:
    """The plan at `path`, its rows checked once (PlanRow.from_dict), or one PrismError line.

    `label` names the file in every message (e.g. "--plan PATH"; default the path) and `fix` says how a
    missing or broken plan is made again (e.g. "`snakemake plan_F` makes it").
    """
    label = label or str(path)
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise PrismError(f"{label}: no such file; {fix}") from None
    except OSError as err:
        raise PrismError(f"{label}: unreadable ({err.strerror or err}); {fix}") from None
    try:
        plan = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PrismError(f"{label}: not YAML ({str(err).splitlines()[0]}); {fix}") from None
    if not isinstance(plan, dict) or "runs" not in plan:
        raise PrismError(f"{label}: no `runs:` list, not a plan; {fix}")
    rows: dict[str, PlanRow] = {}
    for row in plan_rows(plan["runs"], label):
        if row.run_id in rows:
            raise PrismError(f"{label}: run {row.run_id} is listed twice; {fix}")
        rows[row.run_id] = row
    return PlanFile({k: v for k, v in plan.items() if k != "runs"}, rows)
