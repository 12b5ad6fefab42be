"""The batched parabola and power-law solvers (prism/isoflop/fit/parabola.py)."""

from __future__ import annotations

import numpy as np
import pytest

from prism.isoflop.fit import parabola


def test_parabola_batch_recovers_coefficients_row_by_row():
    x = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 2.0, 2.0]])
    y = np.stack([1 - 2 * x[0] + 0.5 * x[0] ** 2, 3 + 0 * x[1]])
    coef, distinct = parabola.parabola_batch(x, y)
    assert np.allclose(coef[0], [1, -2, 0.5])
    assert distinct.tolist() == [4, 2]
    assert np.all(np.isnan(coef[1]))  # two distinct x: no parabola, no singular solve


def test_power_law_batch_masks():
    log_c = np.array([18.0, 19.0, 20.0])
    y = np.array([[9.0, 9.5, 10.0], [9.0, np.nan, 10.0], [9.0, 1.0, 2.0]])
    mask = np.array([[True, True, True], [True, False, True], [True, False, False]])
    icpt, slope = parabola.power_law_batch(log_c, y, mask)
    assert slope[:2] == pytest.approx([0.5, 0.5])
    assert np.isnan(slope[2])
