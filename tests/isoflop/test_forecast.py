"""The identifiability forecast on planned grids with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from prism.isoflop.forecast import forecast, prior_surface


def _grid(budgets, spread, per_budget=5, k=0.1, a=0.5):
    n, d, c = [], [], []
    for b in budgets:
        centre = np.log10(k * b**a)
        for x in np.linspace(centre - spread / 2, centre + spread / 2, per_budget):
            n.append(10**x)
            d.append(b / (6 * 10**x))
            c.append(b)
    return np.array(n), np.array(d), np.array(c)


def test_prior_surface_puts_its_optimum_on_the_centre():
    s = prior_surface(a=0.5, k=0.1)
    assert s.a == pytest.approx(0.5)
    for c in (1e12, 1e18, 1e22):
        assert s.n_opt(c) == pytest.approx(0.1 * c**0.5, rel=1e-9)


def test_wide_grid_is_determined():
    fc = forecast(*_grid([1e12, 3e12, 1e13, 3e13], spread=1.0), prior_surface(0.5, 0.1), n_sims=200)
    assert fc.determined, fc.reasons
    assert fc.a_ci_width < 0.15
    assert fc.a_noise_free == pytest.approx(0.5, abs=0.01)
    assert fc.a_ci[0] < 0.5 < fc.a_ci[1]


def test_narrow_grid_is_undetermined_naming_the_spread():
    fc = forecast(*_grid([1e17, 3e17, 1e18], spread=0.05), prior_surface(0.5, 0.1), n_sims=200, noise=0.012)
    assert not fc.determined
    assert any("N spread 0.05 decades at 3e17: exponent undetermined; add a larger backbone" in r for r in fc.reasons)


def test_noise_widens_the_interval_and_is_reproducible():
    grid = _grid([1e12, 3e12, 1e13], spread=0.5)
    quiet = forecast(*grid, prior_surface(0.5, 0.1), noise=0.001, n_sims=200, seed=1)
    loud = forecast(*grid, prior_surface(0.5, 0.1), noise=0.05, n_sims=200, seed=1)
    again = forecast(*grid, prior_surface(0.5, 0.1), noise=0.05, n_sims=200, seed=1)
    assert loud.a_ci == again.a_ci
    assert loud.a_ci is None or loud.a_ci_width > quiet.a_ci_width
