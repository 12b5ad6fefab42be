"""The verdict on loss surfaces that are not Approach 3's form: an identifiable verdict holds the true a.

Approach 3 assumes L = E + A / N^alpha + B / D^beta; Approach 2 assumes each IsoFLOP curve is a
parabola in log N. Real losses are neither, so the verdict is tested where the truth is known
and neither assumption holds exactly: an irreducible loss that falls with size, a data term
with two curvatures, and a grid centred off the optimum (by a prior a that is wrong) on an
asymmetric surface, where Approach 2 is biased even without noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from prism.core.ids import format_budget
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import RunRecord

BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20, 3e20]


def size_dependent_e(n, d):
    """The irreducible part falls with size (a larger model fits more of the data's entropy)."""
    return 1.6 + 1.2 / (n / 1e7) ** 0.25 + 400 / n**0.34 + 410 / d**0.28


def two_data_terms(n, d):
    """The data term bends: two power laws in D with different exponents."""
    return 1.8 + 480 / n**0.35 + 2000 / d**0.37 + 6.0 / d**0.08


def asymmetric(n, d):
    return 1.8 + 480 / n**0.46 + 400 / d**0.15


def off_centre(c):
    """A grid centred on a prior a that is wrong: 0.3 decade off at 1e18, drifting 0.2 a decade of C."""
    return 0.3 + 0.2 * math.log10(c / 1e18)


def n_opt(loss, c: float) -> float:
    x = np.linspace(5, 14, 90_001)
    return float(10 ** x[np.argmin(loss(10**x, c / (6 * 10**x)))])


def true_a(loss) -> float:
    """The exponent the study estimates: the slope of log N_opt(C) over its budgets."""
    return float(np.polyfit(np.log10(BUDGETS), np.log10([n_opt(loss, c) for c in BUDGETS]), 1)[0])


def study(loss, spread=1.5, per_budget=9, offset=lambda c: 0.0, noise=0.0, seed=0) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for c in BUDGETS:
        centre = math.log10(n_opt(loss, c)) + offset(c)
        for x in np.linspace(centre - spread / 2, centre + spread / 2, per_budget):
            n, d = 10**x, c / (6 * 10**x)
            y = float(loss(n, d) + (noise * rng.standard_normal() if noise else 0.0))
            out.append(RunRecord(f"n{n:.3g}-C{format_budget(c)}", n, d, y, c))
    return out


CASES = {
    "irreducible loss falls with size": (size_dependent_e, {"spread": 2.0}),
    "data term with two curvatures": (two_data_terms, {}),
    "off-centre grid, asymmetric surface": (asymmetric, {"offset": off_centre, "spread": 1.6}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_identifiable_verdicts_hold_the_true_a_on_surfaces_not_of_approach3s_form(case):
    """Four noisy studies a surface: most are identifiable, and their intervals hold the truth (within a
    tenth of their width) as an 80% interval does: at most one of four misses. Demanding all four would
    fail a calibrated interval in 4 of 10 draws; over 12 studies a surface the verdict holds the truth
    in 11, 9 and 12 of 12 (resting on the narrower of two approaches that agree, as it did before: 11, 7
    and 11), Approach 3 being biased by about half its interval's width on the two-curvature surface."""
    loss, kw = CASES[case]
    a = true_a(loss)
    identifiable, missed = 0, []
    for seed in range(4):
        v = fit_records(study(loss, noise=0.01, seed=seed, **kw), bootstrap=50, seed=seed).verdict
        if not v.identifiable:
            continue
        identifiable += 1
        lo, hi = v.interval
        if not lo - 0.1 * (hi - lo) <= a <= hi + 0.1 * (hi - lo):
            missed.append((seed, a, v.interval))
    assert identifiable >= 3, case
    assert len(missed) <= 1, (case, missed)


def test_a_narrow_interval_from_a_misspecified_approach3_does_not_decide():
    """Without noise Approach 3's narrow interval misses the truth (its form is wrong): its optima sit
    within the budgets' minima's errors, so it is heard, and the verdict spans it and Approach 2 and
    holds the truth; it never rests on Approach 3 alone."""
    loss = lambda n, d: 1.8 + 480 / n**0.35 + 2000 / d**0.45 + 3.0 / d**0.05  # noqa: E731
    a = true_a(loss)
    fit = fit_records(study(loss, spread=2.0), bootstrap=100)
    a3_lo, a3_hi = fit.approach3.a_ci
    assert not a3_lo <= a <= a3_hi  # Approach 3 alone would be confidently wrong
    v = fit.verdict
    assert v.identifiable and v.rests_on != "approach3" and v.interval[0] <= a <= v.interval[1], v.reasons
    # the bias of Approach 2 on Approach 3's surface is still reported
    assert "note" in fit.diagnostics.approach_agreement


def grid(loss, budgets, per_budget, spread, noise, seed):
    """(runs, true a) of a grid centred on each budget's true optimum, for any number of budgets."""
    rng = np.random.default_rng(seed)
    runs, opt = [], []
    for c in budgets:
        opt.append(math.log10(n_opt(loss, c)))
        for x in np.linspace(opt[-1] - spread / 2, opt[-1] + spread / 2, per_budget):
            n, d = 10**x, c / (6 * 10**x)
            runs.append(
                RunRecord(f"n{n:.3g}-C{format_budget(c)}", n, d, float(loss(n, d) + noise * rng.standard_normal()), c)
            )
    return runs, float(np.polyfit(np.log10(budgets), opt, 1)[0])


def chinchilla(n, d):
    return 1.69 + 406.4 / n**0.34 + 410.7 / d**0.28


def interaction(n, d):
    """Chinchilla's surface plus a term in N/D: no choice of E, A, B, alpha, beta fits it."""
    return chinchilla(n, d) + 30 * (n / d) ** 0.25 / n**0.15


def _held(v, a) -> tuple[bool, bool]:
    """(holds a, holds it within one width of the interval): an 80% interval misses a fifth of the
    time, never by much."""
    lo, hi = v.interval
    return lo <= a <= hi, lo - (hi - lo) <= a <= hi + (hi - lo)


@pytest.mark.parametrize("budgets, per_budget, spread", [(8, 10, 1.2), (3, 15, 1.5), (12, 30, 2.0)])
def test_an_approach3_that_misfits_the_curves_but_not_their_optima_is_heard(budgets, per_budget, spread):
    """An N/D interaction Approach 3 cannot express, three noisy studies: its surface misfits the
    curves but puts their optima within the minima's errors (its a within 0.01 of the truth), so it
    is heard and the verdict spans both approaches; identifiable and holding the true a (in most
    studies; near it in all)."""
    held = 0
    for seed in range(3):
        runs, a = grid(interaction, np.logspace(18, 21, budgets), per_budget, spread, 0.005, seed=seed)
        v = fit_records(runs, bootstrap=20).verdict
        assert any(r.startswith("Approach 3 fits (its optima") for r in v.reasons) or "approach3" in v.heard
        inside, near = _held(v, a)
        assert v.identifiable and near, (a, v.interval, v.reasons)
        held += inside
    assert held >= 2


def test_an_approach3_whose_optima_leave_the_minima_is_named_and_approach2_decides():
    """A stronger N/D interaction moves Approach 3's optima off the budgets' minima: it is named with
    the evidence, its moves decide nothing, and the verdict rests on Approach 2 and holds the true a."""
    strong = lambda n, d: chinchilla(n, d) + 300 * (n / d) ** 0.25 / n**0.15  # noqa: E731
    runs, a = grid(strong, np.logspace(18, 21, 8), 10, 1.2, 0.005, seed=0)
    v = fit_records(runs, bootstrap=20).verdict
    assert v.heard == ["approach2"] and v.rests_on == "approach2", v.reasons
    misfit = next(r for r in v.reasons if r.startswith("Approach 3 misfits"))
    assert "the gaps tilt a by" in misfit and "the minimum" in misfit
    assert not any("Approach 3 budget left out" in r for r in v.reasons)
    assert v.identifiable and _held(v, a)[1], (a, v.interval, v.reasons)


@pytest.mark.parametrize("budgets, per_budget, spread", [(3, 30, 1.5), (8, 10, 1.2), (12, 5, 1.0)])
def test_on_approach3s_own_form_both_approaches_are_heard(budgets, per_budget, spread):
    """Grids of 3, 8 and 12 budgets with 5-30 sizes on the surface both approaches fit, three noisy
    studies each: neither is silenced, the verdict is identifiable and near the true a in all, and
    Approach 2's interval holds it in most (Approach 3's bootstrap interval of a few resamples, on
    which the verdict may rest when the two agree, is narrow and misses it more often)."""
    held = 0
    for seed in range(3):
        runs, a = grid(chinchilla, np.logspace(18, 21, budgets), per_budget, spread, 0.003, seed=seed)
        fit = fit_records(runs, bootstrap=20)
        v = fit.verdict
        assert v.heard == ["approach2", "approach3"], v.reasons
        assert v.identifiable and _held(v, a)[1], (a, v.interval, v.reasons)
        held += fit.approach2.a_ci[0] <= a <= fit.approach2.a_ci[1]
    assert held >= 2


def test_a_grid_that_cannot_determine_a_stays_undetermined():
    """3 budgets of 5 sizes each over half a decade at noise 0.03: neither approach misfits (noise
    hides any form), and the verdict says a is not determined."""
    runs, _ = grid(chinchilla, [1e18, 1e19, 1e20], 5, 0.5, 0.03, seed=2)
    v = fit_records(runs, bootstrap=50).verdict
    assert not v.identifiable and set(v.heard or ["approach2", "approach3"]) == {"approach2", "approach3"}
