"""The plan as text: durations people read, and the line for a budget its drops left short."""

from __future__ import annotations

from prism.isoflop.design.plantext import hours_text, short_budgets_text
from prism.isoflop.records import PlanRow


def test_hours_read_as_seconds_minutes_or_hours():
    assert [hours_text(h) for h in (None, 2 / 3600, 42 / 3600, 0.125, 3.2)] == ["-", "2 s", "42 s", "7.5 min", "3.2 h"]


def test_a_budget_left_short_by_its_drops_is_named():
    def row(backbone, budget):
        return PlanRow(
            run_id=f"{backbone}-BASE-e2e-C{budget:g}",
            family="text_image",
            backbone=backbone,
            variant="BASE",
            regime="e2e",
            budget=budget,
            params=1e4,
            params_total=1e4,
            flops_per_sample=1e6,
            tokens_per_sample=64,
            global_batch=32,
            samples=3200,
            steps=100,
            tokens=2e5,
            flops=budget,
            hours_here=None,
            node_hours=None,
        )

    rows = [row(f"n{m}e3", 1e12) for m in (11, 13, 16, 18, 22)] + [row(f"n{m}e3", 2e12) for m in (11, 13)]
    lines = short_budgets_text(rows, [1e12, 2e12], 5)
    assert len(lines) == 1 and "budget 2e12: 2 sizes left of the 5" in lines[0]
    assert short_budgets_text(rows, [1e12, 2e12], None) == []
