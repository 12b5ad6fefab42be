"""`prism isoflop plan`: the plan's text for the log, and its files (plan.yaml, plan.csv), written
atomically and only when the plan can answer its question (or a pilot allows it)."""

from __future__ import annotations

from pathlib import Path

import yaml

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.isoflop.design.gate import plan_notes, plan_stop, plan_summary
from prism.isoflop.design.plan import make_plan
from prism.isoflop.design.plantext import (
    cost_text,
    forecast_text,
    lr_rule_text,
    plan_csv_text,
    plan_table,
    short_budgets_text,
)
from prism.isoflop.design.trajectories import saving_text
from prism.isoflop.records import PlanRow


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
