"""Can this study determine the exponent? Noise, outliers, spread, signal and the verdict.

The noise is the scatter of a run's loss around its budget's parabola. It is
estimated per budget (the residual std, with its n - 3 degrees of freedom) and
combined robustly: the median over budgets of each budget's estimate scaled by its
chi-square median (so that a budget of 4 runs is not read as quieter than it is).
One bad budget therefore cannot set every budget's noise. The runs' own standard
error (`loss_se`) is not a floor under that: every run of a study is evaluated on the
same held-out samples, so most of that sampling error is common to the runs of a
budget (a hard sample is hard for every size) and cancels in the comparisons that
place its minimum; the residuals already hold the part that does not cancel, which is
why a run's loss_se can be several times the residual std of a quiet budget.
Only without residuals (fewer than MIN_NOISE_DOF degrees of freedom in all) is the
median `loss_se` the noise; without either, REL_NOISE of the median loss is assumed:
relative to the data's loss scale.

A run whose residual from its budget's parabola fitted without it exceeds
OUTLIER_K times that robust noise is an outlier: excluded, with the numbers, rather
than allowed to move its budget's minimum (a budget needs 5 runs for the test: one
left out, 4 remain to fit and check a parabola).

The verdict's rules (thresholds are module constants, quoted in every reason string):
- A budget informs the exponent when its parabola was accepted, its runs span at
  least MIN_SPREAD_DECADES of N, and the loss difference its sizes make is at least
  MIN_SNR times the noise.
- Approach 2 needs MIN_BUDGETS informative budgets: through 2 minima the line passes
  exactly, and nothing measures how far it could move.
- The interval of `a` the verdict uses (Approach 2's, Approach 3's, or with both, when each
  holds the other's estimate, the first in the fit's order that determines a alone, else the
  narrower; when they do not, the span of the two) must be narrower than MAX_CI_WIDTH.
- Approach 3 must have converged when it was fitted, with enough runs beyond its 5
  parameters to measure its uncertainty.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from prism.core.ids import format_budget, split_budget
from prism.isoflop.fit import goodness, sensitivity
from prism.isoflop.fit.approach2 import budget_text as _bt
from prism.isoflop.fit.method import BOTH
from prism.isoflop.fit.misfit import LACK_OF_FIT_LEVEL, chi_median_factor
from prism.isoflop.fit.parabola import parabola, parabola_batch
from prism.isoflop.fit.result import BudgetDiagnostics, Move, SizeOffset, Verdict
from prism.isoflop.records import BudgetFit

REL_NOISE = 0.01
MIN_SPREAD_DECADES = 0.1
MIN_SNR = 3.0
MAX_CI_WIDTH = 0.15
MIN_NOISE_DOF = 3
MIN_BUDGETS = 3
OUTLIER_K = 5.0
# An outlier test leaves one run out and fits a parabola to the rest: at least 4 must remain.
MIN_RUNS_FOR_OUTLIERS = 5
# A size seen at this many accepted budgets whose mean residual is OFFSET_K standard errors
# from zero sits off the curves at every budget (`size_offsets`).
MIN_OFFSET_BUDGETS = 3
OFFSET_K = 3.0


def budget_noise(f: BudgetFit) -> tuple[float | None, int]:
    """(residual std, degrees of freedom) of the parabola through every run of one budget: misfit
    included where the curve is no parabola; None without residual dof."""
    dof = f.n_points - 3
    if f.coef is None or dof < 1:
        return None, max(dof, 0)
    return math.sqrt(f.residual_ss / dof), dof


def window_noise(f: BudgetFit) -> tuple[float | None, int]:
    """(residual std, degrees of freedom) of the budget's parabola over the window of sizes it was
    fitted on (every size unless a window was chosen; a fit JSON without windows: `budget_noise`)."""
    if f.window_residual_ss is None or f.n_window is None:
        return budget_noise(f)
    dof = f.n_window - 3
    if f.coef is None or dof < 1:
        return None, max(dof, 0)
    return math.sqrt(f.window_residual_ss / dof), dof


def misfits(f: BudgetFit) -> bool:
    """Whether lack of fit is still detected where this budget's parabola was fitted."""
    return f.window_lack_of_fit_p is not None and f.window_lack_of_fit_p < LACK_OF_FIT_LEVEL


