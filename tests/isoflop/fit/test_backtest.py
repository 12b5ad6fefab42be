"""The backtest: the largest budget(s) left out and predicted from the rest."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prism.isoflop.fit.backtest import backtest_line, units
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import RunRecord
from tests.isoflop.fit.test_predict import BUDGETS, parabola_study


def test_a_power_law_study_predicts_its_largest_budget():
    r = fit_records(parabola_study(0.1, 0.5, BUDGETS, noise=0.002, seed=2), method="approach2", bootstrap=60)
    tests = r.prediction.backtests
    assert [t.left_out for t in tests] == [[1e19], [3e18, 1e19]]
    first = tests[0]
    assert first.budget == 1e19 and first.n_ratio == pytest.approx(1.0, abs=0.05)
    assert not first.far
    assert "largest budget left out, 1e19" in backtest_line(first)
    assert not any(w.startswith("backtest") for w in r.warnings)


def test_a_bending_law_fails_its_backtest_and_warns():
    # a = 0.3 up to 3e18, then 1.5: the law from the smaller budgets misses the largest by x4.
    def n_opt(c):
        return 1e7 * (min(c, 3e18) / 1e18) ** 0.3 * (max(c, 3e18) / 3e18) ** 1.5

    rng = np.random.default_rng(0)
    recs = []
    for c in BUDGETS:
        centre = math.log10(n_opt(c))
        for x in np.linspace(centre - 0.6, centre + 0.6, 7):
            loss = 3.0 + 0.3 * (x - centre) ** 2 + 0.001 * rng.standard_normal()
            recs.append(RunRecord(f"n{x:.3f}-C{c:.2g}", 10**x, c / (6 * 10**x), float(loss), c))
    r = fit_records(recs, method="approach2", bootstrap=60)
    first = r.prediction.backtests[0]
    assert first.n_ratio == pytest.approx((10 / 3) ** 1.2, rel=0.1) and first.far
    assert any(w.startswith("backtest:") and "FAR OFF" in w for w in r.warnings)


def test_units_count_half_widths_on_the_measured_side():
    assert units(2.0, 1.0, (0.5, 4.0)) == pytest.approx(0.5)
    assert units(0.25, 1.0, (0.5, 4.0)) == pytest.approx(-2.0)
    assert units(1.1, 1.0, (0.9, 1.2), log=False) == pytest.approx(0.5)
    assert units(1.0, 1.0, None) is None
