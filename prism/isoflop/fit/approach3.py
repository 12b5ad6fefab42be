"""Approach 3: fit L(N, D) = E + A / N^alpha + B / D^beta to every run at once.

As Hoffmann et al. (2022) and Besiroglu et al. (2024): parameters in log space,
theta = (a, b, e, alpha, beta) with A = e^a, B = e^b, E = e^e, the prediction
log L = LSE(a - alpha log N, b - beta log D, e), and a Huber loss (delta 1e-3)
on the residual of log L, summed over runs. Two things make this fitter right
where published ones are not:

- It runs to convergence: tight tolerances, then a BFGS polish, with an analytic
  gradient, and `converged` only when the gradient is small and the best local
  optima agree (see below for when SciPy's defaults stop early).
- The start grid (4500 points) is evaluated vectorised and only the best starts
  are optimised, so a point fit takes about a second, not minutes.
- The exponents are bounded below by 0 (a negative exponent is a loss that grows
  with N or D, and makes N_opt(C) complex); an optimum on that bound is reported
  as not converged, with the reason, instead of crashing what comes after.

When SciPy's defaults stop early (tested in tests/isoflop/fit/test_approach3.py), on
Epoch's 240 Chinchilla points with L-BFGS-B's default tolerances from the 8 best
grid starts: with the Huber terms summed over runs, 6 of the 8 reach the optimum
(1.018e-3); with the terms averaged the gradient is n times smaller and every start
stops early, most at the default gtol 1e-5 (over all 4500 starts the best averaged
stop is 1.108e-3 at alpha 0.38, beta 0.31, a = 0.45, near Hoffmann et al.'s 0.46).
The objective here is summed, and the tolerances are tightened anyway.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from dataclasses import dataclass

import numpy as np

# scipy is imported where it is used: the CLI imports this module for FitOptions' defaults.
from prism.isoflop.records import CI_LEVEL, Approach3Fit, Surface

HUBER_DELTA = 1e-3

# Hoffmann et al.'s start grid as Epoch ran it: 6 x 6 x 5 x 5 x 5 = 4500 starts.
GRID_A = np.arange(0.0, 30.0, 5.0)
GRID_B = np.arange(0.0, 30.0, 5.0)
GRID_E = np.arange(-1.0, 1.5, 0.5)
GRID_ALPHA = np.arange(0.0, 2.5, 0.5)
GRID_BETA = np.arange(0.0, 2.5, 0.5)


@dataclass(frozen=True)
class Approach3Options:
    """How hard to look for the optimum; the defaults reach Epoch's Chinchilla optimum."""

    # How many of the best grid starts get a full local optimisation.
    n_local: int = 24
    huber_delta: float = HUBER_DELTA
    ftol: float = 1e-15
    gtol: float = 1e-12
    maxiter: int = 20_000
    # Converged: |gradient| below this, and the best local optima agree in objective.
    grad_tol: float = 1e-6
    # The best optima whose objective is within `agree_rtol` of the best must agree in
    # the exponents within `agree_atol`; otherwise the optimum is not determined.
    agree_rtol: float = 1e-6
    agree_atol: float = 1e-3

    def lbfgs(self) -> dict:
        """L-BFGS-B's options for every local fit (the optimum, the bootstrap's refits, the profile's)."""
        return {"ftol": self.ftol, "gtol": self.gtol, "maxiter": self.maxiter, "maxcor": 10}


def _one_blas_thread():
    """L-BFGS-B makes thousands of tiny BLAS calls; a multi-threaded BLAS spins on each of them
    (7x slower on 2 busy cores), so the optimisation runs with one BLAS thread."""
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 lazy: threadpoolctl
    except ImportError:  # threadpoolctl comes with scikit-learn; without it, just slower
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def start_grid() -> np.ndarray:
    """All starts as rows (a, b, e, alpha, beta)."""
    return np.array(list(itertools.product(GRID_A, GRID_B, GRID_E, GRID_ALPHA, GRID_BETA)))


