"""Which approach may speak: the lack-of-fit tests and the rule the verdict and the prediction share."""

from __future__ import annotations

import numpy as np
import pytest

from prism.isoflop.fit import approach2, diagnostics, goodness, methods
from prism.isoflop.fit.goodness import Goodness
from prism.isoflop.fit.method import MethodFit

NAMES = {"approach2": "Approach 2", "approach3": "Approach 3"}
FITS = {a: Goodness(a, False, 0.5, 0.3, f"{name} fits") for a, name in NAMES.items()}
MISFITS = {a: Goodness(a, True, 1e-6, 2.0, f"{name} misfits (lack of fit p=1e-06)") for a, name in NAMES.items()}


def test_the_approach_that_misfits_beside_one_that_fits_is_silenced_and_named():
    s = goodness.speakers("both", {"approach2": FITS["approach2"], "approach3": MISFITS["approach3"]})
    assert s.heard == ("approach2",) and s.silenced == ("approach3",) and s.none_fits is None
    assert s.may_speak("approach2") and not s.may_speak("approach3")
    assert s.reasons == ("Approach 3 misfits (lack of fit p=1e-06)",)


def test_when_every_approach_misfits_none_speaks_and_that_is_the_reason():
    s = goodness.speakers("both", MISFITS)
    assert s.heard == () and "no approach fits the runs" in s.none_fits
    assert "Approach 2 misfits" in s.none_fits and "Approach 3 misfits" in s.none_fits


@pytest.mark.parametrize("method", ["approach2", "approach3", "both"])
def test_untested_or_fitting_approaches_are_heard(method):
    s = goodness.speakers(method, {"approach2": None, "approach3": FITS["approach3"]})
    expected = {"approach2": ("approach2",), "approach3": ("approach3",), "both": ("approach2", "approach3")}
    assert s.heard == expected[method] and not s.silenced


def test_a_lone_approach_that_misfits_is_not_identifiable():
    s = goodness.speakers("approach3", {"approach3": MISFITS["approach3"]})
    assert s.heard == () and s.none_fits


def _grid(tilt: float, noise: float, seed: int = 0):
    """(params, loss, budget, Approach 2's per-budget fits, the surface's loss) on 6 budgets of 9 sizes:
    the runs' minima on a line of slope 0.5 in log C; the 'surface' puts its optima `tilt` decades
    of N per decade of C away from them (a level shift along C besides, which moves no optimum)."""
    rng = np.random.default_rng(seed)
    n, loss, budget, surface = [], [], [], []
    for i, c in enumerate(np.logspace(18, 21, 6)):
        centre = 8.0 + 0.5 * (np.log10(c) - 18)
        x = centre + np.linspace(-0.6, 0.6, 9)
        n += list(10**x)
        loss += list(3.0 + 0.1 * (x - centre) ** 2 + noise * rng.standard_normal(len(x)))
        moved = centre + tilt * (np.log10(c) - 19.5)
        surface += list(3.0 + 0.02 * i + 0.1 * (x - moved) ** 2)
        budget += [c] * len(x)
    n, loss, budget = np.array(n), np.array(loss), np.array(budget)
    a2 = approach2.fit_approach2(n, 6 * n, loss, budget, window="full", lean=False)
    return n, loss, budget, a2.per_budget, np.array(surface)


def test_approach3s_test_finds_optima_off_the_minima_and_says_by_how_much():
    """A surface whose optima tilt 0.1 decades of N per decade of C off the runs' minima: it misfits
    where the answer is concerned, and the evidence names the tilt of a."""
    n, loss, budget, per_budget, surface = _grid(0.1, 0.002)
    g = goodness.approach3_goodness(n, budget, surface, per_budget, 0.002, 40)
    assert g.misfits and g.p < 1e-6
    assert "the gaps tilt a by +0.09" in g.evidence and "above the minimum" in g.evidence


def test_approach3s_test_passes_a_surface_whose_optima_are_the_minima():
    """The same surface without the tilt (its loss level still drifts along C): heard."""
    n, loss, budget, per_budget, surface = _grid(0.0, 0.002, seed=3)
    g = goodness.approach3_goodness(n, budget, surface, per_budget, 0.002, 40)
    assert not g.misfits and g.p > goodness.MISFIT_LEVEL


def test_a_tilt_within_the_minimas_errors_does_not_silence():
    """A tilt far under the minima's errors (noisy runs) does not silence the surface."""
    n, loss, budget, per_budget, surface = _grid(0.002, 0.02)
    g = goodness.approach3_goodness(n, budget, surface, per_budget, 0.02, 40)
    assert not g.misfits


def test_the_verdict_spans_two_approaches_that_fit_and_disagree():
    """Both heard, estimates outside each other's intervals: the span, NOT identifiable when wide."""
    heard = goodness.speakers("both", FITS)
    v = diagnostics.verdict("both", [], 0.01, _fits(0.40, (0.37, 0.43), 0.55, (0.52, 0.58)), n_runs=60, heard=heard)
    assert not v.identifiable and v.rests_on == "envelope" and v.interval == (0.37, 0.58)


def test_the_verdict_rests_on_the_approach_that_fits():
    heard = goodness.speakers("both", {"approach2": MISFITS["approach2"], "approach3": FITS["approach3"]})
    v = diagnostics.verdict("both", [], 0.01, _fits(0.40, (0.37, 0.43), 0.55, (0.52, 0.58)), n_runs=60, heard=heard)
    assert v.rests_on == "approach3" and v.interval == (0.52, 0.58) and v.heard == ["approach3"]
    assert v.identifiable and any(r.startswith("Approach 2 misfits") for r in v.reasons)


def test_when_no_approach_fits_a_is_not_identifiable_with_that_reason():
    heard = goodness.speakers("both", MISFITS)
    v = diagnostics.verdict("both", [], 0.01, _fits(0.41, (0.40, 0.42), 0.41, (0.40, 0.42)), n_runs=60, heard=heard)
    assert not v.identifiable and v.reasons[0].startswith("no approach fits the runs")


def _fits(a2, a2_ci, a3, a3_ci) -> list:
    """The verdict's input: Approach 2 (interval given "x") and Approach 3 as fitted."""
    return [
        (methods.get("approach2"), MethodFit("approach2", a2, a2_ci, "x")),
        (methods.get("approach3"), MethodFit("approach3", a3, a3_ci, summary=_A3(a3, a3_ci))),
    ]


class _A3:
    """The few fields of an Approach3Summary the verdict reads."""

    def __init__(self, a, ci):
        self.a, self.a_ci, self.fitted, self.converged, self.n_boot_used = a, ci, True, True, 100
        self.a_interval_method = "profile likelihood of a"
