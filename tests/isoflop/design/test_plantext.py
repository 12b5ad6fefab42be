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


def test_sizes_dropped_from_a_budget_are_named_with_the_reason_but_not_those_outside_its_window():
    from prism.isoflop.design.candidates import Candidate
    from prism.isoflop.design.centre import Centre
    from prism.isoflop.design.plan import plan_budget
    from prism.isoflop.design.plantext import dropped_lines

    fps = 1e6
    budget = 20 / 1.014 * 64 * fps  # 19.7 steps of batch 64: rounded to 20, +1.4% over the budget
    centre = Centre(0.5, 0.1, "test")
    near, far = centre.n_opt(budget), centre.n_opt(budget) * 1e4
    cands = [Candidate("30k", "BASE", near, near, fps, 64, None), Candidate("3m", "BASE", far, far, fps, 64, None)]
    bp = plan_budget(budget, cands, "text_image", "e2e", centre, global_batch=64, min_steps=10)
    assert not bp.runs and len(bp.dropped) == 2
    plan = {"family": "text_image", "dropped": [dict(d) for d in bp.dropped], "budgets": [budget], "runs": []}
    (line,) = dropped_lines(plan)
    assert line.startswith("plan text_image: budget ") and "drops 30k-BASE (" in line
    assert "+1.4% off the budget" in line and "3m" not in line