def predict_log_loss(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray) -> np.ndarray:
    """log L for parameters theta (..., 5) at the points (log N, log D); broadcasts over leading axes."""
    from scipy.special import logsumexp  # noqa: PLC0415 lazy: scipy

    theta = np.asarray(theta, dtype=float)
    a, b, e, alpha, beta = (theta[..., i, None] for i in range(5))
    terms = np.stack(
        [a - alpha * log_n, b - beta * log_d, np.broadcast_to(e, np.broadcast_shapes(a.shape, log_n.shape))]
    )
    return logsumexp(terms, axis=0)


def huber(r: np.ndarray, delta: float) -> np.ndarray:
    """Huber loss, as scipy.special.huber(delta, r): r^2/2 inside delta, linear outside."""
    ar = np.abs(r)
    return np.where(ar <= delta, 0.5 * r * r, delta * (ar - 0.5 * delta))


def objective_and_grad(
    theta: np.ndarray,
    log_n: np.ndarray,
    log_d: np.ndarray,
    log_l: np.ndarray,
    weights: np.ndarray | None,
    delta: float,
) -> tuple[float, np.ndarray]:
    """Sum of weighted Huber losses on log-L residuals and its exact gradient."""
    a, b, e, alpha, beta = theta
    u1 = a - alpha * log_n
    u2 = b - beta * log_d
    m = np.maximum(np.maximum(u1, u2), e)
    w1, w2, w3 = np.exp(u1 - m), np.exp(u2 - m), np.exp(e - m)
    s = w1 + w2 + w3
    pred = m + np.log(s)
    r = pred - log_l
    h = huber(r, delta)
    dh = np.clip(r, -delta, delta)
    if weights is not None:
        h = h * weights
        dh = dh * weights
    p1, p2, p3 = w1 / s, w2 / s, w3 / s
    g = np.array(
        [
            np.dot(dh, p1),
            np.dot(dh, p2),
            np.dot(dh, p3),
            -np.dot(dh, p1 * log_n),
            -np.dot(dh, p2 * log_d),
        ]
    )
    return float(h.sum()), g


def _grid_objective(starts: np.ndarray, log_n, log_d, log_l, delta: float) -> np.ndarray:
    """The objective at every start at once (chunked to keep memory small)."""
    out = np.empty(len(starts))
    for lo in range(0, len(starts), 512):
        chunk = starts[lo : lo + 512]
        r = predict_log_loss(chunk, log_n, log_d) - log_l
        out[lo : lo + 512] = huber(r, delta).sum(axis=1)
    return out


# a, b, e free; alpha, beta >= 0.
BOUNDS = [(None, None), (None, None), (None, None), (0.0, None), (0.0, None)]
# An exponent below this is "on its bound": the runs do not determine it.
AT_BOUND = 1e-6


def _local(theta0, args, opts: Approach3Options) -> tuple[np.ndarray, float]:
    """L-BFGS-B (exponents >= 0) to tight tolerances, then a BFGS polish kept only inside the bounds."""
    from scipy import optimize  # noqa: PLC0415 lazy: scipy

    res = optimize.minimize(
        objective_and_grad,
        theta0,
        args=args,
        jac=True,
        method="L-BFGS-B",
        bounds=BOUNDS,
        options=opts.lbfgs(),
    )
    x, f = res.x, float(res.fun)
    if min(x[3], x[4]) > AT_BOUND:
        with np.errstate(over="ignore", invalid="ignore"):
            polish = optimize.minimize(
                objective_and_grad, x, args=args, jac=True, method="BFGS", options={"gtol": 1e-14, "maxiter": 2000}
            )
        if np.isfinite(polish.fun) and polish.fun <= f and min(polish.x[3], polish.x[4]) >= 0:
            x, f = polish.x, float(polish.fun)
    return x, f


