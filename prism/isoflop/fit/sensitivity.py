"""How the exponent a moves under the choices a reader of a scaling law would question.

Pure maths on the fit's arrays (no I/O): each budget left out, the window of sizes each
minimum is fitted on (every size against the sizes around the minimum), Approach 3's
Huber threshold (least squares against delta 1e-3), and each budget's smallest and
largest size dropped. Approach 2 refits its parabolas (each budget left out only drops a
point of the power law: the minima are fitted budget by budget); Approach 3 reoptimises
from its own optimum with the runs weighted 0 or 1, so all of it costs a small share of
the fit's bootstrap.

Two kinds of move: an alternative analysis of the same runs (the window, the Huber
threshold) is as much the methods' answer as the chosen one, so the verdict's interval is
stretched to hold it (`Move.stretches`); a move that leaves runs out (a budget, the grid's
edges) carries the noise of the runs it lost, so it is placed against the interval and
named when it falls outside, but does not widen it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from prism.isoflop.fit import approach2, approach3
from prism.isoflop.fit.approach2 import budget_text
from prism.isoflop.fit.result import Move
from prism.isoflop.records import Approach3Fit

# Approach 3's alternative Huber delta: least squares in effect (every log-loss residual is far below it).
LEAST_SQUARES_DELTA = 10.0
LEFT_OUT, WINDOW, HUBER, EDGES = "budget left out", "window", "huber", "edges dropped"
# Runs whose log-loss residual from the Huber fit lies beyond FEW_K robust scales are the ones its
# loss down-weights; a few is at most FEW_SHARE of the runs.
FEW_K = 3.0
FEW_SHARE = 0.1


def edge_mask(params, budget) -> np.ndarray:
    """True for runs that are not at their budget's smallest or largest size."""
    params, budget = np.asarray(params, float), np.asarray(budget, float)
    keep = np.ones(len(params), bool)
    for c in np.unique(budget):
        sel = budget == c
        keep &= ~(sel & ((params == params[sel].min()) | (params == params[sel].max())))
    return keep


def approach2_moves(n, d, loss, budget, a2: approach2.Approach2Result) -> list[Move]:
    """Approach 2's a with each accepted budget left out, with the other window, without the edges."""
    if a2.n_law is None:
        return []
    acc = a2.accepted
    moves = []
    if len(acc) >= 3:
        log_c, log_n = np.log10([f.budget for f in acc]), np.log10([f.n_opt for f in acc])
        for i, f in enumerate(acc):
            rest = np.arange(len(acc)) != i
            moves.append(
                Move(LEFT_OUT, budget_text(f.budget), "approach2", float(np.polyfit(log_c[rest], log_n[rest], 1)[0]))
            )
    other = "full" if a2.window == "auto" else "auto"
    detail = "every size" if other == "full" else "the sizes around each minimum (--span auto)"
    moves.append(Move(WINDOW, detail, "approach2", _a2(n, d, loss, budget, other, a2.reference), stretches=True))
    keep = edge_mask(n, budget)
    window = a2.window if a2.window in approach2.WINDOWS else "auto"
    a_edges = _a2(n[keep], d[keep], loss[keep], budget[keep], window, None) if keep.sum() >= 6 else None
    moves.append(Move(EDGES, "each budget's smallest and largest size", "approach2", a_edges))
    return moves


def _a2(n, d, loss, budget, window, reference) -> float | None:
    try:
        with np.errstate(all="ignore"):
            law = approach2.fit_approach2(n, d, loss, budget, window=window, reference=reference).n_law
    except (ArithmeticError, ValueError, np.linalg.LinAlgError):
        return None
    return law.exponent if law is not None and math.isfinite(law.exponent) else None


