"""Approach 2: batched parabolas, the rejection rules, power laws, the vectorised bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from prism.isoflop import approach2
from prism.isoflop.records import Surface
from prism.isoflop.synthetic import isoflop_study

SYMMETRIC = Surface(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.35)
BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]


def _arrays(recs):
    return [np.array([getattr(r, k) for r in recs]) for k in ("params", "tokens", "loss", "budget")]


def test_parabola_batch_recovers_coefficients_row_by_row():
    x = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 2.0, 2.0]])
    y = np.stack([1 - 2 * x[0] + 0.5 * x[0] ** 2, 3 + 0 * x[1]])
    coef, distinct = approach2.parabola_batch(x, y)
    assert np.allclose(coef[0], [1, -2, 0.5])
    assert distinct.tolist() == [4, 2]
    assert np.all(np.isnan(coef[1]))  # two distinct x: no parabola, no singular solve


def test_symmetric_surface_centred_grid_is_exact():
    """alpha = beta: the loss along an IsoFLOP curve is symmetric in log N, so the vertex is the optimum."""
    res = approach2.fit_approach2(*_arrays(isoflop_study(SYMMETRIC, BUDGETS, per_budget=7, spread=0.6)))
    assert all(f.accepted for f in res.per_budget)
    assert res.n_law.exponent == pytest.approx(SYMMETRIC.a, abs=1e-3)
    assert res.d_law.exponent == pytest.approx(SYMMETRIC.b, abs=1e-3)
    for f in res.per_budget:
        assert f.n_opt == pytest.approx(SYMMETRIC.n_opt(f.budget), rel=0.02)
        assert f.d_opt == pytest.approx(f.budget / (6 * f.n_opt), rel=1e-6)  # read off the C = 6ND line


def test_monotone_budget_is_rejected_as_edge_minimum():
    """Losses that keep falling toward large N: the vertex lies off the sampled range."""
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=0.8)
    recs += isoflop_study(SYMMETRIC, [3e20], per_budget=5, spread=0.5, offset=-0.9)  # all left of the optimum
    res = approach2.fit_approach2(*_arrays(recs))
    bad = [f for f in res.per_budget if f.budget == 3e20][0]
    assert not bad.accepted
    assert "outside the sampled range" in bad.reason and "add larger N" in bad.reason
    assert bad.n_opt is None
    assert res.n_law.exponent == pytest.approx(SYMMETRIC.a, abs=0.01)  # the rejected budget did not bias it


def test_negative_curvature_and_too_few_points_are_rejected():
    n = np.array([1e8, 2e8, 4e8, 1e8, 2e8])
    loss = np.array([2.0, 2.2, 2.0, 2.0, 2.1])
    budget = np.array([1e19, 1e19, 1e19, 1e20, 1e20])
    fits = approach2.fit_budgets(n, budget / (6 * n), loss, budget)
    assert "curvature" in fits[0].reason and not fits[0].accepted
    assert "needs at least 3" in fits[1].reason and not fits[1].accepted


def test_bootstrap_is_reproducible_and_brackets_the_truth():
    recs = isoflop_study(SYMMETRIC, BUDGETS, per_budget=5, spread=1.0, noise=0.01, seed=3)
    arrays = _arrays(recs)
    one = approach2.fit_approach2(*arrays, n_boot=300, seed=7)
    two = approach2.fit_approach2(*arrays, n_boot=300, seed=7)
    assert one.n_law.exponent_ci == two.n_law.exponent_ci
    lo, hi = one.n_law.exponent_ci
    assert lo < one.n_law.exponent < hi
    assert lo - 0.05 < SYMMETRIC.a < hi + 0.05
    assert one.n_boot_used > 250
    assert len(one.n_law.band_lo) == len(BUDGETS)
    assert all(lo_ <= hi_ for lo_, hi_ in zip(one.n_law.band_lo, one.n_law.band_hi))


def test_one_accepted_budget_gives_no_power_law():
    res = approach2.fit_approach2(*_arrays(isoflop_study(SYMMETRIC, [1e19], per_budget=5)), n_boot=10)
    assert res.n_law is None and "at least 2" in res.reason


def test_power_law_batch_masks():
    log_c = np.array([18.0, 19.0, 20.0])
    y = np.array([[9.0, 9.5, 10.0], [9.0, np.nan, 10.0], [9.0, 1.0, 2.0]])
    mask = np.array([[True, True, True], [True, False, True], [True, False, False]])
    icpt, slope = approach2.power_law_batch(log_c, y, mask)
    assert slope[:2] == pytest.approx([0.5, 0.5])
    assert np.isnan(slope[2])
