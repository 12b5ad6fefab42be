"""An Approach 3 fit that did not converge is no answer: not drawn, and said in plain words."""

from __future__ import annotations

from dataclasses import replace

import pytest

from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import Surface
from prism.isoflop.synthetic import isoflop_study

SURFACE = Surface(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.35)


@pytest.fixture(scope="module")
def unconverged():
    """A two-budget study (the smoke study's shape) whose Approach 3 did not converge."""
    recs = isoflop_study(SURFACE, [1e18, 1e19], per_budget=4, spread=1.0, noise=0.005, seed=2)
    fit = fit_records(recs, bootstrap=0)
    a3 = replace(fit.approach3, converged=False, convergence_note="alpha at the lower bound 0")
    return recs, replace(fit, approach3=a3)


def test_the_summary_says_why_in_words_and_that_two_budgets_expect_it(unconverged):
    from prism.isoflop.present.summary import fit_lines

    _, fit = unconverged
    line = next(t for t in fit_lines(fit) if "Approach 3" in t)
    assert "no exponent, not drawn" in line and "did not settle" in line
    assert "expected with 2 budget(s)" in line and "checks the pipeline, not the law" in line
    assert "a = " not in line  # its numbers are no answer


def test_the_figures_draw_no_unconverged_law_and_say_so(unconverged):
    import matplotlib.pyplot as plt

    from prism.isoflop.present import plot

    recs, fit = unconverged
    fig = plot.figure_scaling_laws(fit)
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert not any("Approach 3" in t for t in labels)
    assert "Approach 3 did not converge: not drawn" in fig._suptitle.get_text()
    # What the title calls dotted is drawn, and the legend names it.
    rejected = [b for b in fit.approach2.per_budget if not b.accepted]
    dotted = [line for ax in fig.axes for line in ax.lines if line.get_linestyle() == ":"]
    assert ("dotted lines" in fig._suptitle.get_text()) == bool(rejected) == bool(dotted)
    plt.close(fig)
    fig = plot.figure_approach3(recs, fit)
    assert any("Approach 3 not drawn" in t.get_text() for t in fig.axes[0].texts)
    plt.close(fig)


def test_a_two_budget_summary_says_it_is_a_check(unconverged):
    from prism.isoflop.present.summary import fit_lines

    _, fit = unconverged
    assert any("this grid checks that the pipeline runs end to end, and it did" in t for t in fit_lines(fit))
