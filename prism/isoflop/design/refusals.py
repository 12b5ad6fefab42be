"""Why a budget trains no run, in words that name the limit and the number that would admit one.

A refused budget is the plan's most common surprise (a small budget, a small index, another
shape): "no candidate" alone sends the user to trial and error. Each limit that removes a
size (too few steps, more passes over the data than `plan.max_epochs`, the window around
N_opt) is named with the setting or budget that would let the nearest size through. Pure
functions of the plan's numbers.
"""

from __future__ import annotations

import math

from prism.core.ids import format_budget

# The `limit` of a dropped candidate (`plan.plan_budget`): which setting removed it.
STEPS, EPOCHS, FLOPS, WINDOW = "steps", "epochs", "flops", "window"


def round_up(x: float, up: bool = True) -> float:
    """`x` to two significant digits, never below it (`up` False: never above): a number printed as
    enough must be enough."""
    if x <= 0 or not math.isfinite(x):
        return x
    unit = 10 ** (math.floor(math.log10(x)) - 1)
    return float(f"{(math.ceil(x / unit - 1e-9) if up else math.floor(x / unit + 1e-9)) * unit:.2g}")


def budget_for_n(n: float, a: float, k: float, decades: float) -> float:
    """The budget C whose optimum k C^a lies `decades` from `n` (positive: N_opt below n)."""
    return (n / 10**decades / k) ** (1 / a)


def no_sizes_text(budget: float, n_opt: float, window: float, sizes: list[float], a: float, k: float) -> str:
    """A budget none of whose sizes lies within `window` decades of its N_opt: where the sizes are, and the
    budget (or plan.window) that reaches the nearest. `sizes`: every size's N the study can count."""
    lo, hi = n_opt / 10**window, n_opt * 10**window
    head = (
        f"budget {format_budget(budget)}: no size in its window (N {lo:.3g} to {hi:.3g}: N_opt={n_opt:.3g} "
        f"+-{window:g} decades, plan.window)"
    )
    if not sizes:
        return head + "; no size could be counted at this shape"
    nearest = min(sizes, key=lambda n: abs(math.log10(n / n_opt)))
    if nearest > hi and nearest == min(sizes):
        # The grid must bracket N_opt: a wider window alone would reach sizes that are all larger.
        c = round_up(budget_for_n(nearest, a, k, 0))
        return (
            f"{head}; the smallest size has N={nearest:.3g}: a budget of at least {format_budget(c)} puts N_opt "
            "there, or add a smaller backbone"
        )
    if nearest < lo and nearest == max(sizes):
        c = round_up(budget_for_n(nearest, a, k, 0), up=False)
        return (
            f"{head}; the largest size has N={nearest:.3g}: a budget of at most {format_budget(c)} puts N_opt "
            "there, or add a larger backbone"
        )
    reach = round_up(abs(math.log10(nearest / n_opt)))
    return f"{head}; the nearest size has N={nearest:.3g}: plan.window {reach:g} reaches it"


def limits_text(dropped: list[dict], min_steps: int, max_epochs: float) -> str:
    """What removed a budget's candidates, limit by limit, each with the number that admits the nearest one."""
    by_limit: dict[str, list[dict]] = {}
    for d in dropped:
        by_limit.setdefault(str(d.get("limit")), []).append(d)
    parts = []
    if steps := by_limit.get(STEPS):
        need = round_up(min(d["needs"] for d in steps))
        parts.append(
            f"{len(steps)} with fewer than plan.min_steps {min_steps} steps (a budget of at least "
            f"{format_budget(need)} gives the smallest {min_steps})"
        )
    if epochs := by_limit.get(EPOCHS):
        need = min(d["needs"] for d in epochs)
        parts.append(
            f"{len(epochs)} reading the training split more than plan.max_epochs {max_epochs:g} times (the "
            f"fewest, {need:.3g} passes: plan.max_epochs {round_up(need):g} admits it, or {need / max_epochs:.2g}x "
            "the data, or a smaller budget)"
        )
    if flops := by_limit.get(FLOPS):
        parts.append(f"{len(flops)} whose whole steps spend more than 1% off the budget")
    if window := by_limit.get(WINDOW):
        parts.append(f"{len(window)} outside the window around N_opt (plan.window)")
    return "; ".join(parts)
