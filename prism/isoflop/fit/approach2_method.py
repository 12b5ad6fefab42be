"""Approach 2 as a fit method: the grid's per-budget minima, N_opt = k C^a through them, and its rule.

The grid itself (prism.isoflop.fit.approach2's `fit_approach2`) is fitted once for every method, since
the noise and the diagnostics rest on it; this method summarises it with its intervals, moves and test.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism.isoflop.fit import approach2, goodness, sensitivity
from prism.isoflop.fit.diagnostics import MIN_BUDGETS
from prism.isoflop.fit.method import Judged, MethodFit, MethodInput
from prism.isoflop.records import CI_LEVEL


@dataclass(frozen=True)
class Approach2Method:
    name: str = "approach2"
    label: str = "Approach 2"
    grid_bootstrap: bool = True

    def fit(self, data: MethodInput) -> MethodFit:
        grid = data.grid
        summary = approach2.summarize(grid, CI_LEVEL, data.sigma, data.within_dof)
        return MethodFit(
            name=self.name,
            a=grid.n_law.exponent if grid.n_law else None,
            a_ci=summary.a_ci,
            interval_method=summary.interval_method,
            reason=summary.reason,
            summary=summary,
            section="approach2",
            moves=sensitivity.approach2_moves(data.n, data.d, data.loss, data.budget, grid),
            goodness=goodness.approach2_goodness(data.n, data.loss, data.budget, grid.per_budget, *data.tested),
            parts={"a2": grid},
        )

    def judge(self, fit: MethodFit, good: list[str], n_runs: int) -> Judged:
        """Enough informative budgets for the power law, and its interval."""
        failures, evidence = [], []
        if len(good) < MIN_BUDGETS:
            failures.append(
                f"{len(good)} informative budget(s) ({', '.join(good) or 'none'}); the power law needs at least "
                f"{MIN_BUDGETS} (through 2 minima the line passes exactly and nothing measures how far it could "
                "move)"
            )
        else:
            evidence.append(f"{len(good)} informative budgets ({', '.join(good)})")
        if fit.a_ci is None:
            if len(good) >= MIN_BUDGETS:
                failures.append("Approach 2 gave no interval of a")
            return Judged(failures, evidence)
        return Judged(failures, evidence, fit.a_ci, f"Approach 2: {fit.interval_method}")


APPROACH2 = Approach2Method()
