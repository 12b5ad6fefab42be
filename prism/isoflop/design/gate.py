"""Whether a plan may train, and its summary in one line.

A refused budget or an UNDETERMINED forecast means the grid cannot answer the study's
question, so nothing should train on it: `plan_stop` gives the one line that says why and
what to change, which the plan job prints as its error and the workflow prints before it
submits anything. A pilot that wants the runs anyway sets `plan.allow_undetermined`.
Pure functions of the plan dict (`make_plan`'s result, plan.yaml's content).
"""

from __future__ import annotations

from prism.core.ids import format_budget
from prism.isoflop.design.plantext import hours_text
from prism.isoflop.design.walltime import WallTime

ALLOW_KEY = "plan.allow_undetermined"


def plan_problems(plan: dict) -> list[str]:
    """Each reason the plan cannot answer its question, with its fix: refused budgets, then the forecast."""
    problems = [f"REFUSED {r['reason']}" for r in plan.get("refused") or []]
    fc = plan.get("forecast") or {}
    if fc and not fc.get("determined"):
        problems.append(undetermined_text(fc))
    return problems


def undetermined_text(fc: dict) -> str:
    """The forecast's verdict in a clause: how wide the interval is expected, and which budgets to change."""
    from prism.isoflop.design.forecast import MIN_ACCEPT_RATE  # noqa: PLC0415 lazy: numpy
    from prism.isoflop.fit.diagnostics import MAX_CI_WIDTH, MIN_BUDGETS, MIN_SPREAD_DECADES  # noqa: PLC0415 lazy: numpy

    level = int(100 * fc.get("ci_level", 0.8))
    width = fc.get("a_ci_width")
    per_budget = fc.get("per_budget") or []
    narrow = [b["budget"] for b in per_budget if b["n_spread_decades"] < MIN_SPREAD_DECADES]
    outside = [
        b["budget"]
        for b in per_budget
        if b["n_spread_decades"] >= MIN_SPREAD_DECADES and b["accept_rate"] < MIN_ACCEPT_RATE
    ]
    good = len(per_budget) - len(narrow) - len(outside)
    fixes = []
    if narrow:
        fixes.append(f"spread the sizes of {_budgets(narrow)} (at least {MIN_SPREAD_DECADES} decades of N)")
    if outside:
        fixes.append(f"widen or re-centre the grids of {_budgets(outside)} (plan.window, plan.prior_k)")
    if good + len(outside) + len(narrow) < MIN_BUDGETS or not fixes:
        fixes.append(f"add budgets (at least {MIN_BUDGETS} with their minimum inside the grid)")
    return (
        "forecast UNDETERMINED ("
        + (
            "no simulated study gives an exponent"
            if width is None
            else f"expected {level}% interval of a {width:.3f} wide, determined at <= {MAX_CI_WIDTH}"
        )
        + f"; {good} of {len(per_budget)} budget(s) have their minimum inside the grid in >= "
        f"{MIN_ACCEPT_RATE:.0%} of simulations, {MIN_BUDGETS} needed): " + ", ".join(fixes)
    )


def at_risk_text(fc: dict) -> list[str]:
    """A line per planned budget whose runs the fit would most likely leave out, by the forecast."""
    from prism.isoflop.design.forecast import MIN_ACCEPT_RATE  # noqa: PLC0415 lazy: numpy
    from prism.isoflop.fit.diagnostics import MIN_SPREAD_DECADES  # noqa: PLC0415 lazy: numpy

    out = []
    for b in fc.get("per_budget") or []:
        c = format_budget(b["budget"])
        if b["n_spread_decades"] < MIN_SPREAD_DECADES:
            why = f"its sizes span {b['n_spread_decades']:.2f} decades of N (< {MIN_SPREAD_DECADES})"
        elif b["accept_rate"] < MIN_ACCEPT_RATE:
            why = (
                f"its minimum lies inside its grid in {100 * b['accept_rate']:.0f}% of the forecast's simulated "
                f"studies (signal {b['snr']:.1f}x the noise)"
            )
        else:
            continue
        out.append(
            f"AT RISK budget {c}: {why}, so its runs would train and the fit most likely leave them out; "
            "widen or re-centre its grid (plan.window, plan.prior_k) or drop it"
        )
    return out


