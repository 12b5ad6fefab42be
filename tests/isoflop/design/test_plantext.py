"""The plan as text: durations people read, and the line for a budget its drops left short."""

from __future__ import annotations

from prism.isoflop.design.plantext import hours_text, short_budgets_text

from ..conftest import plan_row as row


def test_hours_read_as_seconds_minutes_or_hours():
    assert [hours_text(h) for h in (None, 2 / 3600, 42 / 3600, 0.125, 3.2)] == ["-", "2 s", "42 s", "7.5 min", "3.2 h"]


def test_a_budget_left_short_by_its_drops_is_named():
    rows = [row(f"n{m}e3", 1e12) for m in (11, 13, 16, 18, 22)] + [row(f"n{m}e3", 2e12) for m in (11, 13)]
    lines = short_budgets_text(rows, [1e12, 2e12], 5)
    assert len(lines) == 1 and "budget 2e12: 2 sizes left of the 5" in lines[0]
    assert short_budgets_text(rows, [1e12, 2e12], None) == []