def noise_estimate(
    per_budget: list[BudgetFit],
    loss: np.ndarray | None = None,
    loss_se: np.ndarray | None = None,
    reference: tuple[float | None, int] | None = None,
    skip_misfit: bool = True,
) -> tuple[float, int, str]:
    """(sigma, residual degrees of freedom, source) as the module docstring says.

    Budgets whose parabola still misfits where it was fitted are left out (`skip_misfit`):
    their residuals measure the misfit, not the noise. Where no budget is left, the
    model-free `reference` noise (`misfit.reference_noise`) stands in.
    """
    per = [(f, *window_noise(f)) for f in per_budget]
    usable = [(f, s, dof) for f, s, dof in per if s is not None]
    left_out = [f for f, _, _ in usable if skip_misfit and misfits(f)]
    usable = [(f, s, d) for f, s, d in usable if not (skip_misfit and misfits(f))]
    dof = sum(d for _, _, d in usable)
    skipped = ""
    if left_out:
        skipped = (
            f"; {len(left_out)} budget(s) left out whose parabola misfits even the sizes nearest the "
            f"minimum ({_few([_bt(f.budget) for f in left_out])})"
        )
    se = None
    if loss_se is not None:
        v = np.asarray([x for x in loss_se if x is not None and np.isfinite(x) and x > 0], float)
        se = float(np.median(v)) if len(v) else None
    if dof >= MIN_NOISE_DOF:
        scaled = [s / chi_median_factor(d) for _, s, d in usable]
        sigma = float(np.median(scaled))
        windowed = sum(f.windowed for f, _, _ in usable)
        where = f", {windowed} of them over the window of sizes where the parabola fits" if windowed else ""
        source = (
            f"median over {len(usable)} budget(s) of each parabola's residual std{where} "
            f"({dof} residual degrees of freedom){skipped}"
        )
        if reference is not None and reference[0] is not None and reference[0] < 0.2 * sigma:
            source += (
                f"; third differences of neighbouring sizes give {reference[0]:.2g}: these residuals are "
                "the parabola's misfit, the runs have next to no noise"
            )
        if se is not None:
            source += (
                f"; the runs' median loss_se {se:.3g} is no floor: they share their held-out samples, "
                "so that error is common to a budget's runs"
            )
        return sigma, dof, source
    if reference is not None and reference[0] is not None and left_out:
        return (
            reference[0],
            reference[1],
            (
                f"third differences of neighbouring sizes' losses ({reference[1]} degrees of freedom): every "
                f"parabola misfits{skipped}"
            ),
        )
    if se is not None:
        return se, dof, f"the runs' median loss_se ({dof} residual degrees of freedom < {MIN_NOISE_DOF})"
    scale = float(np.median(loss)) if loss is not None and len(loss) else 1.0
    return (
        REL_NOISE * scale,
        dof,
        (
            f"assumed: {100 * REL_NOISE:g}% of the median loss {scale:.3g} ({dof} residual degrees of freedom "
            f"< {MIN_NOISE_DOF} and no loss_se)"
        ),
    )


