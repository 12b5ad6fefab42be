"""The plan as people and programs read it: the per-run table, its CSV, the cost and forecast lines."""

from __future__ import annotations

import csv
import io

from prism.core.ids import format_budget
from prism.isoflop.records import PlanRow
from prism.train.lr_rule import LrRule

PLAN_CSV_COLUMNS = list(PlanRow.__dataclass_fields__)


def plan_csv_text(rows: list[PlanRow]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=PLAN_CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r.to_json())
    return buf.getvalue()


def forecast_text(fc: dict) -> str:
    verdict = "DETERMINED" if fc["determined"] else "UNDETERMINED"
    lines = [
        f"Identifiability forecast ({fc['n_sims']} simulated studies, noise {fc['noise']:g}, Approach 2): "
        f"exponent a {verdict}",
    ]
    if fc.get("surface_source"):
        lines.append(f"  simulated on the {fc['surface_source']}")
    if fc["a_ci"]:
        lines.append(
            f"  expected {int(100 * fc['ci_level'])}% interval of a: [{fc['a_ci'][0]:.3f}, {fc['a_ci'][1]:.3f}] "
            f"(width {fc['a_ci_width']:.3f}); noise-free a on this grid "
            + ("n/a" if fc["a_noise_free"] is None else f"{fc['a_noise_free']:.3f}")
        )
    lines += [f"  - {r}" for r in fc["reasons"]]
    for b in fc["per_budget"]:
        lines.append(
            f"  {format_budget(b['budget']):>8}: {b['n_runs']} runs, N spread {b['n_spread_decades']:.2f} decades, "
            f"minimum inside the grid in {100 * b['accept_rate']:.0f}% of simulations, signal {b['snr']:.1f}x noise"
        )
    return "\n".join(lines)


def hours_text(h: float | None) -> str:
    """Hours as people read them: 42 s, 7.5 min, 3.2 h."""
    if h is None:
        return "-"
    s = h * 3600
    return f"{s:.2g} s" if s < 10 else f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min" if s < 5400 else f"{h:.1f} h"


def plan_table(rows: list[PlanRow], interpolated: set[str] = frozenset()) -> str:
    """The plan for people: one line per run, with its placement (devices, rows a device takes per
    micro-step, micro-steps a step), the estimated time here (`~`: a size whose speed is
    interpolated, not measured) and node-hours there."""
    head = (
        f"{'run_id':<34} {'N':>9} {'steps':>6} {'batch':>5} {'dev':>4} {'micro':>5} {'accum':>5} {'tokens D':>9} "
        f"{'epochs':>6} {'FLOPs':>9} {'time here':>9} {'node-h':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        nh = "-" if r.node_hours is None else f"{r.node_hours:.3g}"
        ep = "-" if r.epochs is None else f"{r.epochs:.2f}"
        micro = r.micro_batch or r.global_batch // max(1, r.devices)
        lines.append(
            f"{r.run_id:<34} {r.params:>9.3g} {r.steps:>6d} {r.global_batch:>5d} {r.devices:>4d} {micro:>5d} "
            f"{r.accum_steps:>5d} {r.tokens:>9.3g} {ep:>6} {r.flops:>9.3g} "
            f"{('~' if r.backbone in interpolated else '') + hours_text(r.hours_here):>9} {nh:>8}"
        )
    return "\n".join(lines)


def cost_text(cost: dict) -> list[str]:
    here, node = cost["hours_here_total"], cost["node_hours_total"]
    return [
        f"time here (one run after another): {hours_text(here) if here is not None else 'unknown'} "
        f"[{cost['hours_here_source']}]",
        f"cluster: {'unknown' if node is None else f'{node:.3g} node-hours'} [{cost['node_hours_source']}]",
    ]


def short_budgets_text(rows: list[PlanRow], budgets: list[float], per_budget: int | None) -> list[str]:
    """A line per planned budget left with fewer sizes than `plan.sizes_per_budget` asked for (after drops)."""
    if not per_budget:
        return []
    out = []
    for b in budgets:
        sizes = {r.backbone for r in rows if r.budget == b}
        if len(sizes) < per_budget:
            out.append(
                f"SHORT budget {format_budget(b)}: {len(sizes)} sizes left of the {per_budget} "
                "plan.sizes_per_budget asks for (see the dropped runs: more data, or a lower budget)"
            )
    return out


WINDOW_DROP = "decades from N_opt"  # a size outside a budget's window: the grid's design, not a loss


def dropped_lines(plan: dict) -> list[str]:
    """A line per budget that drops sizes inside its window (too few steps, FLOPs off the budget, too many
    epochs), naming each and why: said in the dry run and the fit summary, not only in plan.yaml."""
    by_budget: dict[float, list[str]] = {}
    for d in plan.get("dropped") or []:
        reason = str(d.get("reason", ""))
        if WINDOW_DROP not in reason:
            why = reason.removeprefix(f"{d.get('run_id')} ").split(";")[0]
            by_budget.setdefault(float(d["budget"]), []).append(f"{d['backbone']}-{d['variant']} ({why})")
    return [
        f"plan {plan.get('family', '?')}: budget {format_budget(b)} drops {', '.join(sizes)}"
        for b, sizes in sorted(by_budget.items())
    ]


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
