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


def test_the_report_tables_every_budget(fit):
    md = fit_markdown(fit)
    table = md.split("## Predictions", 1)[1]
    for c in ("| 1e17 |", "| 1e19 |", "| 1e20 (asked) |", "| 1e24 (asked) |"):
        assert c in table
    assert "- backtest:" in table
