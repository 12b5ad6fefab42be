"""a's sensitivity to the lr: a penalty the same at every size leaves a where it is; one that grows with
size moves it; a rule without a sweep says the lr was not tuned."""

from __future__ import annotations

import pytest

from prism.isoflop.fit.lr_sensitivity import lr_penalty, lr_sensitivity, sensitivity_lines
from prism.isoflop.records import CHINCHILLA_EPOCH
from prism.isoflop.synthetic import isoflop_study
from prism.train.lr_rule import LrRule

CURVES = [{"d_model": 32, "curvature": 0.05}, {"d_model": 512, "curvature": 0.05}]


def _study():
    records = isoflop_study(CHINCHILLA_EPOCH, [1e18, 1e19, 1e20, 1e21], per_budget=7)
    # a width per size, from 32 at the smallest N to 512 at the largest
    ns = sorted({r.params for r in records})
    width = {n: 32 * 16 ** (i / (len(ns) - 1)) for i, n in enumerate(ns)}
    return records, [width[r.params] for r in records]


def test_penalty_is_curvature_times_the_rules_interval_squared():
    rule = LrRule("fitted", cov=((0.04, 0.0), (0.0, 0.0)), curves=CURVES)
    assert lr_penalty(rule, 100) == pytest.approx(0.05 * (1.2816 * 0.2) ** 2)
    assert lr_penalty(LrRule(), 100) is None


def test_the_same_penalty_everywhere_leaves_a_alone_and_a_growing_one_moves_it():
    records, widths = _study()
    flat = lr_sensitivity(records, widths, LrRule("fitted", cov=((0.04, 0.0), (0.0, 0.0)), curves=CURVES))
    assert flat.shift == pytest.approx(0.0, abs=1e-6)
    # var p > 0: the rule is surer near d_model 128 than far from it, so the penalty grows with size there
    growing = LrRule(
        "fitted",
        cov=((0.0, 0.0), (0.0, 1.0)),
        curves=[{"d_model": 32, "curvature": 0.0}, {"d_model": 512, "curvature": 0.2}],
    )
    moved = lr_sensitivity(records, widths, growing)
    assert abs(moved.shift) > 0.01 and moved.penalty_max > moved.penalty_min


def test_lines_name_the_rule_and_when_the_lr_dominates():
    hand = sensitivity_lines(LrRule(), None, (0.4, 0.6))
    assert any("not tuned" in line for line in hand)
    records, widths = _study()
    rule = LrRule(
        "fitted",
        cov=((0.0, 0.0), (0.0, 1.0)),
        curves=[{"d_model": 32, "curvature": 0.0}, {"d_model": 512, "curvature": 0.2}],
    )
    found = lr_sensitivity(records, widths, rule)
    assert "DOMINATES" in sensitivity_lines(rule, found, (found.a - 0.001, found.a + 0.001))[-1]
    assert "noise dominates" in sensitivity_lines(rule, found, (found.a - 10, found.a + 10))[-1]


def test_family_lines_read_the_plans_rule_and_the_runs(tmp_path):
    from dataclasses import replace

    import yaml

    from prism.isoflop.present.fitfiles import family_lr_share
    from prism.isoflop.synthetic import write_csv

    records, _ = _study()
    names = ["n11e3", "n2e4", "n32e3", "n45e3", "n63e3", "n1e5", "n2e5"]  # ascending width
    ns = sorted({r.params for r in records})
    records = [replace(r, run_id=f"{names[ns.index(r.params) % 7]}-BASE-e2e-C{r.budget:g}") for r in records]
    write_csv(records, tmp_path / "runs.csv")
    assert family_lr_share(tmp_path, (0.4, 0.6)).lines == []  # no plan: nothing said
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"lr_rule": LrRule().to_json()}))
    assert "not tuned" in family_lr_share(tmp_path, (0.4, 0.6)).lines[-1]
    rule = LrRule(
        "fitted",
        cov=((0.01, 0.0), (0.0, 0.5)),
        curves=[{"d_model": 16, "curvature": 0.01}, {"d_model": 80, "curvature": 0.1}],
    )
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"lr_rule": rule.to_json()}))
    assert "moves a by" in family_lr_share(tmp_path, (0.4, 0.6)).lines[-1]


def test_the_fit_report_has_the_learning_rate_section(tmp_path):
    import yaml

    from prism.isoflop.present.fitfiles import fit_csv
    from prism.isoflop.synthetic import write_csv

    records, _ = _study()
    write_csv(records, tmp_path / "runs.csv")
    fit_csv(tmp_path / "runs.csv", tmp_path / "fit.json", tmp_path / "fit.md", bootstrap=50)
    assert "## Learning rate" not in (tmp_path / "fit.md").read_text()  # no plan beside the table: nothing said
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"lr_rule": LrRule().to_json()}))
    fit_csv(tmp_path / "runs.csv", tmp_path / "fit.json", tmp_path / "fit.md", bootstrap=50)
    section = (tmp_path / "fit.md").read_text().split("## Learning rate", 1)[1]
    assert "lr rule hand" in section and "not tuned" in section


def test_an_untuned_study_is_weighed_against_its_designs_sweep(tmp_path):
    """The hand rule's runs against a previous round's sweep: how far off, and how a moves at the optimum."""
    from dataclasses import replace

    import yaml

    from prism.isoflop.fit.lr_sensitivity import lr_offset
    from prism.isoflop.present.fitfiles import family_lr_share
    from prism.isoflop.synthetic import write_csv

    records, widths = _study()
    names = ["n11e3", "n2e4", "n32e3", "n45e3", "n63e3", "n1e5", "n2e5"]  # ascending width: 16 ... 80
    ns = sorted({r.params for r in records})
    records = [replace(r, run_id=f"{names[ns.index(r.params) % 7]}-BASE-e2e-C{r.budget:g}") for r in records]
    sweep = [{"d_model": 16, "curvature": 0.1}, {"d_model": 80, "curvature": 0.1}]
    # Optimum = the hand rule's at every width: nothing to correct.
    same = LrRule("fitted", 3e-3, 1.0, cov=((0.01, 0.0), (0.0, 0.01)), curves=sweep)
    assert lr_offset(records, widths, LrRule(), same).shift == pytest.approx(0.0, abs=1e-6)
    # A steeper optimum: the hand rule is off by more at some sizes than others, and a moves.
    steep = LrRule("fitted", 1e-3, 2.0, cov=((0.01, 0.0), (0.0, 0.01)), curves=sweep)
    off = lr_offset(records, widths, LrRule(), steep)
    assert off.ratio_max > off.ratio_min and abs(off.shift) > 1e-3 and off.penalty_max > 0
    write_csv(records, tmp_path / "runs.csv")
    reference = {"file": "config/round0/text_image/lr_rule.json", "rule": steep.to_json()}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"lr_rule": LrRule().to_json(), "lr_reference": reference}))
    lines = family_lr_share(tmp_path, (0.4, 0.6)).lines
    assert "lr rule hand" in lines[0]
    assert "against the sweep in config/round0/text_image/lr_rule.json" in lines[-1] and "a would move by" in lines[-1]
