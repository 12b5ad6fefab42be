"""What a plan says before training: refused budgets, budgets the fit would leave out, unchecked epochs."""

from __future__ import annotations

from prism.isoflop.design.gate import plan_notes


def _budget(c, accept_rate, spread=0.6):
    return {"budget": c, "n_runs": 6, "n_spread_decades": spread, "accept_rate": accept_rate, "snr": 2.0}


def test_the_notes_name_a_refused_budget_and_each_budget_whose_runs_the_fit_would_leave_out():
    plan = {
        "family": "text_image",
        "refused": [{"budget": 1e14, "reason": "budget 1e14: the grid does not bracket ..."}],
        "forecast": {"per_budget": [_budget(1e12, 0.95), _budget(2e12, 0.31), _budget(4e12, 0.99, spread=0.05)]},
    }
    notes = plan_notes(plan)
    assert notes[0] == "REFUSED budget 1e14: the grid does not bracket ..."
    assert notes[1].startswith("AT RISK budget 2e12: its minimum lies inside its grid in 31% of the forecast's")
    assert notes[2].startswith("AT RISK budget 4e12: its sizes span 0.05 decades of N")
    assert len(notes) == 3 and not any("1e12" in n for n in notes)
    assert plan_notes({"family": "text_image"}, data_known=False)[0].startswith(
        "plan text_image: the data is not built yet, so no run's epochs are checked"
    )


def test_node_hours_from_an_assumed_mfu_are_said_to_be_assumed():
    cost = {"node_hours_total": 2.0, "node_hours_source": "estimate: assumed MFU 0.3 (plan.mfu, not measured) x ..."}
    notes = plan_notes({"family": "text_image", "cost": cost, "options": {"mfu": 0.3}})
    assert notes == ["node-hours of text_image assume MFU 0.3 (plan.mfu), not a measured speed"]
    assert plan_notes({"family": "text_image", "cost": {"node_hours_total": None}}) == []
