"""Batched least squares for Approach 2: parabolas of loss in log10 N and power laws in C, for any
number of replicate rows at once (the point fit, every bootstrap replicate, every simulated study
of the planning forecast), as a few numpy calls."""

from __future__ import annotations

import numpy as np

MIN_POINTS = 3


# Reason codes of the batched acceptance test (index into REASON_TEXT).
OK, TOO_FEW, NOT_CONVEX, OUTSIDE = 0, 1, 2, 3


def parabola(coef, x):
    """The parabola `coef` (c0, c1, c2) at x = log10 N: a float or an array, as x is."""
    return coef[0] + coef[1] * x + coef[2] * x * x


def parabola_batch(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares parabolas y = c0 + c1 x + c2 x^2 for a batch of point sets.

    x and y are (R, n) (x may be (n,), shared). Returns (coef (R, 3), distinct (R,)),
    where `distinct` counts the distinct x of each row; rows with fewer than 3
    distinct x get NaN coefficients instead of a singular solve.
    """
    y = np.atleast_2d(np.asarray(y, dtype=float))
    x = np.broadcast_to(np.asarray(x, dtype=float), y.shape)
    xs = np.sort(x, axis=1)
    distinct = 1 + (np.diff(xs, axis=1) > 1e-12).sum(axis=1)
    ok = distinct >= MIN_POINTS
    # Powers of x: sums for the 3x3 normal equations, all rows at once.
    p = np.stack([np.ones_like(x), x, x * x, x**3, x**4], axis=-1).sum(axis=1)  # (R, 5)
    m = np.stack(
        [p[:, [0, 1, 2]], p[:, [1, 2, 3]], p[:, [2, 3, 4]]],
        axis=1,
    )  # (R, 3, 3)
    rhs = np.stack([y.sum(axis=1), (x * y).sum(axis=1), (x * x * y).sum(axis=1)], axis=-1)
    m[~ok] = np.eye(3)
    coef = np.linalg.solve(m, rhs[..., None])[..., 0]
    coef[~ok] = np.nan
    return coef, distinct


def vertex_and_verdict(
    coef: np.ndarray, distinct: np.ndarray, x_lo: np.ndarray, x_hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertex x*, loss at the vertex, and a reason code (OK, TOO_FEW, NOT_CONVEX, OUTSIDE) per row."""
    c0, c1, c2 = coef[:, 0], coef[:, 1], coef[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        xv = -c1 / (2 * c2)
        lv = c0 - c1 * c1 / (4 * c2)
    code = np.full(len(coef), OK)
    code[~(c2 > 0)] = NOT_CONVEX
    code[(c2 > 0) & ((xv < x_lo) | (xv > x_hi))] = OUTSIDE
    code[distinct < MIN_POINTS] = TOO_FEW
    return xv, lv, code


def power_law_batch(log_c: np.ndarray, log_y: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OLS of log10 y = log10 k + e log10 C over the masked budgets of each row: (log10 k, e).

    Rows with fewer than 2 usable budgets (or one distinct C) give NaN.
    """
    w = mask.astype(float)
    y = np.where(mask, log_y, 0.0)
    x = np.broadcast_to(log_c, y.shape)
    sw, sx, sy = w.sum(1), (w * x).sum(1), (w * y).sum(1)
    sxx, sxy = (w * x * x).sum(1), (w * x * y).sum(1)
    den = sw * sxx - sx * sx
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(den > 1e-12, (sw * sxy - sx * sy) / den, np.nan)
        icpt = np.where(den > 1e-12, (sy - slope * sx) / sw, np.nan)
    return icpt, slope


def cubic_batch(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares cubics y = d0 + d1 u + d2 u^2 + d3 u^3 in u = x - mean(x) per row: (coef (R, 4),
    distinct (R,)); NaN rows with fewer than 4 distinct x. Centring keeps the normal equations
    conditioned over the few tenths of a decade a window spans."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    x = np.broadcast_to(np.asarray(x, dtype=float), y.shape)
    u = x - x.mean(axis=1, keepdims=True)
    distinct = 1 + (np.diff(np.sort(x, axis=1), axis=1) > 1e-12).sum(axis=1)
    ok = distinct >= 4
    design = np.stack([np.ones_like(u), u, u * u, u**3], axis=-1)  # (R, n, 4)
    m = np.einsum("rni,rnj->rij", design, design)
    rhs = np.einsum("rni,rn->ri", design, y)
    m[~ok] = np.eye(4)
    coef = np.linalg.solve(m, rhs[..., None])[..., 0]
    coef[~ok] = np.nan
    return coef, distinct


def cubic_vertex(coef: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """x of each cubic's local minimum (NaN where it has none): the root of d1 + 2 d2 u + 3 d3 u^2
    where the curvature 2 d2 + 6 d3 u is positive, in the form that stays exact as d3 -> 0."""
    d1, d2, d3 = coef[:, 1], coef[:, 2], coef[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(4 * d2 * d2 - 12 * d1 * d3)
        u = -2 * d1 / (2 * d2 + root)
    return np.where(np.isfinite(u) & (root > 0), np.asarray(centre, float) + u, np.nan)
