"""prism.isoflop.design.walltime: the wall time a user plans by, not the runs' times added up."""

from __future__ import annotations

import pytest

from prism.isoflop.design.walltime import wall_time


def _row(backbone: str, budget: float, steps: int, hours: float) -> dict:
    return {"run_id": f"{backbone}-BASE-e2e-C{budget:g}", "family": "text_image", "backbone": backbone,
            "variant": "BASE", "regime": "e2e", "budget": budget, "global_batch": 8, "steps": steps,
            "flops_per_sample": 1e6, "hours_here": hours}  # fmt: skip


def test_cosine_runs_spread_over_the_jobs_that_run_at_once():
    rows = [_row("30k", 1e10, 100, 1.0), _row("60k", 1e10, 100, 1.0), _row("120k", 1e10, 100, 4.0)]
    two = wall_time(rows, "cosine", slots=2)
    assert two.work_h == 6.0 and two.path_h == 4.0 and two.wall_h == 4.0  # the longest run sets it
    one = wall_time(rows, "cosine", slots=1)
    assert one.wall_h == 6.0 and "expected wall time" in one.text() and "1 job(s) at a time" in one.text()


def test_a_wsd_study_trains_each_prefix_once():
    """Two budgets of one size: 100 and 200 steps share the first 80; not 300 steps of time."""
    rows = [_row("30k", 1e10, 100, 1.0), _row("30k", 2e10, 200, 2.0)]
    wt = wall_time(rows, "wsd", slots=1, cooldown_fraction=0.2, min_steps=10)
    per_step = 0.01
    assert wt.work_h == pytest.approx((160 + 20 + 40) * per_step)  # stable to 160, two cooldowns
    assert wt.path_h == pytest.approx(200 * per_step) and wt.jobs == 4  # two segments, two branches
    assert wt.wall_h == pytest.approx(wt.work_h)


def test_no_estimate_no_wall_time():
    assert wall_time([_row("30k", 1e10, 100, None)], "cosine", slots=2) is None