def plan_notes(plan: dict, data_known: bool = True) -> list[str]:
    """What a plan that trains should say before training: refused budgets, budgets at risk, unchecked epochs."""
    notes = [f"REFUSED {r['reason']}" for r in plan.get("refused") or []]
    notes += at_risk_text(plan.get("forecast") or {})
    cost = plan.get("cost") or {}
    if cost.get("node_hours_total") is not None and "assumed" in str(cost.get("node_hours_source")):
        notes.append(
            f"node-hours of {plan.get('family', '?')} assume MFU {(plan.get('options') or {}).get('mfu')} "
            "(plan.mfu), not a measured speed"
        )
    if not data_known:
        notes.append(
            f"plan {plan.get('family', '?')}: the data is not built yet, so no run's epochs are checked "
            "(plan.max_epochs); the run plans again once it is built"
        )
    return notes


def _budgets(budgets: list[float]) -> str:
    return ", ".join(format_budget(b) for b in budgets)


def plan_stop(plan: dict) -> str | None:
    """The one line that stops the study (None when it may train): reasons, fixes, and the override."""
    problems = plan_problems(plan)
    if not problems:
        return None
    return f"plan {plan.get('family', '?')} stops the study: " + "; ".join(problems + override_text(plan))


def override_text(plan: dict) -> list[str]:
    """What `plan.allow_undetermined` would train, where it trains anything: a refused budget has no runs, so
    the override never trains it, only the budgets planned beside it."""
    planned = plan.get("budgets") or []
    if not plan.get("runs") or not planned:
        return []
    refused = [r["budget"] for r in plan.get("refused") or []]
    fc = plan.get("forecast") or {}
    if refused and (not fc or fc.get("determined")):
        return [f"or set {ALLOW_KEY}: true to train the {len(planned)} other budget(s) without {_budgets(refused)} "
                "(a pilot)"]  # fmt: skip
    return [f"or set {ALLOW_KEY}: true to train the {len(planned)} planned budget(s) anyway (a pilot)"]


def plan_summary(plan: dict, wall: WallTime | None = None, cluster: bool | None = None) -> str:
    """Runs, FLOPs, the time a user plans by, node-hours and the forecast's verdict of a plan, in one line.

    `wall`: the study's expected wall time where its jobs run (walltime.wall_time); without it, the runs'
    times here one after another, labelled so. Node-hours only for a `cluster` study, a laptop has none
    (None: where the plan estimates them)."""
    runs = plan.get("runs") or []
    n_budgets = len(plan.get("budgets") or []) + len(plan.get("refused") or [])
    refused = len(plan.get("refused") or [])
    cost = plan.get("cost") or {}
    node = cost.get("node_hours_total")
    cluster = node is not None if cluster is None else cluster
    fc = plan.get("forecast") or {}
    verdict = "DETERMINED" if fc.get("determined") else "UNDETERMINED"
    width = fc.get("a_ci_width")
    here = cost.get("hours_here_total")
    text = (
        f"plan {plan.get('family', '?')}: {len(runs)} runs on {len(plan.get('budgets') or [])} of {n_budgets} "
        f"budget(s)"
        + (f" ({refused} REFUSED)" if refused else "")
        + f", {sum(r['flops'] for r in runs):.3g} FLOPs"
        + (
            f", {wall.text()}"
            if wall is not None
            else ""
            if here is None and cluster  # a cluster study plans by its node-hours
            else f", time in runs here {'unknown' if here is None else hours_text(here)} (one after another)"
        )
        + (f" ({len(guessed)} size(s) interpolated)" if (guessed := cost.get("hours_here_interpolated")) else "")
        + (", " + ("node-hours unknown" if node is None else f"{node:.3g} node-hours") if cluster else "")
        + f", forecast {verdict}"
        + ("" if width is None else f" ({100 * fc.get('ci_level', 0.8):.0f}% interval of a {width:.3f} wide)")
    )
    if plan_problems(plan) and (plan.get("options") or {}).get("allow_undetermined"):
        text += f"; trained anyway ({ALLOW_KEY})"
    return text
