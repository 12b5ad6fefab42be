"""The identifiability forecast on planned grids with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from prism.isoflop.design.forecast import forecast, prior_surface


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


def test_two_budgets_are_never_determined():
    """A power law through 2 minima has no degree of freedom: however quiet, however wide."""
    fc = forecast(*_grid([1e12, 1e14], spread=1.5, per_budget=9), prior_surface(0.5, 0.1), noise=1e-5)
    assert not fc.determined
    assert any("at least 3" in r and "no degree of freedom" in r for r in fc.reasons)


def test_first_round_forecast_spans_plausible_surfaces_and_is_honest_about_the_default_grid():
    """The default CPU study's grid (2 budgets x 3 sizes, centre 0.05 C^0.5) was forecast DETERMINED
    with an interval 0.039 wide on one Chinchilla-shaped surface; it measured 0.377 wide."""
    from prism.isoflop.design.forecast import forecast_plan

    grid = _grid([1e12, 3e12], spread=0.48, per_budget=3, k=0.05)
    fc = forecast_plan(*grid, 0.5, 0.05, n_sims=100)
    assert fc.scenarios == 54 and not fc.determined
    assert fc.a_ci_width_pessimistic >= fc.a_ci_width_median > 0.377 / 2
    assert fc.reasons[0].startswith("over 54 plausible surfaces")
    assert fc.noise_relative in (0.005, 0.01, 0.02)
    # five budgets of five runs over a decade: determined on the median surface
    wide = forecast_plan(*_grid([1e12, 3e12, 1e13, 3e13, 1e14], spread=1.0, per_budget=5, k=0.05), 0.5, 0.05)
    assert wide.determined and wide.a_ci_width_median < 0.15
    assert "pessimistic" in wide.reasons[0]


def test_relative_noise_makes_the_forecast_independent_of_the_loss_scale():
    grid = _grid([1e12, 3e12, 1e13], spread=1.0)
    s = prior_surface(0.5, 0.1)
    scaled = type(s)(E=10 * s.E, A=10 * s.A, B=10 * s.B, alpha=s.alpha, beta=s.beta)
    one, ten = forecast(*grid, s, seed=3), forecast(*grid, scaled, seed=3)
    assert ten.noise == pytest.approx(10 * one.noise) and one.noise_relative == 0.01
    assert one.a_ci == pytest.approx(ten.a_ci) and one.determined == ten.determined


def test_a_previous_fit_gives_its_surface_and_measured_noise():
    from prism.isoflop.design.forecast import prior_from_fit
    from prism.isoflop.fit.fit import fit_records
    from prism.isoflop.fitread import fit_from_json
    from prism.isoflop.records import Surface
    from prism.isoflop.synthetic import isoflop_study

    truth = Surface(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.35)
    recs = isoflop_study(truth, [1e18, 3e18, 1e19, 3e19, 1e20], per_budget=5, spread=1.0, noise=0.004, seed=1)
    fit = fit_records(recs, bootstrap=20)
    prior = prior_from_fit(fit_from_json(fit.to_json(), "round1/fit/e2e.json"), "round 1")  # as a round reads it
    assert prior.source == "round 1 (Approach 3)" and prior.surface == fit.approach3.surface
    assert prior.noise == fit.diagnostics.noise and 0.002 < prior.noise < 0.008
    assert prior.a == pytest.approx(truth.a, abs=0.02)
    assert prior_from_fit(fit_records(recs[:10], bootstrap=0)) is None  # 2 budgets: nothing determined