def approach3_moves(n, d, loss, budget, fit: Approach3Fit | None, options: approach3.Approach3Options) -> list[Move]:
    """Approach 3's a with each budget's runs left out, the edges dropped, and the other Huber delta."""
    if fit is None or not fit.converged:
        return []
    budgets = np.unique(budget)
    rows = [budget != c for c in budgets] if len(budgets) >= 3 else []
    rows.append(edge_mask(n, budget))
    names = [(LEFT_OUT, budget_text(c)) for c in budgets] if len(budgets) >= 3 else []
    names.append((EDGES, "each budget's smallest and largest size"))
    delta = LEAST_SQUARES_DELTA if options.huber_delta < 1 else approach3.HUBER_DELTA
    try:
        with np.errstate(all="ignore"):
            thetas = approach3.refit_weighted(n, d, loss, fit, np.array(rows, float), options)
            other = approach3.refit_weighted(
                n, d, loss, fit, np.ones((1, len(n))), dataclasses.replace(options, huber_delta=delta)
            )
    except (ArithmeticError, ValueError, np.linalg.LinAlgError):
        return []
    moves = [Move(choice, detail, "approach3", _a3(row)) for (choice, detail), row in zip(names, thetas)]
    label = "least squares" if delta >= 1 else "Huber"
    a_other, note = _a3(other[0]), ""
    if delta >= 1 and a_other is not None:
        note = _driven_by_few(n, d, loss, fit, dataclasses.replace(options, huber_delta=delta), a_other)
    detail = f"delta {delta:g} ({label}{'; ' + note if note else ''})"
    moves.append(Move(HUBER, detail, "approach3", a_other, stretches=not note))
    return moves


def _driven_by_few(n, d, loss, fit: Approach3Fit, ls_options: approach3.Approach3Options, a_ls: float) -> str:
    """Why least squares does not stretch the verdict, or "" when it does: its move is driven by a
    few runs Huber's loss down-weights (log-loss residuals beyond FEW_K robust scales, at most
    FEW_SHARE of the runs) when, refitted without them, least squares comes back at least half way
    to the Huber fit's a. Such a move measures those runs, not the method."""
    theta = np.asarray(fit.theta, float)
    resid = np.log(np.asarray(loss, float)) - approach3.predict_log_loss(
        theta, np.log(np.asarray(n, float)), np.log(np.asarray(d, float))
    )
    centre = float(np.median(resid))
    scale = 1.4826 * float(np.median(np.abs(resid - centre)))
    few = np.abs(resid - centre) > FEW_K * max(scale, 1e-12)
    a_huber = _a3(theta_row(fit))
    if not 0 < few.sum() <= FEW_SHARE * len(resid) or a_huber is None:
        return ""
    try:
        with np.errstate(all="ignore"):
            row = approach3.refit_weighted(n, d, loss, fit, (~few).astype(float)[None], ls_options)[0]
    except (ArithmeticError, ValueError, np.linalg.LinAlgError):
        return ""
    a_without = _a3(row)
    if a_without is None or abs(a_without - a_huber) > 0.5 * abs(a_ls - a_huber):
        return ""
    return (
        f"driven by {int(few.sum())} run(s) Huber's loss down-weights: without them least squares gives "
        f"{a_without:.3f}, so it does not stretch the verdict"
    )


def theta_row(fit: Approach3Fit) -> tuple[float, float, float, float, float]:
    """The fit's (E, A, B, alpha, beta), as `refit_weighted` returns its rows."""
    s = fit.surface
    return (s.E, s.A, s.B, s.alpha, s.beta)


def _a3(row) -> float | None:
    """a = beta / (alpha + beta) of one (E, A, B, alpha, beta) row; None off the bounds."""
    alpha, beta = float(row[3]), float(row[4])
    if not (alpha > approach3.AT_BOUND and beta > approach3.AT_BOUND):
        return None
    return beta / (alpha + beta)


def stretched(interval: tuple[float, float], moves: list[Move]) -> tuple[tuple[float, float], list[Move]]:
    """The interval stretched to hold every stretching move's a, and the moves that stretched it."""
    lo, hi = interval
    moved = [m for m in moves if m.stretches and m.a is not None and not lo <= m.a <= hi]
    for m in moved:
        lo, hi = min(lo, m.a), max(hi, m.a)
    return (lo, hi), moved


def placed(moves: list[Move], interval: tuple[float, float] | None) -> list[Move]:
    """Each move with how far its a lies outside `interval` (0 inside)."""
    if interval is None:
        return moves
    lo, hi = interval
    return [dataclasses.replace(m, outside=None if m.a is None else max(lo - m.a, m.a - hi, 0.0)) for m in moves]


def outside_line(moves: list[Move]) -> str | None:
    """One line naming the moves the verdict's interval does not hold; None when it holds them all."""
    out = [m for m in moves if m.outside]
    if not out:
        return None
    names = "; ".join(
        f"{'Approach 2' if m.approach == 'approach2' else 'Approach 3'} {m.choice} ({m.detail}): {m.a:.3f}"
        for m in sorted(out, key=lambda m: -m.outside)[:4]
    )
    more = f" and {len(out) - 4} more" if len(out) > 4 else ""
    return f"the interval does not hold {len(out)} of {len(moves)} sensitivity moves: {names}{more}"