def theta_to_surface(theta) -> Surface:
    a, b, e, alpha, beta = (float(v) for v in theta)
    return Surface(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=alpha, beta=beta)


def surface_to_theta(surface: Surface) -> np.ndarray:
    return np.array([math.log(surface.A), math.log(surface.B), math.log(surface.E), surface.alpha, surface.beta])


def fit_approach3(
    params: np.ndarray,
    tokens: np.ndarray,
    loss: np.ndarray,
    options: Approach3Options = Approach3Options(),
) -> Approach3Fit:
    """The point fit: vectorised grid, the best starts optimised to convergence, a convergence verdict."""
    log_n, log_d, log_l = (np.log(np.asarray(v, dtype=float)) for v in (params, tokens, loss))
    if len(log_n) < 5:
        raise ValueError(f"Approach 3 needs at least 5 runs for 5 parameters, got {len(log_n)}")
    args = (log_n, log_d, log_l, None, options.huber_delta)
    starts = start_grid()
    values = _grid_objective(starts, log_n, log_d, log_l, options.huber_delta)
    order = np.argsort(values)[: options.n_local]
    with _one_blas_thread():
        found = [_local(starts[i], args, options) for i in order]
    found.sort(key=lambda xf: xf[1])
    best_x, best_f = found[0]
    _, grad = objective_and_grad(best_x, *args)
    grad_norm = float(np.linalg.norm(grad))
    converged, note = _convergence(found, grad_norm, options)
    return Approach3Fit(
        surface=theta_to_surface(best_x),
        objective=best_f,
        grad_norm=grad_norm,
        converged=converged,
        convergence_note=note,
        n_points=len(log_n),
        n_starts=len(starts),
        n_local=len(found),
        theta=tuple(float(v) for v in best_x),
    )


def _convergence(found, grad_norm: float, opts: Approach3Options) -> tuple[bool, str]:
    """Converged = small gradient and every near-best local optimum at the same exponents."""
    best_x, best_f = found[0]
    if not np.isfinite(best_f) or not np.all(np.isfinite(best_x)):
        return False, "the optimum is not finite: the runs do not constrain L(N, D)"
    at_bound = [name for name, v in (("alpha", best_x[3]), ("beta", best_x[4])) if v <= AT_BOUND]
    if at_bound:
        return False, (
            f"{' and '.join(at_bound)} at the lower bound 0: the loss does not fall with "
            f"{' and '.join('N' if n == 'alpha' else 'D' for n in at_bound)} on these runs, so the exponent "
            "is not determined (a negative one would make N_opt(C) meaningless)"
        )
    near = [x for x, f in found if f <= best_f * (1 + opts.agree_rtol) + 1e-15]
    spread = max(float(np.max(np.abs(x[3:] - best_x[3:]))) for x in near)
    if grad_norm > opts.grad_tol:
        return False, f"gradient norm {grad_norm:.2e} > {opts.grad_tol:.0e} at the best optimum"
    if spread > opts.agree_atol:
        return False, (
            f"{len(near)} starts reach the best objective {best_f:.6e} with exponents "
            f"differing by {spread:.3g}: the optimum is not unique (flat direction)"
        )
    return True, (
        f"gradient norm {grad_norm:.1e}; {len(near)} of {len(found)} local optimisations "
        f"reach objective {best_f:.6e} with the same exponents"
    )


def bootstrap_approach3(
    params: np.ndarray,
    tokens: np.ndarray,
    loss: np.ndarray,
    point: Approach3Fit,
    n_boot: int,
    seed: int,
    options: Approach3Options = Approach3Options(),
) -> np.ndarray:
    """Bootstrap over runs: (n_boot, 5) rows of (E, A, B, alpha, beta).

    Each replicate is a vector of counts (multinomial draw, all replicates at once)
    used as weights on the original points, warm-started from the point optimum:
    the resampled optimum lies near it, so one tight local optimisation suffices.
    """
    n = len(params)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
    return refit_weighted(params, tokens, loss, point, counts, options)


