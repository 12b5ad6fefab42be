"""The plan's lr rule: every row records its lr and rule; only a given or fitted rule changes a run's flags;
a fitted rule that does not cover the grid is refused; the plan says what its tuning stage cost."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.isoflop.design.plan import make_plan
from prism.isoflop.design.plantext import lr_rule_text
from prism.isoflop.runs.launch import run_args
from prism.model.config import backbone_config
from prism.train.lr_rule import LrRule, given_rule
from prism.train.lr_schedule import default_lr


def _plan(ladder, **kw):
    return make_plan("text_image", [1e12, 1e13], ladder, regime="e2e", simulations=20, **kw)


def test_hand_rule_rows_record_the_default_lr_and_commands_do_not_change(ladder):
    plan = _plan(ladder)
    for row in plan["runs"]:
        assert row["lr_rule"] == "hand"
        assert row["lr"] == pytest.approx(default_lr(backbone_config(row["backbone"]).d_model), rel=1e-3)
        assert "--lr" not in run_args(row, "data", "out").split()
    assert "not tuned" in lr_rule_text(plan)[0]


def test_given_rule_sets_each_runs_lr_flag(ladder):
    rule = given_rule(1e-2, 0.5, 0.0)
    plan = _plan(ladder, lr_rule=rule)
    for row in plan["runs"]:
        width = backbone_config(row["backbone"]).d_model
        assert row["lr_rule"] == "given" and row["lr"] == pytest.approx(rule.lr(width), rel=1e-3)
        words = run_args(row, "data", "out").split()
        assert float(words[words.index("--lr") + 1]) == pytest.approx(row["lr"])


def test_fitted_rule_beyond_the_grid_is_refused_and_its_cost_is_stated(ladder):
    widths = sorted({backbone_config(r["backbone"]).d_model for r in _plan(ladder)["runs"]})
    narrow = LrRule("fitted", 3e-3, 1.0, widths=(widths[-1], widths[-1]), margin=0.0, source="sweep")
    with pytest.raises(PrismError, match="was fitted on d_model"):
        _plan(ladder, lr_rule=narrow)
    covering = LrRule("fitted", 3e-3, 0.8, widths=(widths[0], widths[-1]), flops=1e11, source="sweep")
    plan = _plan(ladder, lr_rule=covering)
    assert {r["lr_rule"] for r in plan["runs"]} == {"fitted"}
    grid = sum(r["flops"] for r in plan["runs"])
    assert f"{100 * 1e11 / grid:.1f}% of the grid" in "\n".join(lr_rule_text(plan))


def test_a_tokens_exponent_gives_longer_runs_a_lower_lr_and_one_per_size_under_wsd(ladder):
    rule = given_rule(1e-2, 1.0, 0.4)
    runs = _plan(ladder, lr_rule=rule)["runs"]
    by_run = {(r["backbone"], r["budget"]): r["lr"] for r in runs}
    for r in runs:
        assert r["lr"] == pytest.approx(rule.lr(backbone_config(r["backbone"]).d_model, r["tokens"]), rel=1e-3)
    shared = [r["backbone"] for r in runs if sum(x["backbone"] == r["backbone"] for x in runs) > 1]
    assert shared, "the ladder should give some size two budgets"
    longer = max((r for r in runs if r["backbone"] == shared[0]), key=lambda r: r["tokens"])
    shorter = min((r for r in runs if r["backbone"] == shared[0]), key=lambda r: r["tokens"])
    assert by_run[(shared[0], longer["budget"])] < by_run[(shared[0], shorter["budget"])]
    # One wsd trajectory per size trains all its budgets: one lr per size, at its runs' mean tokens.
    per_size = _plan(ladder, lr_rule=rule, lr_tokens="size")["runs"]
    lrs = {r["lr"] for r in per_size if r["backbone"] == shared[0]}
    assert len(lrs) == 1 and by_run[(shared[0], longer["budget"])] < lrs.pop() < by_run[(shared[0], shorter["budget"])]


def test_a_previous_rounds_sweep_is_the_reference_of_an_untuned_plan(ladder, tmp_path):
    from prism.isoflop.design.planoptions import PlanOptions

    (tmp_path / "text_image").mkdir()
    sweep = LrRule("fitted", 2e-3, 1.4, widths=(16, 80), source="sweep")
    (tmp_path / "text_image" / "lr_rule.json").write_text(__import__("json").dumps(sweep.to_json()))
    options = PlanOptions(previous_round=str(tmp_path), prior_a=0.5, prior_k=0.1)
    plan = _plan(ladder, options=options)
    assert plan["lr_reference"]["file"] == str(tmp_path / "text_image" / "lr_rule.json")
    assert plan["lr_reference"]["rule"]["p"] == 1.4
    assert "the fit weighs the rule against it" in "\n".join(lr_rule_text(plan))
    assert _plan(ladder)["lr_reference"] is None
