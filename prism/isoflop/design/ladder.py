"""Which rule sizes a study trains (`plan.sizes_per_budget`): a pure function of the config.

The workflow must list every calibration job before anything is calibrated, so the sizes
come from the config alone (budgets, centre, window, the family's parameter counts), and
the planner calls the same function: the two agree.

Per budget, the sizes sit on a lattice evenly spaced in log N (trainable parameters),
step `2 * window / sizes_per_budget` decades, anchored at N = 1, halved until at least
`sizes_per_budget` distinct rule sizes fall inside the budget's window (where the
window runs past the smallest size, near the encoder's floor under N, the lattice is
finer). Each lattice point takes the rule size nearest it. Anchoring the lattice, not the
window, makes budgets share sizes (in a wsd study one trajectory per size serves them
all), and a budget's sizes depend on that budget alone: adding a budget changes no
other budget's runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from prism.core.errors import PrismError
from prism.core.families import FamilySpec
from prism.model.config import smallest_rule_size
from prism.model.paramcount import trainable_params
from prism.model.sizes import GRID_PER_DECADE, RULES, rule_grid, rule_target

# Halvings of the lattice step before a budget takes every rule size in its window.
MAX_HALVINGS = 6


def _pool(
    family: str, regime: str, variant: str, rule: str, lo: float, hi: float, spec: FamilySpec | None
) -> list[tuple[float, str]]:
    """(trainable N, name) of the rule's grid sizes whose N lies in [lo, hi], ascending, at `spec`."""
    start = max(rule_target(smallest_rule_size(rule))[1], lo / 100)
    out = []
    for name in rule_grid(rule, start, hi):
        try:
            n = trainable_params(family, name, variant, regime, spec)
        except PrismError:  # no shape of this N with the tokenizer's embedding rows (a large vocabulary)
            continue
        if lo <= n <= hi:
            out.append((float(n), name))
    return sorted(out)


def budget_sizes(
    n_opt: float,
    window: float,
    per_budget: int,
    family: str,
    regime: str,
    variant: str,
    rule: str,
    spec: FamilySpec | None = None,
) -> list[str]:
    """The rule sizes of one budget whose optimum is predicted at `n_opt` (ascending N), their N counted
    at `spec` (the family's shape and tokenizer; None: its laptop default)."""
    lo, hi = n_opt / 10**window, n_opt * 10**window
    pool = _pool(family, regime, variant, rule, lo, hi, spec)
    if len(pool) <= per_budget:
        return [name for _, name in pool]
    logs = [math.log10(n) for n, _ in pool]
    step = 2 * window / per_budget
    for _ in range(MAX_HALVINGS + 1):
        if step < 0.5 / GRID_PER_DECADE:
            break
        points = range(math.ceil(math.log10(lo) / step - 1e-9), math.floor(math.log10(hi) / step + 1e-9) + 1)
        picked = {min(range(len(pool)), key=lambda i: abs(logs[i] - p * step)) for p in points}
        if len(picked) >= per_budget:
            return [pool[i][1] for i in sorted(picked)]
        step /= 2
    return [name for _, name in pool]


def study_sizes(
    budgets: list[float],
    n_opt: Callable[[float], float],
    window: float,
    per_budget: int,
    family: str,
    regime: str,
    variants: list[str],
    rule: str,
    spec: FamilySpec | None = None,
) -> dict[float, list[str]]:
    """`{budget: sizes}` for every budget (their union is what the study calibrates and trains), at `spec`."""
    if rule not in RULES:
        raise PrismError(f"plan.size_rule {rule!r}: valid: {', '.join(RULES)}")
    if regime != "e2e":
        raise PrismError(
            f"plan.sizes_per_budget picks backbones by N, and regime {regime} does not train the backbone: "
            "spread N by projector variants (W<k>X, D<k>X) in `variants:` instead, and set sizes_per_budget: null"
        )
    if not variants:
        raise PrismError("plan.sizes_per_budget: no projector variant in `variants:`")
    # N is the first variant's; the others add their runs beside.
    return {b: budget_sizes(n_opt(b), window, per_budget, family, regime, variants[0], rule, spec) for b in budgets}


def union(sizes: dict[float, list[str]]) -> list[str]:
    """Every size of `study_sizes`, each once, by N."""
    return sorted({s for names in sizes.values() for s in names}, key=lambda s: rule_target(s)[1])
