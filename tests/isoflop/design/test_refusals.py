"""prism.isoflop.design.refusals: a refused budget names the limit and the number that admits a size."""

from __future__ import annotations

import json

import pytest

from prism.cli import main
from prism.isoflop.design.candidates import Candidate
from prism.isoflop.design.centre import Centre
from prism.isoflop.design.gate import plan_stop
from prism.isoflop.design.plan import NoBudget, make_plan, plan_budget
from prism.isoflop.design.refusals import round_up


def test_a_number_printed_as_enough_is_enough():
    assert round_up(1.234e10) == 1.3e10 and round_up(1.2e10) == 1.2e10
    assert round_up(1.29e10, up=False) == 1.2e10


def test_a_budget_below_every_size_names_the_smallest_and_the_budget_that_reaches_it(capsys):
    """The study a user types with budgets too small for the smallest size: the plan says which budget works."""
    args = "--family text_image --budgets 1e9,2e9 --prior-k 0.0258 --prior-a 0.53 --window 0.42 --sizes-per-budget 6"
    assert main(["isoflop", "plan", *args.split(), "--dry-run"]) != 0
    err = capsys.readouterr().err
    assert "budget 1e9: no size in its window" in err and "plan.window" in err
    assert "the smallest size has N=1.87e+04: a budget of at least 1.2e11 puts N_opt there" in err
    assert "allow_undetermined" not in err  # it cannot give a budget with no size a run
    # The number it names is one the plan accepts.
    assert main(["isoflop", "plan", *args.replace("1e9,2e9", "1.2e11").split(), "--dry-run"]) == 0


def _cands():
    return [Candidate(f"b{i}", "BASE", n, n, 6 * n * 64, 64, None) for i, n in enumerate((5e4, 1e5, 2e5))]


def test_too_few_steps_names_min_steps_and_the_budget_that_gives_them():
    bp = plan_budget(1e10, _cands(), "text_image", "e2e", Centre(0.5, 1.0, "test"), window=1, global_batch=32)
    assert not bp.runs
    assert "3 with fewer than plan.min_steps 50 steps (a budget of at least 3.1e10 gives the smallest 50)" in (
        bp.refused
    )
    assert "see the dropped runs" not in bp.refused
    # 3.1e10 (50 steps x 32 samples x 6 x 5e4 x 64 FLOPs = 3.07e10) keeps the smallest.
    admitted = plan_budget(3.1e10, _cands(), "text_image", "e2e", Centre(0.5, 1.0, "test"), window=1, global_batch=32)
    assert any(r.backbone == "b0" for r in admitted.runs)


def test_a_small_index_names_max_epochs_and_the_value_that_admits_a_size():
    centre = Centre(0.5, 0.1, "test")
    bp = plan_budget(1e13, _cands(), "text_image", "e2e", centre, window=1, split_samples=1000, max_epochs=4)
    assert not bp.runs and "reading the training split more than plan.max_epochs 4 times" in bp.refused
    fewest = min(d["needs"] for d in bp.dropped)
    admitted = plan_budget(1e13, _cands(), "text_image", "e2e", centre, window=1, split_samples=1000,
                           max_epochs=round_up(fewest))  # fmt: skip
    assert f"plan.max_epochs {round_up(fewest):g}" in bp.refused and admitted.runs


def test_the_override_is_offered_only_for_what_it_would_train(tmp_path):
    refused = {"family": "text_image", "budgets": [1e12], "runs": [{"flops": 1e12}], "forecast": {"determined": True},
               "refused": [{"budget": 1e9, "reason": "budget 1e9: no size in its window"}]}  # fmt: skip
    assert "to train the 1 other budget(s) without 1e9 (a pilot)" in plan_stop(refused)
    nothing = refused | {"budgets": [], "runs": []}
    assert "allow_undetermined" not in plan_stop(nothing)


def test_no_budget_is_its_own_error(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"splits": {"train": {"samples": 10}}}))
    with pytest.raises(NoBudget, match="no budget can be planned: budget 1e12: no candidate left"):
        make_plan("text_image", [1e12], None, backbones=["30k"], variants=["BASE"], data=tmp_path, window=3,
                  prior_a=0.5, prior_k=0.03)  # fmt: skip
