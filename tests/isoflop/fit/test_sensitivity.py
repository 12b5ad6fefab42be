"""How a moves under the choices a reader would question (`prism.isoflop.fit.sensitivity`)."""

from __future__ import annotations

import numpy as np

from prism.isoflop.fit import sensitivity
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.fit.result import Move
from prism.isoflop.records import Surface
from prism.isoflop.synthetic import isoflop_study

SYMMETRIC = Surface(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.35)
BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]


def test_every_move_a_reader_would_question_is_fitted_and_placed():
    fit = fit_records(isoflop_study(SYMMETRIC, BUDGETS, per_budget=7, spread=1.2, noise=0.004, seed=3), bootstrap=50)
    moves = fit.sensitivity
    for approach in ("approach2", "approach3"):
        left_out = [m.detail for m in moves if m.approach == approach and m.choice == sensitivity.LEFT_OUT]
        assert left_out == ["1e18", "3e18", "1e19", "3e19", "1e20"]
        assert any(m.approach == approach and m.choice == sensitivity.EDGES for m in moves)
    (window,) = [m for m in moves if m.choice == sensitivity.WINDOW]
    (huber,) = [m for m in moves if m.choice == sensitivity.HUBER]
    assert window.stretches and window.detail == "every size" and huber.stretches and "least squares" in huber.detail
    assert not any(m.stretches for m in moves if m.choice in (sensitivity.LEFT_OUT, sensitivity.EDGES))
    # a clean study on Approach 3's own surface: every move lands near the truth and is placed
    assert all(abs(m.a - SYMMETRIC.a) < 0.05 and m.outside is not None for m in moves)
    lo, hi = fit.verdict.interval
    assert all((m.outside == 0) == (lo <= m.a <= hi) for m in moves)


def test_the_same_runs_analysed_otherwise_stretch_the_interval_and_subsamples_do_not():
    moves = [
        Move(sensitivity.WINDOW, "every size", "approach2", 0.62, stretches=True),
        Move(sensitivity.LEFT_OUT, "1e18", "approach2", 0.30),
        Move(sensitivity.HUBER, "delta 10 (least squares)", "approach3", 0.55, stretches=True),
    ]
    interval, moved = sensitivity.stretched((0.50, 0.58), moves)
    assert interval == (0.50, 0.62) and moved == [moves[0]]
    placed = sensitivity.placed(moves, interval)
    assert [m.outside for m in placed] == [0.0, 0.2, 0.0]
    assert "does not hold 1 of 3 sensitivity moves: Approach 2 budget left out (1e18): 0.300" in (
        sensitivity.outside_line(placed)
    )


def test_a_window_that_moves_a_stretches_the_verdicts_interval_and_says_so():
    """A wide grid whose full-grid parabolas a tail bends: the verdict holds Approach 2 on every size too."""
    from prism.isoflop.records import CHINCHILLA_EPOCH
    from prism.isoflop.synthetic import undertrained_study

    recs = undertrained_study(CHINCHILLA_EPOCH, [1e18, 3e18, 1e19, 3e19, 1e20, 3e20], per_budget=13, spread=1.8)
    fit = fit_records(recs, method="approach2", bootstrap=0)
    (window,) = [m for m in fit.sensitivity if m.choice == sensitivity.WINDOW]
    assert not fit.approach2.a_ci[0] <= window.a <= fit.approach2.a_ci[1]
    assert fit.verdict.interval[0] <= window.a <= fit.verdict.interval[1] and window.outside == 0
    assert any("stretched to hold a under another standard choice: every size" in r for r in fit.verdict.reasons)


def test_edge_mask_drops_each_budgets_smallest_and_largest_size():
    n = np.array([1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0])
    c = np.array([1, 1, 1, 1, 2, 2, 2])
    assert sensitivity.edge_mask(n, c).tolist() == [False, True, True, False, False, True, False]


def test_least_squares_driven_by_a_few_runs_huber_down_weights_does_not_stretch():
    """Three runs far above their curves (kept: no outlier test here) pull least squares' a; Huber's
    fit barely moves. Refitted without them least squares comes back: the move is shown, with that
    reason, and does not stretch the verdict. Without such runs least squares stretches as before."""
    from prism.isoflop.fit import approach3

    surface = Surface(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
    runs = isoflop_study(surface, [1e18, 1e19, 1e20, 1e21], per_budget=9, spread=1.2, noise=0.003, seed=0)
    n, d, loss, c = (np.array([getattr(r, k) for r in runs]) for k in ("params", "tokens", "loss", "budget"))
    spoiled = loss.copy()
    spoiled[[8, 17, 26]] += 0.4  # the largest size of three budgets
    for y, driven in ((spoiled, True), (loss, False)):
        fit = approach3.fit_approach3(n, d, y)
        move = next(
            m
            for m in sensitivity.approach3_moves(n, d, y, c, fit, approach3.Approach3Options())
            if m.choice == sensitivity.HUBER
        )
        assert move.stretches is not driven, move
        assert ("driven by 3 run(s) Huber's loss down-weights" in move.detail) is driven