def refit_weighted(
    params: np.ndarray,
    tokens: np.ndarray,
    loss: np.ndarray,
    point: Approach3Fit,
    weights: np.ndarray,
    options: Approach3Options = Approach3Options(),
) -> np.ndarray:
    """One local optimisation per row of `weights` (k, runs), warm-started from `point`: (k, 5) rows
    of (E, A, B, alpha, beta). A weight 0 leaves a run out (the bootstrap's counts, a budget left out)."""
    log_n, log_d, log_l = (np.log(np.asarray(v, dtype=float)) for v in (params, tokens, loss))
    weights = np.atleast_2d(np.asarray(weights, dtype=float))
    out = np.empty((len(weights), 5))
    with _one_blas_thread():
        _bootstrap_loop(log_n, log_d, log_l, weights, np.asarray(point.theta), out, options)
    return out


def _bootstrap_loop(log_n, log_d, log_l, counts, theta0, out, options) -> None:
    from scipy import optimize  # noqa: PLC0415 lazy: scipy

    for i in range(len(counts)):
        res = optimize.minimize(
            objective_and_grad,
            theta0,
            args=(log_n, log_d, log_l, counts[i], options.huber_delta),
            jac=True,
            method="L-BFGS-B",
            bounds=BOUNDS,
            options=options.lbfgs(),
        )
        a, b, e, alpha, beta = res.x
        out[i] = (math.exp(e), math.exp(a), math.exp(b), alpha, beta)


