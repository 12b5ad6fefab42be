"""The misfit tests of a parabola (prism/isoflop/fit/misfit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from prism.isoflop.fit import misfit


def test_difference_noise_ignores_the_curve_and_measures_the_noise():
    x = np.linspace(7.0, 9.0, 13)
    curve = 2.0 + 0.3 * (x - 8) ** 2 + 0.2 * np.exp(3 * (x - 9))  # steep tail: no parabola
    ss, n = misfit.difference_noise(x, curve)
    assert n == 10 and np.sqrt(ss / n) < 2e-3
    rng = np.random.default_rng(0)
    est = [np.sqrt(np.divide(*misfit.difference_noise(x, curve + 0.01 * rng.standard_normal(13)))) for _ in range(300)]
    assert np.sqrt(np.mean(np.square(est))) == pytest.approx(0.01, rel=0.1)
    # replicates of a size give pure error
    ss, n = misfit.difference_noise(np.array([1.0, 1.0, 2.0, 2.0]), np.array([1.0, 1.2, 3.0, 3.2]))
    assert n == 2 and ss == pytest.approx(0.04)


def test_runs_test_flags_long_runs_of_one_sign():
    x = np.arange(12.0)
    signs, p = misfit.runs_test(x, np.array([-1, -1, -1, 1, 1, 1, 1, 1, 1, -1, -1, -1.0]))
    assert signs == "---++++++---" and p < 0.01
    _, p = misfit.runs_test(x, np.array([(-1.0) ** i for i in range(12)]))
    assert p > 0.5
