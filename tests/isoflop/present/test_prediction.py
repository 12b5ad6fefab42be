"""The predictions where users look: the summary's answer block and fit/*.md's table of budgets."""

from __future__ import annotations

import pytest

from prism.isoflop.fit.fit import fit_records
from prism.isoflop.present.report import fit_markdown
from prism.isoflop.present.summary import fit_lines
from tests.isoflop.fit.test_predict import BUDGETS, parabola_study


@pytest.fixture(scope="module")
def fit():
    return fit_records(parabola_study(0.1, 0.5, BUDGETS, noise=0.002, seed=4), method="approach2", bootstrap=40,
                       predict="1e20,1e24")  # fmt: skip


def test_the_summary_answers_the_asked_budgets_and_gives_the_backtest(fit):
    text = "\n".join(fit_lines(fit))
    assert "C = 1e20 (Approach 2): N_opt" in text and "C = 1e24" in text
    assert "EXTRAPOLATION" in text  # 1e24 is 5 decades beyond the largest budget
    assert "backtest: the largest budget left out, 1e19" in text
    assert "C = 1e17" not in text  # the study's own budgets are in the report, not the summary
    assert "train:" not in text  # no plan given: no shape rule to name sizes from


def test_the_summary_names_what_to_train_at_an_asked_budget_from_the_studys_plan(tmp_path):
    """The summary at the end of a study says which sizes of its shape rule to train, as the verb does."""
    import json

    import yaml

    from prism.isoflop.present.summary import summarize
    from tests.isoflop.design.test_totrain import PLAN

    fit = fit_records(parabola_study(0.1, 0.5, BUDGETS, noise=0.002, seed=4), method="approach2", bootstrap=20,
                      predict="1e19")  # fmt: skip
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "e2e.json").write_text(json.dumps(fit.to_json()))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(PLAN))
    lines = summarize([tmp_path]).splitlines()
    at = next(i for i, line in enumerate(lines) if "C = 1e19" in line)
    trains = [line for line in lines[at:] if line.strip().startswith("train: n")]
    assert len(trains) == 2 and all("steps" in line for line in trains), lines[at:]


def test_the_report_tables_every_budget(fit):
    md = fit_markdown(fit)
    table = md.split("## Predictions", 1)[1]
    for c in ("| 1e17 |", "| 1e19 |", "| 1e20 (asked) |", "| 1e24 (asked) |"):
        assert c in table
    assert "- backtest:" in table
