"""Whether a parabola misfits an IsoFLOP curve: the runs' model-free noise (`reference_noise`), the
lack-of-fit test against it, and the runs test of the residuals' signs.

A wide grid's curve is not a parabola in log N; these tests tell misfit from noise, so that
Approach 2 can fit each minimum on a window of sizes where no misfit is detected."""

from __future__ import annotations

import functools
import math

import numpy as np

# The fewest sizes a windowed minimum rests on: a parabola's 3 coefficients and 2 to check them.
WINDOW_MIN_SIZES = 5


# Lack of fit is detected when the parabola's extra residual over a quartic has p below this.
LACK_OF_FIT_LEVEL = 0.01


def size_means(x: np.ndarray, y: np.ndarray):
    """Distinct sizes (ascending log10 N), their mean loss, run counts, and each run's size index."""
    ux, inv, counts = np.unique(np.round(x, 12), return_inverse=True, return_counts=True)
    return ux, np.bincount(inv, weights=y) / counts, counts, inv


def difference_noise(x: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    """(sum of squares, count) of one budget's model-free noise terms.

    Replicates of a size give pure error; each 4 neighbouring sizes give a third divided
    difference of their mean losses, scaled to the noise's variance. It vanishes on any
    parabola and is tiny on any smooth curve sampled this densely, so misfit of a
    parabola over the whole grid does not enter it.
    """
    ux, means, counts, inv = size_means(x, y)
    ss = float(((y - means[inv]) ** 2).sum())
    n = len(y) - len(ux)
    for i in range(len(ux) - 3):
        xs = ux[i : i + 4]
        w = np.array([1.0 / np.prod([xs[j] - xs[k] for k in range(4) if k != j]) for j in range(4)])
        e = float(w @ means[i : i + 4]) / math.sqrt(float((w * w / counts[i : i + 4]).sum()))
        ss += e * e
        n += 1
    return ss, n


def reference_noise(params, loss, budget) -> tuple[float | None, int]:
    """(sigma, degrees of freedom) the lack-of-fit test compares with: the median over budgets
    of `difference_noise` (robust to one noisy budget); None where no budget has 4 sizes.

    The degrees of freedom are half the terms': neighbouring differences share runs.
    """
    x_all, y_all = np.log10(np.asarray(params, float)), np.asarray(loss, float)
    per = []
    for c in np.unique(budget):
        sel = budget == c
        ss, n = difference_noise(x_all[sel], y_all[sel])
        if n > 0:
            per.append((math.sqrt(ss / n), n))
    if not per:
        return None, 0
    scale = max(float(np.median(np.abs(y_all))), 1e-300)
    # each budget's std over its median for Gaussian noise, so that the median is unbiased
    sigma = float(np.median([s / chi_median_factor(n) for s, n in per]))
    return max(sigma, 1e-9 * scale), max(1, sum(n for _, n in per) // 2)


@functools.lru_cache(maxsize=256)
def chi_median_factor(dof: int) -> float:
    """median(s) / sigma for a residual std s with `dof` degrees of freedom (Gaussian noise)."""
    from scipy import stats  # noqa: PLC0415 lazy: scipy

    return math.sqrt(stats.chi2.median(dof) / dof)


def lack_of_fit_p(x: np.ndarray, y: np.ndarray, sigma: float | None, dof: int) -> float | None:
    """p of the parabola's misfit: its residual sum of squares beyond a quartic's, over 2 sigma^2,
    against F(2, dof). None with under WINDOW_MIN_SIZES sizes or no reference noise."""
    from scipy import special  # noqa: PLC0415 lazy: scipy

    if sigma is None or dof < 1 or len(np.unique(np.round(x, 12))) < WINDOW_MIN_SIZES:
        return None
    xc = x - x.mean()
    rss = []
    for deg in (2, 4):
        if deg == 4 and len(np.unique(np.round(x, 12))) == WINDOW_MIN_SIZES:
            rss.append(0.0)  # a quartic through 5 sizes fits them exactly
            break
        design = np.vander(xc, deg + 1)
        coef = np.linalg.lstsq(design, y, rcond=None)[0]
        rss.append(float(((y - design @ coef) ** 2).sum()))
    f = max(rss[0] - rss[1], 0.0) / 2.0 / (sigma * sigma)
    return float(special.fdtrc(2, dof, f))


def runs_test(x: np.ndarray, resid: np.ndarray) -> tuple[str, float | None]:
    """The residuals' signs ordered by N, and the p of so few runs of one sign (Wald-Wolfowitz,
    normal approximation): long runs mean the curve bends away from the parabola."""
    from scipy import special  # noqa: PLC0415 lazy: scipy

    signs = "".join("+" if r > 0 else "-" for r in resid[np.argsort(x, kind="stable")])
    n_pos, n_neg = signs.count("+"), signs.count("-")
    n = n_pos + n_neg
    if n_pos == 0 or n_neg == 0 or n < 3:
        return signs, None
    runs = 1 + sum(a != b for a, b in zip(signs, signs[1:]))
    mu = 2.0 * n_pos * n_neg / n + 1
    var = (mu - 1) * (mu - 2) / (n - 1)
    if var <= 0:
        return signs, None
    return signs, float(special.ndtr((runs - mu) / math.sqrt(var)))