def find_outliers(params, loss, budget, sigma: float, k: float = OUTLIER_K) -> list[tuple[int, str]]:
    """Indices of outlier runs with the reason.

    Per budget, for q = 1, 2, ... up to a third of its runs: the q runs whose removal
    leaves the best-fitting parabola (least trimmed squares, every subset tried, batched),
    each judged by its distance from that parabola of the others over the noise, with the
    prediction's own variance: |y_j - p(x_j)| / (s sqrt(1 + h_j)). The noise s is the larger
    of the study's robust noise and the kept runs' scatter around their parabola, so a
    noisier budget keeps its ordinary runs. The largest q whose removed runs all exceed
    k x s is taken: trying pairs as well as single runs finds two outliers that would mask
    each other (each pulls the parabola fitted without the other toward itself).
    """
    params, loss, budget = (np.asarray(v, float) for v in (params, loss, budget))
    out = []
    for c in np.unique(budget):
        idx = np.flatnonzero(budget == c)
        n = len(idx)
        if n < MIN_RUNS_FOR_OUTLIERS:
            continue
        x, y = np.log10(params[idx]), loss[idx]
        found: list[tuple[int, float, float, float]] = []
        for q in range(1, max(1, n // 3) + 1):
            removed = np.array(list(itertools.combinations(range(n), q)))
            if len(removed) > 5000:
                break
            # the kept indices of every subset, in order: one mask, not a set difference per subset
            mask = np.ones((len(removed), n), bool)
            mask[np.arange(len(removed))[:, None], removed] = False
            keep = np.nonzero(mask)[1].reshape(len(removed), n - q)
            coef, distinct = parabola_batch(x[keep], y[keep])
            fitted = coef[:, :1] + coef[:, 1:2] * x[keep] + coef[:, 2:3] * x[keep] ** 2
            rss = np.where(distinct >= 3, ((y[keep] - fitted) ** 2).sum(1), np.inf)
            if n - q - 3 < 1 or not np.isfinite(rss).any():
                break
            best = int(np.argmin(rss))
            kx, rx = x[keep[best]], removed[best]
            design = np.stack([np.ones_like(kx), kx, kx * kx], 1)
            inv = np.linalg.pinv(design.T @ design)
            scale = max(sigma, float(np.sqrt(rss[best] / (n - q - 3))))
            trial = []
            for j in rx:
                v = np.array([1.0, x[j], x[j] ** 2])
                resid = y[j] - float(v @ coef[best])
                t = abs(resid) / (scale * np.sqrt(1.0 + float(v @ inv @ v)))
                trial.append((int(j), resid, t, scale))
            if all(t > k for _, _, t, _ in trial):
                found = trial
        for j, resid, t, scale in sorted(found, key=lambda f: -f[2]):
            out.append(
                (
                    int(idx[j]),
                    (
                        f"outlier at {_bt(c)}: its loss is {resid:+.3g} from the parabola of the other runs, "
                        f"{t:.1f}x the noise {scale:.3g} (> {k:g}x)"
                    ),
                )
            )
    return out


def drop_tails(outliers: list[tuple[int, str]], params, budget, per_budget: list[BudgetFit]):
    """The outliers less those that form, with each other, a block of sizes from the grid's edge
    lying outside their budget's window: a tail the window already leaves out."""
    params, budget = np.asarray(params, float), np.asarray(budget, float)
    flagged = {i for i, _ in outliers}
    tail: set[int] = set()
    for f in per_budget:
        if not f.windowed:
            continue
        idx = np.flatnonzero(budget == f.budget)
        order = idx[np.argsort(params[idx], kind="stable")]
        for side in (order, order[::-1]):
            for i in side:
                if i not in flagged or f.in_window(params[i]):
                    break
                tail.add(int(i))
    return [(i, why) for i, why in outliers if i not in tail]


def size_offsets(params, loss, budget, per_budget: list[BudgetFit], sigma: float, run_ids=None):
    """Per model size seen at MIN_OFFSET_BUDGETS accepted budgets or more: its residuals from those
    budgets' parabolas, their mean and that mean over its standard error sigma / sqrt(budgets).

    The noise the verdict uses treats every residual as independent. A size that is off its
    curves by the same amount at every budget is not: its shape trains better or worse than
    its neighbours' (or, in a wsd study, every branch shares its trajectory's luck), and it
    moves every budget's minimum the same way, which no per-budget noise averages out.
    """
    params, loss, budget = (np.asarray(v, float) for v in (params, loss, budget))
    ids = list(run_ids) if run_ids is not None else [None] * len(params)
    resid: dict[float, dict[float, float]] = {}
    for f in per_budget:
        if not f.accepted or f.coef is None:
            continue
        for i in np.flatnonzero(budget == f.budget):
            if not f.in_window(params[i]):
                continue  # the parabola does not describe the sizes outside its window
            fitted = parabola(f.coef, math.log10(params[i]))
            resid.setdefault(float(params[i]), {})[f.budget] = float(loss[i] - fitted)
    out = []
    for n, by_budget in sorted(resid.items()):
        if len(by_budget) < MIN_OFFSET_BUDGETS:
            continue
        mean = float(np.mean(list(by_budget.values())))
        t = mean / (max(sigma, 1e-12) / math.sqrt(len(by_budget)))
        out.append(
            SizeOffset(
                params=n,
                label=_size_label(n, [r for r, p in zip(ids, params) if p == n]),
                residuals={format_budget(c): r for c, r in sorted(by_budget.items())},
                mean=mean,
                t=t,
                flagged=abs(t) >= OFFSET_K,
            )
        )
    return out


def _size_label(n: float, run_ids: list) -> str:
    """The model's name when its run ids share one before the budget (`45k-BASE-e2e`), else N."""
    stems = {parts[0] for r in run_ids if isinstance(r, str) and (parts := split_budget(r))}
    return stems.pop() if len(stems) == 1 else f"N={n:.3g}"


def budget_table(per_budget: list[BudgetFit], sigma: float):
    """Per budget: N spread, signal and its ratio to the noise, the parabola's own noise where it
    was fitted and over the full grid, and whether lack of fit was detected."""
    rows = []
    for f in per_budget:
        snr = None if f.signal is None else f.signal / max(sigma, 1e-12)
        s, dof = window_noise(f)
        full, _ = budget_noise(f)
        rows.append(
            BudgetDiagnostics(
                f.budget,
                f.n_points,
                f.n_spread_decades,
                f.signal,
                snr,
                f.accepted,
                s,
                dof,
                full_grid_noise=full,
                lack_of_fit_p=f.lack_of_fit_p,
                window_lack_of_fit_p=f.window_lack_of_fit_p,
                misfit=misfits(f),
            )
        )
    return rows


def informative(per_budget: list[BudgetFit], sigma: float) -> tuple[list[str], list[str]]:
    """(informative budgets, problems with the others) in words."""
    narrow, rejected, weak, weak_window, good = [], [], [], [], []
    for f in per_budget:
        c = _bt(f.budget)
        if f.n_spread_decades < MIN_SPREAD_DECADES:
            narrow.append(f"{f.n_spread_decades:.2f} decades at {c}")
        elif not f.accepted:
            rejected.append(f.reason)
        elif f.signal / max(sigma, 1e-12) < MIN_SNR:
            # the budget's own curve over the sizes its minimum rests on is flat against the noise
            text = f"{f.signal:.3g} ({f.signal / max(sigma, 1e-12):.1f}x) at {c}"
            if f.windowed:
                weak_window.append(f"{text} over {f.window_sizes} of its {f.n_sizes} sizes")
            else:
                weak.append(text)
        else:
            good.append(c)
    problems = []
    if narrow:
        problems.append(
            f"N spread {_few(narrow)} (< {MIN_SPREAD_DECADES} decades): exponent undetermined there; "
            "add a larger (or smaller) backbone"
        )
    if rejected:
        problems.append(f"{len(rejected)} budget(s) rejected: {_few(rejected, 4, '; ')}")
    if weak:
        problems.append(
            f"loss differences between sizes span {_few(weak)}, under {MIN_SNR:g}x the noise {sigma:.3g}: "
            "widen the N range"
        )
    if weak_window:
        problems.append(
            f"loss differences between the sizes a parabola fits span {_few(weak_window, 4, '; ')}, under "
            f"{MIN_SNR:g}x the noise {sigma:.3g} (beyond them the curve is no parabola): add sizes between "
            "them, near the minimum, rather than a wider range"
        )
    return good, problems


def verdict(
    method: str,
    per_budget: list[BudgetFit],
    sigma: float,
    fits: list | tuple = (),
    n_runs: int = 0,
    vanished: list[str] | None = None,
    moves: list[Move] | None = None,
    heard: goodness.Speakers | None = None,
):
    """The Verdict: identifiable, the reasons (failures when false, the evidence when true).

    `fits` are the fitted methods, (a `FitMethod`, its `MethodFit`) in registration order: each judges
    its own fit (`FitMethod.judge`: its failures, its evidence, the interval it offers); with one
    interval the verdict takes it, with several the narrowest when each holds the others' estimates
    (`combine`), else the span of them all, with the disagreement among the reasons (and as the
    failure when that span is too wide). `vanished` names budgets every run of which was excluded
    before the fit. `heard` (`goodness.speakers`) says which methods may decide: one that misfits
    beside one that fits is named and left out (its interval, its failures and its sensitivity
    moves neither widen nor narrow the verdict); when none fits, that is the failure.
    """
    good, problems = informative(per_budget, sigma)
    problems = list(vanished or []) + problems
    failures, evidence, intervals = [], [], []  # intervals: (interval, its source, the method, its a, its label)
    speaks = heard.may_speak if heard is not None and heard.heard else (lambda _a: True)
    labels = {fit.name: m.label for m, fit in fits}
    for m, fit in fits:
        if not speaks(fit.name):
            continue
        judged = m.judge(fit, good, n_runs)
        failures += judged.failures
        evidence += judged.evidence
        if judged.interval is not None:
            intervals.append((judged.interval, judged.source, fit.name, fit.a, m.label))
    if heard is not None:
        _heard_reasons(heard, labels, failures, problems)
    interval, source, rests_on = _deciding_interval(intervals, problems, failures)
    moves = [m for m in moves or [] if speaks(m.approach)]
    if interval is not None and moves:
        interval, moved = sensitivity.stretched(interval, moves)
        if moved:
            held = ", ".join(f"{m.detail} {m.a:.3f}" for m in moved)
            source = f"{source}; stretched to hold a under another standard choice ({held})"
            problems.append(f"the interval is stretched to hold a under another standard choice: {held}")
    if interval is not None:
        width = interval[1] - interval[0]
        if not math.isfinite(width) or width > MAX_CI_WIDTH:
            failures.append(f"interval of a is {width:.3f} wide (> {MAX_CI_WIDTH})")
        else:
            evidence.append(f"interval of a is {width:.3f} wide (<= {MAX_CI_WIDTH})")
    ok = not failures
    reasons = (evidence if ok else failures) + problems
    return Verdict(ok, reasons, interval, source, method, rests_on, list(heard.heard) if heard else None)


def _heard_reasons(heard: goodness.Speakers, labels: dict[str, str], failures: list[str], problems: list[str]) -> None:
    """The rule's part of the reasons: every method that misfits, named with its evidence."""
    if heard.none_fits:
        failures.insert(0, heard.none_fits)
        return
    others = " and ".join(labels.get(a, a) for a in heard.heard)
    for why in heard.reasons[::-1]:
        problems.insert(0, f"{why}; it neither widens nor narrows the verdict, which rests on {others}")


def _deciding_interval(intervals: list, problems: list[str], failures: list[str]):
    """(interval, its source, the method it rests on) of the verdict: one method's; with several that agree
    the one `combine` chooses, else the span of all, said among the problems, and a failure naming the
    disagreement when that span is too wide to identify a."""
    if not intervals:
        return None, None, None
    cis, sources, names, estimates, labels = (list(x) for x in zip(*intervals))
    if len(cis) == 1:
        return cis[0], sources[0], names[0]
    if len(cis) == 2:
        combined = combine(estimates[0], cis[0], estimates[1], cis[1], names, labels)
    else:
        combined = combine_many(estimates, cis, names, labels)
    if combined["agree"]:
        own = sources[names.index(combined["rests_on"])]
        other = "; ".join(s for s, n in zip(sources, names, strict=True) if n != combined["rests_on"])
        source = f"{own} ({combined['why']}; {combined['text']}; the other: {other})"
        return combined["interval"], source, combined["rests_on"]
    interval = combined["interval"]
    spans = "both" if len(cis) == 2 else "them all"
    problems.append(f"{' and '.join(labels)} disagree: {combined['text']}: the interval spans {spans}")
    width = interval[1] - interval[0]
    if not (math.isfinite(width) and width <= MAX_CI_WIDTH) and combined["difference"] is not None:
        said = ", ".join(f"{lab} {est:.3f}" for lab, est in zip(labels, estimates, strict=True))
        failures.insert(
            0,
            f"the approaches disagree by {abs(combined['difference']):.3f} ({said}), more than their intervals "
            "allow: the data do not determine a to within either interval",
        )
    return interval, "span of " + "; and ".join(sources), "envelope"


def resting_on(cis: Sequence[tuple[float, float]]) -> tuple[int, str]:
    """Which of the intervals of methods that agree the verdict rests on, and why in words: the first, in the
    fit's order, narrow enough to determine a alone (at most MAX_CI_WIDTH wide), else the narrowest.

    The fit's order puts the fewest assumptions first (Approach 2: each budget's curve near its minimum, and a
    line through the minima; Approach 3: one form of the whole surface). Agreement cannot see a bias smaller
    than the intervals' half-widths, and a form wrong by that much passes every test the runs allow (a data
    term with two curvatures moves Approach 3's a by about one half-width at a noise of 1%); the method that
    assumes less is biased on fewer surfaces. A narrower interval is taken only where its precision is needed to
    determine a at all: the verdict is then as decisive as before, and says what it rests on."""
    widths = [hi - lo for lo, hi in cis]
    for i, width in enumerate(widths):
        if math.isfinite(width) and width <= MAX_CI_WIDTH:
            return i, "the first in the fit's order that determines a alone"
    k = min(range(len(cis)), key=lambda i: widths[i])
    return k, "the narrower: none determines a alone"


def combine(
    a2: float | None,
    a2_ci: tuple[float, float],
    a3: float | None,
    a3_ci: tuple[float, float],
    names: Sequence[str] = BOTH,
    labels: Sequence[str] = ("Approach 2", "Approach 3"),
) -> dict:
    """Whether two methods (by default the approaches, `names`, in words `labels`) agree, and the
    verdict's interval: when they do, the first's where it determines a alone, else the narrower
    (`resting_on`); when they do not, the span of both.

    They agree when each one's estimate lies inside the other's interval. Both fit the same
    runs, so were both right their estimates would differ by less than either interval's
    half-width (their errors are shared; when one is efficient, the variance of the difference
    is the difference of their variances). No correction estimated from one approach's own
    surface excuses a larger difference: that would assume the very form in question. Either
    interval of two that agree holds both estimates.
    """
    span = (min(a2_ci[0], a3_ci[0]), max(a2_ci[1], a3_ci[1]))
    if a2 is None or a3 is None or not (math.isfinite(a2) and math.isfinite(a3)):
        return {
            "agree": False,
            "text": "no difference measured",
            "interval": span,
            "rests_on": None,
            "difference": None,
        }
    diff = a2 - a3
    inside2, inside3 = a2_ci[0] <= a3 <= a2_ci[1], a3_ci[0] <= a2 <= a3_ci[1]
    agree = inside2 and inside3
    if agree:
        k, why = resting_on([a2_ci, a3_ci])
        text = f"each approach's interval holds the other's estimate: {labels[0]} {a2:.3f}, {labels[1]} {a3:.3f}"
        interval = tuple((a2_ci, a3_ci)[k])
        return {"agree": True, "text": text, "interval": interval, "rests_on": names[k], "difference": diff, "why": why}
    missed = [
        f"{name} {est:.3f} is outside {other} [{ci[0]:.3f}, {ci[1]:.3f}]"
        for ok, name, est, other, ci in (
            (inside3, f"{labels[0]}'s", a2, f"{labels[1]}'s", a3_ci),
            (inside2, f"{labels[1]}'s", a3, f"{labels[0]}'s", a2_ci),
        )
        if not ok
    ]
    text = f"difference {diff:+.3f}; " + " and ".join(missed)
    return {"agree": False, "text": text, "interval": span, "rests_on": None, "difference": diff}


def combine_many(estimates: list, cis: list, names: list[str], labels: list[str]) -> dict:
    """`combine` for three methods or more: they agree when every pair does (the narrowest interval,
    which holds every estimate), else the span of all, the difference being the estimates' range."""
    span = (min(ci[0] for ci in cis), max(ci[1] for ci in cis))
    pairs = [
        combine(estimates[i], cis[i], estimates[j], cis[j], (names[i], names[j]), (labels[i], labels[j]))
        for i, j in itertools.combinations(range(len(cis)), 2)
    ]
    if any(p["difference"] is None for p in pairs):
        return {
            "agree": False,
            "text": "no difference measured",
            "interval": span,
            "rests_on": None,
            "difference": None,
        }
    said = ", ".join(f"{lab} {est:.3f}" for lab, est in zip(labels, estimates, strict=True))
    if all(p["agree"] for p in pairs):
        k, why = resting_on(cis)
        text = f"each method's interval holds the others' estimates: {said}"
        return {"agree": True, "text": text, "interval": tuple(cis[k]), "rests_on": names[k], "difference": None,
                "why": why}  # fmt: skip
    text = "; ".join(p["text"] for p in pairs if not p["agree"])
    return {
        "agree": False,
        "text": text,
        "interval": span,
        "rests_on": None,
        "difference": max(estimates) - min(estimates),
    }


def vanished_budgets(budgets_in, kept_budgets, exclusions) -> list[str]:
    """One reason per budget whose every run was excluded before the fit (a wrong budget label,
    failed runs), with what excluded them: such a budget is otherwise silently absent."""
    kept = {float(b) for b in kept_budgets}
    out = []
    for c in sorted({float(b) for b in budgets_in if b is not None} - kept):
        gone = [e for e in exclusions if e.budget is not None and float(e.budget) == c]
        out.append(f"budget {_bt(c)} vanished: all {len(gone)} of its runs were excluded ({exclusion_groups(gone)})")
    return out


def exclusion_groups(exclusions) -> str:
    """The exclusions grouped by kind, each with a count and one run's reason: for one line."""
    groups: dict[str, list] = {}
    for e in exclusions:
        groups.setdefault(e.kind, []).append(e)
    return "; ".join(f"{len(g)} by {kind}, e.g. {g[0].run_id}: {g[0].reason}" for kind, g in groups.items())


def _few(items: list[str], n: int = 6, sep: str = ", ") -> str:
    """A list for one line: the first n items and how many more."""
    head = sep.join(items[:n])
    return head + (f" and {len(items) - n} more" if len(items) > n else "")


def approach_agreement(a2: float | None, a3: float | None, a2_on_a3_surface: float | None) -> dict:
    """How far the approaches disagree, and how much of it Approach 2's method bias on Approach 3's
    surface would explain: reported beside the verdict, never deciding it (it assumes Approach 3's form).

    `a2_on_a3_surface` is Approach 2 run on the Approach 3 surface's noise-free
    losses at the very (N, D) points of the study: its difference from
    Approach 3's `a` is the bias Approach 2 has on this grid even without noise
    (large when alpha and beta differ, or the grid is wide or off-centre).
    """
    out = {
        "approach2_a": a2,
        "approach3_a": a3,
        "difference": None,
        "approach2_bias_expected": None,
        "note": "",
    }
    if a2 is None or a3 is None:
        out["note"] = "only one approach gave an exponent"
        return out
    out["difference"] = a2 - a3
    if a2_on_a3_surface is not None and np.isfinite(a2_on_a3_surface):
        bias = a2_on_a3_surface - a3
        out["approach2_bias_expected"] = bias
        explained = abs(out["difference"] - bias)
        out["note"] = (
            f"Approach 2 differs from Approach 3 by {a2 - a3:+.4f}; on Approach 3's own noise-free "
            f"surface sampled at these runs Approach 2 would be off by {bias:+.4f} (its method bias: "
            "the parabola in log N is not the true isoFLOP curve when alpha != beta or the grid is "
            f"wide/off-centre), so the rest is {explained:.4f}; that figure assumes Approach 3's form and "
            "decides nothing. When each interval holds the other's estimate the verdict rests on the first approach "
            "that determines a alone, else on the narrower; when not, on the span of both."
        )
    else:
        out["note"] = f"Approach 2 differs from Approach 3 by {a2 - a3:+.4f}"
    return out