def interval(values: np.ndarray, level: float = CI_LEVEL) -> tuple[float, float] | None:
    """Central percentile interval of the finite values; None when there are none."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return None
    lo, hi = np.quantile(v, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


# The profile is walked out from the estimate in these steps of a, as far as these bounds of a.
PROFILE_STEP = 0.01
PROFILE_RANGE = (0.01, 0.99)


@dataclass(frozen=True)
class ProfileInterval:
    """Approach 3's interval of a from its profile (`profile_a`).

    `lo`/`hi` are where the profile statistic crosses `threshold`; an end the profile never reaches
    within `PROFILE_RANGE` is that bound and `open_ends` names it ("below", "above"): the runs do not
    bound a on that side. `sigma` is the residual scale of log L the statistic is measured in, on
    `dof` = runs - 5 degrees of freedom.
    """

    lo: float
    hi: float
    sigma: float
    dof: int
    threshold: float
    open_ends: tuple[str, ...] = ()

    @property
    def interval(self) -> tuple[float, float]:
        return self.lo, self.hi

    def describe(self) -> str:
        ends = f"; not bounded {' or '.join(self.open_ends)} within [{PROFILE_RANGE[0]}, {PROFILE_RANGE[1]}]"
        return (
            f"profile likelihood of a (every other parameter refitted at each a; F(1, {self.dof}) "
            f"at the residual scale {self.sigma:.4f} of log L)" + (ends if self.open_ends else "")
        )


def huber_efficiency_ratio(c: float) -> float:
    """E[psi^2] / E[psi'] of Huber's psi clipped at c, for standard normal errors: the factor that
    turns a drop in the Huber objective (in units of the scale squared) into a chi-square statistic
    (Schrader and Hettmansperger 1980); c -> 0 (least absolute deviations) gives c sqrt(pi / 2),
    c -> infinity (least squares) 1."""
    from scipy import stats  # noqa: PLC0415 lazy: scipy

    inside = 2 * stats.norm.cdf(c) - 1
    if inside <= 0:
        return 0.0
    e_psi2 = inside - 2 * c * stats.norm.pdf(c) + 2 * c * c * stats.norm.sf(c)
    return float(e_psi2 / inside)


def _at_a(a: float, phi0: np.ndarray, args, options: Approach3Options) -> tuple[float, np.ndarray]:
    """The objective minimised over (log A, log B, log E, alpha) with beta = alpha a / (1 - a)."""
    from scipy import optimize  # noqa: PLC0415 lazy: scipy

    r = a / (1 - a)

    def f(phi):
        value, g = objective_and_grad(np.array([phi[0], phi[1], phi[2], phi[3], r * phi[3]]), *args)
        return value, np.array([g[0], g[1], g[2], g[3] + r * g[4]])

    res = optimize.minimize(
        f,
        phi0,
        jac=True,
        method="L-BFGS-B",
        bounds=BOUNDS[:4],
        options=options.lbfgs(),
    )
    return float(res.fun), res.x


def profile_a(
    params: np.ndarray,
    tokens: np.ndarray,
    loss: np.ndarray,
    point: Approach3Fit,
    level: float = CI_LEVEL,
    options: Approach3Options = Approach3Options(),
) -> ProfileInterval | None:
    """The interval of a = beta / (alpha + beta) by profile likelihood: the a whose best fit (every other
    parameter refitted) raises the Huber objective by less than the test of one constraint allows.

    The statistic is the robust drop-in-dispersion test of an M-estimator (Schrader and Hettmansperger
    1980): 2 (Q(a) - Q) / (sigma^2 k), Q the Huber objective on log L, k = E[psi^2] / E[psi'] at the
    Huber threshold in units of sigma (for normal errors), sigma^2 the residuals' mean square on
    runs - 5 degrees of freedom; against F(1, runs - 5), as a nonlinear least-squares profile is. None
    when fewer than 6 runs leave no scale to measure. The profile is walked out from the estimate, each
    step warm-started from the last, and each end found by root-finding between the last two steps.
    """
    from scipy import stats  # noqa: PLC0415 lazy: scipy

    log_n, log_d, log_l = (np.log(np.asarray(v, dtype=float)) for v in (params, tokens, loss))
    dof = len(log_n) - 5
    theta = np.asarray(point.theta, dtype=float)
    resid = predict_log_loss(theta, log_n, log_d) - log_l
    if dof < 1 or theta[3] + theta[4] <= 0:
        return None
    sigma = math.sqrt(float(np.sum(resid**2)) / dof)
    if not sigma > 0:
        return None
    threshold = float(stats.f.ppf(level, 1, dof))
    rise = threshold * sigma**2 * huber_efficiency_ratio(options.huber_delta / sigma) / 2
    args = (log_n, log_d, log_l, None, options.huber_delta)
    a_hat = float(theta[4] / (theta[3] + theta[4]))
    ends, open_ends = [], []
    with _one_blas_thread():
        for sign, bound, side in ((-1, PROFILE_RANGE[0], "below"), (1, PROFILE_RANGE[1], "above")):
            end = _walk(a_hat, sign, bound, theta[:4].copy(), args, point.objective + rise, options)
            if end is None:
                end = bound
                open_ends.append(side)
            ends.append(end)
    return ProfileInterval(ends[0], ends[1], sigma, dof, threshold, tuple(open_ends))


def _walk(a_hat, sign, bound, phi, args, level_q, options) -> float | None:
    """Where the profile first reaches `level_q` going from `a_hat` towards `bound`; None if it never does."""
    from scipy import optimize  # noqa: PLC0415 lazy: scipy

    prev = a_hat
    if sign * (bound - a_hat) <= 0:
        return None
    k = 1
    while True:
        a = a_hat + sign * PROFILE_STEP * k
        if sign * (a - bound) > 0:
            a = bound
        q, next_phi = _at_a(a, phi, args, options)
        if q >= level_q:
            try:
                return float(optimize.brentq(_gap, *sorted((prev, a)), args=(phi, args, level_q, options), xtol=1e-4))
            except ValueError:  # no sign change: the refit at the previous step found a lower optimum
                return float(prev)
        if a == bound:
            return None
        prev, phi, k = a, next_phi, k + 1


def _gap(a: float, phi, args, level_q: float, options: Approach3Options) -> float:
    return _at_a(a, phi, args, options)[0] - level_q
