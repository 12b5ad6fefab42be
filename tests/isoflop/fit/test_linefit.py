"""The power law through the minima (prism/isoflop/fit/linefit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from prism.isoflop.fit import linefit


def test_a_bend_in_log_n_opt_against_log_c_is_measured():
    rng = np.random.default_rng(0)
    log_c = np.linspace(18, 21, 7)
    straight = 0.5 * log_c - 1 + 0.01 * rng.standard_normal(7)
    assert linefit.power_law_curvature(log_c, straight)["p"] > 0.01
    bent = straight + 0.05 * (log_c - 19.5) ** 2
    cv = linefit.power_law_curvature(log_c, bent)
    assert cv["p"] < 0.01 and cv["c2"] == pytest.approx(0.05, abs=0.02) and cv["dof"] == 4
    assert linefit.power_law_curvature(log_c[:3], straight[:3]) is None
