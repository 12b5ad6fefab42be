"""The minimum of an IsoFLOP curve that leans: a cubic in log N where a parabola's vertex is biased.

An IsoFLOP curve of L = E + A/N^alpha + B/D^beta is not symmetric in log N (the under-trained
side rises faster than the under-sized side): expanded about its minimum it has a cubic
term, and a parabola fitted over a window of sizes projects that odd term onto its linear
one, moving the vertex by an amount that grows with the window's width squared. A window
symmetric about the vertex does not help (u^3 correlates with u on any window); a cubic
does, its vertex (the root of its derivative where the curvature is positive) being
unbiased up to the quartic term, which is even and moves nothing on a centred window.

The cubic costs variance (one coefficient more, the vertex now depends on it), so it is
used only where the data show the lean: the cubic terms of every budget's window,
tested against the model-free noise, pooled over budgets both by their signed sum (the
surface leans the same way at every budget) and by their squares. This module is the
maths; `approach2.fit_budgets` applies it.
"""

from __future__ import annotations

import math

import numpy as np

from prism.isoflop.fit.parabola import cubic_batch, cubic_vertex

# The lean is detected when the pooled cubic terms' p (the smaller of two tests, doubled) is below this.
CUBIC_LEVEL = 0.01
# A window needs this many distinct sizes to test a cubic term (4 coefficients and 1 to check them).
MIN_CUBIC_SIZES = 5


def _design(u: np.ndarray) -> np.ndarray:
    return np.stack([np.ones_like(u), u, u * u, u**3], 1)


def cubic_t(x: np.ndarray, y: np.ndarray, sigma: float) -> float | None:
    """The cubic coefficient of one window over its standard error at noise `sigma`; None with
    under MIN_CUBIC_SIZES distinct sizes."""
    if len(np.unique(np.round(x, 12))) < MIN_CUBIC_SIZES or not sigma > 0:
        return None
    coef, _ = cubic_batch(x, y[None])
    cov = np.linalg.pinv(_design(x - x.mean()).T @ _design(x - x.mean()))
    return float(coef[0, 3] / (sigma * math.sqrt(max(cov[3, 3], 1e-300))))


def pooled_p(ts: list[float], dof: int) -> float | None:
    """p of the budgets' cubic terms together: twice the smaller of the signed sum's (Stouffer, a
    common lean) and the sum of squares' (F(k, dof), leans either way); None without terms."""
    from scipy import special  # noqa: PLC0415 lazy: scipy

    if not ts or dof < 1:
        return None
    t = np.asarray(ts, float)
    z = abs(float(t.sum())) / math.sqrt(len(t))
    p_sum = float(2 * special.ndtr(-z))
    p_sq = float(special.fdtrc(len(t), dof, float((t * t).sum()) / len(t)))
    return min(1.0, 2 * min(p_sum, p_sq))


def vertex(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float] | None:
    """(log10 N, loss, Var(log10 N)/sigma^2) at the cubic's minimum in one window; None where the
    cubic has no minimum inside the window's sizes."""
    coef, _ = cubic_batch(x, y[None])
    xm = float(x.mean())
    xv = float(cubic_vertex(coef, np.array([xm]))[0])
    if not (math.isfinite(xv) and x.min() <= xv <= x.max()):
        return None
    u = xv - xm
    lv = float(coef[0] @ np.array([1.0, u, u * u, u**3]))
    # delta method: the vertex's gradient in the coefficients, by central differences
    grad = np.zeros(4)
    for i in range(1, 4):
        h = 1e-6 * max(abs(coef[0, i]), 1e-12)
        up, dn = coef.copy(), coef.copy()
        up[0, i] += h
        dn[0, i] -= h
        grad[i] = float(cubic_vertex(up, np.array([0.0]))[0] - cubic_vertex(dn, np.array([0.0]))[0]) / (2 * h)
    design = _design(x - xm)
    var = float(grad @ np.linalg.pinv(design.T @ design) @ grad)
    return xv, lv, var


def vertex_batch(xb: np.ndarray, yb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log10 N at the minimum, usable) of each row's cubic (the bootstrap of a leaning budget)."""
    coef, distinct = cubic_batch(xb, yb)
    xv = cubic_vertex(coef, xb.mean(axis=1))
    ok = (distinct >= 4) & np.isfinite(xv) & (xv >= xb.min(axis=1)) & (xv <= xb.max(axis=1))
    return np.where(ok, xv, np.nan), ok


def cubic_lack_of_fit_p(x: np.ndarray, y: np.ndarray, sigma: float, dof: int) -> float | None:
    """p of the cubic's misfit: its residual sum of squares beyond a quartic's over sigma^2, against
    F(1, dof); None with under 6 distinct sizes (a quartic through 5 fits them exactly: 0 left)."""
    from scipy import special  # noqa: PLC0415 lazy: scipy

    if len(np.unique(np.round(x, 12))) < MIN_CUBIC_SIZES + 1 or not sigma > 0 or dof < 1:
        return None
    rss = []
    for k in (4, 5):
        design = np.vander(x - x.mean(), k)
        coef = np.linalg.lstsq(design, y, rcond=None)[0]
        rss.append(float(((y - design @ coef) ** 2).sum()))
    return float(special.fdtrc(1, dof, max(rss[0] - rss[1], 0.0) / (sigma * sigma)))
