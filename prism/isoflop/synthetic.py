"""Synthetic IsoFLOP studies with a known truth: for tests, benchmarks and the docs.

Runs sit on IsoFLOP grids (C = 6ND exactly), `per_budget` sizes spaced evenly in
log N over `spread` decades around a centre (by default the surface's own
optimum, shifted by `offset` decades, or by `offset(C)` to mimic a grid centred
on a wrong prior), with optional Gaussian loss noise.
"""

from __future__ import annotations

import csv
from collections.abc import Callable

import numpy as np

from prism.core.ids import format_budget
from prism.isoflop.records import RunRecord, Surface


def isoflop_study(
    surface: Surface,
    budgets: list[float],
    per_budget: int = 7,
    spread: float = 1.2,
    offset: float | Callable[[float], float] = 0.0,
    noise: float = 0.0,
    seed: int = 0,
) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for c in budgets:
        centre = np.log10(surface.n_opt(c)) + (offset(c) if callable(offset) else offset)
        for x in np.linspace(centre - spread / 2, centre + spread / 2, per_budget):
            n = 10.0**x
            d = c / (6 * n)
            loss = float(surface.loss(n, d) + (noise * rng.standard_normal() if noise else 0.0))
            out.append(RunRecord(f"n{n:.3g}-C{format_budget(c)}", float(n), float(d), loss, float(c)))
    return out


def undertrained_study(
    surface: Surface,
    budgets: list[float],
    per_budget: int = 13,
    spread: float = 1.8,
    noise: float = 0.0,
    seed: int = 0,
    tail: float = 0.3,
    tail_tokens: float | None = None,
) -> list[RunRecord]:
    """A wide-grid study whose largest sizes at the small budgets are far from converged.

    As `isoflop_study`, plus `tail * (tail_tokens / D - 1)` on every run trained on fewer
    than `tail_tokens` tokens (default: a quarter of the smallest budget's optimal D). The penalty is
    zero around each budget's optimum, so the surface's N_opt(C) and exponent a stay the truth,
    while the IsoFLOP curves of the small budgets rise steeply on the large-N side: no parabola
    through the whole grid fits them.
    """
    c0 = min(budgets)
    d0 = tail_tokens if tail_tokens is not None else 0.25 * c0 / (6 * surface.n_opt(c0))
    rng = np.random.default_rng(seed)
    out = []
    for r in isoflop_study(surface, budgets, per_budget, spread):
        extra = tail * max(0.0, d0 / r.tokens - 1.0)
        loss = r.loss + extra + (noise * rng.standard_normal() if noise else 0.0)
        out.append(RunRecord(r.run_id, r.params, r.tokens, float(loss), r.budget))
    return out


def write_csv(records: list[RunRecord], path, status: dict[str, str] | None = None) -> None:
    """A runs CSV as `prism isoflop collect` writes (the columns the fit reads, plus status)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run_id", "params", "tokens", "loss", "budget", "status"])
        for r in records:
            w.writerow(
                [
                    r.run_id,
                    *(repr(float(v)) for v in (r.params, r.tokens, r.loss, r.budget)),
                    (status or {}).get(r.run_id, "ok"),
                ]
            )
