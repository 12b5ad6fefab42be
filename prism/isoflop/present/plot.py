"""Figures of an IsoFLOP study (the only module here that imports matplotlib; Agg backend).

- isoflop_curves.png: loss vs N per budget with each run's standard error (its
  `loss_se`, else the fit's noise estimate), the Approach 2 parabolas, their minima;
  rejected budgets drawn hollow and dashed, with the reason in the legend; runs the
  fit excluded (status, duplicate, budget, outlier) as crosses.
- scaling_laws.png: N_opt(C) and D_opt(C), each minimum with its within-budget
  interval, the fitted power laws and the band of the interval the verdict uses
  (Approach 2), and Approach 3's law when fitted.
- approach3_fit.png: Approach 3's predicted vs observed loss, with y = x.
Colours are the Okabe-Ito palette (distinguishable with every common colour-vision
deficiency); with more budgets than it has colours, the cividis map.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from prism.core.atomic import write_atomic
from prism.core.errors import PrismError
from prism.core.palette import OKABE_ITO
from prism.isoflop.fit.diagnostics import MIN_BUDGETS
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.fit.parabola import parabola
from prism.isoflop.fit.result import Exclusion, FitResult
from prism.isoflop.fitread import read_fit
from prism.isoflop.present.notfitted import approach3_answers, approach3_not_drawn, fitted_budgets
from prism.isoflop.runs.table import load_runs

LOSS_LABEL = "final eval loss (cross-entropy, nats/token)"
# Each run's marker and error bar in the IsoFLOP curves.
POINTS = {"fmt": "o", "ms": 5, "capsize": 2, "elinewidth": 0.8, "markeredgewidth": 1.2}
# The alpha of points a parabola was not fitted on (beyond its budget's window).
FADED = 0.35


def sci(value: float) -> str:
    """1e12 -> $10^{12}$, 3e17 -> $3{\\times}10^{17}$ (mathtext)."""
    exponent = int(math.floor(math.log10(value)))
    mantissa = value / 10**exponent
    if abs(mantissa - round(mantissa)) < 1e-9:
        mantissa = round(mantissa)
    m = f"{mantissa:g}"
    return f"$10^{{{exponent}}}$" if m == "1" else f"${m}{{\\times}}10^{{{exponent}}}$"


def _short_reason(reason: str) -> str:
    """The legend's few words for a rejection (the fit report has the full sentence)."""
    if "outside the sampled range" in reason:
        return "minimum outside the sampled N"
    if "curvature" in reason:
        return "no minimum (curvature <= 0)"
    if "distinct N" in reason:
        return "fewer than 3 sizes"
    return reason.split(": ", 1)[-1][:40]


def _colours(n: int) -> list:
    import matplotlib  # noqa: PLC0415 lazy: matplotlib

    categorical = [c for c in OKABE_ITO if c not in ("#F0E442", "#000000")]  # yellow is faint on white; black is y=x
    if n <= len(categorical):
        return categorical[:n]
    cmap = matplotlib.colormaps["cividis"]
    return [cmap(v) for v in np.linspace(0.0, 0.85, n)]


def _style():
    import matplotlib  # noqa: PLC0415 lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 lazy: matplotlib

    plt.rcParams.update(
        {
            "font.size": 10,
            "axes.titlesize": 11,
            "axes.labelsize": 10,
            "legend.fontsize": 8,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.25,
            "grid.linewidth": 0.6,
            "savefig.bbox": "tight",
        }
    )
    return plt


def _save(fig, path: Path, dpi: int) -> Path:
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png"))
    return path


def log_ticks(axis, lo: float, hi: float) -> None:
    """Readable log ticks on `axis` (ax.xaxis or ax.yaxis) spanning [lo, hi].

    Matplotlib labels every minor tick when a log axis spans less than a decade, so
    neighbours such as 3x10^12 and 4x10^12 overlap. Here only 1, 2 and 5 x 10^k are
    labelled (every decade instead when the span is wide), and minor ticks never are.
    """
    from matplotlib import ticker  # noqa: PLC0415 lazy: matplotlib

    span = math.log10(hi) - math.log10(lo)
    if span >= 2.5:
        axis.set_major_locator(ticker.LogLocator(base=10.0, numticks=8))
    else:
        axis.set_major_locator(
            ticker.LogLocator(base=10.0, subs=(1.0, 2.0, 5.0) if span > 0.7 else (1.0, 2.0, 3.0, 5.0, 7.0), numticks=12)
        )
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: sci(v) if v > 0 else ""))
    axis.set_minor_formatter(ticker.NullFormatter())


def _excluded_points(fit):
    """The fit's excluded runs that have values to draw: (params, loss, budget, kind)."""
    out = []
    for e in fit.exclusions:
        vals = (e.params, e.loss)
        if all(v is not None and math.isfinite(v) and v > 0 for v in vals):
            out.append((e.params, e.loss, e.budget, e.kind))
    return out


def _points(ax, pts: list[tuple[float, float, float]], colour, filled: bool, alpha: float, label: str | None) -> None:
    """(N, loss, se) points with their error bars; hollow for a budget the fit rejected."""
    if pts:
        n, loss, se = np.array(pts).T
        face = colour if filled else "none"
        ax.errorbar(n, loss, yerr=se, color=colour, markerfacecolor=face, alpha=alpha, label=label, **POINTS)


def figure_isoflop_curves(records, fit):
    """Loss vs N per budget: each point with its standard error, the parabolas, the minima,
    the fit's excluded runs as crosses; sizes beyond a budget's window faded (its parabola was
    not fitted on them, so a reader does not take their distance from it for misfit)."""
    fit = fit if isinstance(fit, FitResult) else FitResult.from_json(fit)
    plt = _style()
    a2 = fit.approach2
    per_budget = a2.per_budget if a2 is not None else []
    excluded_ids = {e.run_id for e in fit.exclusions}
    kept = [r for r in records if r.run_id not in excluded_ids]
    crosses = _excluded_points(fit)
    budgets = sorted({r.budget for r in kept} | {c for _, _, c, _ in crosses if c})
    colours = dict(zip(budgets, _colours(len(budgets))))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    info = {b.budget: b for b in per_budget}
    noise = fit.diagnostics.noise
    own_se = any(r.loss_se for r in kept)
    faded = False
    for c in budgets:
        pts = sorted((r.params, r.loss, r.loss_se if r.loss_se else noise) for r in kept if r.budget == c)
        b = info.get(c)
        accepted = (b is not None and b.accepted) or not info  # no Approach 2 in the fit: plain points
        col = colours[c]
        label = f"C = {sci(c)} FLOPs"
        if info and not accepted:
            label += f"\n  rejected: {_short_reason(b.reason if b else 'not fitted')}"
        if pts:
            inside = [b is None or b.in_window(p[0]) for p in pts]
            fitted = [p for p, i in zip(pts, inside) if i]
            beyond = [p for p, i in zip(pts, inside) if not i]
            faded = faded or bool(beyond)
            _points(ax, fitted, col, accepted, 1.0, label)
            _points(ax, beyond, col, accepted, FADED, None if fitted else label)
            if b is not None and b.coef:
                # over the sizes it was fitted on: beyond its window the curve is no parabola
                lo, hi = (b.window_n_min, b.window_n_max) if b.window_n_min else (pts[0][0], pts[-1][0])
                x = np.linspace(math.log10(lo) - 0.05, math.log10(hi) + 0.05, 100)
                ax.plot(10**x, parabola(b.coef, x), "-" if accepted else "--", color=col, lw=1.3, alpha=0.9)
        if accepted and b is not None and b.n_opt:
            ax.plot(
                b.n_opt,
                b.loss_min,
                marker="*",
                ms=12,
                color=col,
                markeredgecolor="black",
                markeredgewidth=0.6,
                zorder=5,
            )
    if faded:  # an empty errorbar, so the entry follows the budgets' (a legend lists plain lines first)
        ax.errorbar(
            [], [], yerr=[], color="0.4", alpha=FADED, label="faded: beyond its budget's window (not fitted)", **POINTS
        )
    if crosses:
        kinds = sorted({k for *_, k in crosses})
        for i, (n, loss, c, _) in enumerate(crosses):
            ax.plot(
                n,
                loss,
                "x",
                ms=8,
                mew=1.8,
                color=colours.get(c, "0.4"),
                zorder=6,
                label=f"excluded ({', '.join(kinds)}; see the report)" if i == 0 else None,
            )
    ax.set_xscale("log")
    all_n = [r.params for r in kept] + [p for p, *_ in crosses]
    if all_n:
        log_ticks(ax.xaxis, min(all_n) / 1.2, max(all_n) * 1.2)
    ax.set_xlabel("trainable parameters N")
    ax.set_ylabel(LOSS_LABEL)
    bars = "the runs' loss_se" if own_se else f"the fit's noise estimate {noise:.2g}"
    ax.set_title(f"IsoFLOP curves (Approach 2 parabolas; $\\star$ = minimum; error bars: {bars})", fontsize=9)
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def figure_scaling_laws(fit):
    """N_opt(C) and D_opt(C): the minima with their within-budget intervals, the power laws with
    the interval band the verdict's exponent interval comes from, Approach 3's law when fitted."""
    fit = fit if isinstance(fit, FitResult) else FitResult.from_json(fit)
    plt = _style()
    a2, a3 = fit.approach2, fit.approach3
    per_budget = a2.per_budget if a2 is not None else []
    rej = [b for b in per_budget if not b.accepted]
    minima = a2.minima if a2 is not None else []
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.2))
    all_c = ([b.budget for b in per_budget] or [1e12, 1e13]) + (fit.prediction.asked if fit.prediction else [])
    lo_c, hi_c = 10 ** (math.log10(min(all_c)) - 0.2), 10 ** (math.log10(max(all_c)) + 0.2)
    cs = np.logspace(math.log10(lo_c), math.log10(hi_c), 100)
    level = int(round(100 * fit.ci_level))
    for ax, key, ylabel in (
        (axes[0], "n", "compute-optimal trainable parameters $N_{opt} \\propto C^a$"),
        (axes[1], "d", "compute-optimal tokens $D_{opt} \\propto C^b$"),
    ):
        symbol = "a" if key == "n" else "b"
        if minima:
            ys = [m.n_opt if key == "n" else m.d_opt for m in minima]
            cis = [m.n_opt_ci if key == "n" else m.d_opt_ci for m in minima]
            lower = [y - ci[0] if ci else 0.0 for y, ci in zip(ys, cis)]
            upper = [ci[1] - y if ci else 0.0 for y, ci in zip(ys, cis)]
            ax.errorbar(
                [m.budget for m in minima],
                ys,
                yerr=[np.maximum(lower, 0), np.maximum(upper, 0)],
                fmt="o",
                color=OKABE_ITO[0],
                ms=6,
                capsize=3,
                label=f"per-budget minimum ({level}% within-budget interval)",
            )
        exponent = (a2.a if key == "n" else a2.b) if a2 is not None else None
        coef = (a2.k if key == "n" else a2.k_d) if a2 is not None else None
        if exponent is not None and coef is not None:
            ci = a2.a_ci if key == "n" else a2.b_ci
            ci_text = f", {level}% interval [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
            ax.plot(
                cs,
                coef * cs**exponent,
                "-",
                color=OKABE_ITO[0],
                lw=1.5,
                # The exponent as plain text: a superscript at legend size does not read.
                label=f"Approach 2: {symbol} = {exponent:.3f}{ci_text}",
            )
            band = a2.band
            lo, hi = (band.n_opt_lo, band.n_opt_hi) if key == "n" else (band.d_opt_lo, band.d_opt_hi)
            if lo:
                ax.fill_between(
                    band.budgets, lo, hi, color=OKABE_ITO[0], alpha=0.2, lw=0, label=f"{level}% band of the power law"
                )
        if approach3_answers(a3):  # an unconverged fit's numbers are no answer: not drawn (the title says so)
            n3 = a3.k * cs**a3.a
            y3 = n3 if key == "n" else cs / (6 * n3)
            e3 = a3.a if key == "n" else a3.b
            ax.plot(cs, y3, "--", color=OKABE_ITO[3], lw=1.5, label=f"Approach 3 (C = 6ND): {symbol} = {e3:.3f}")
        _mark_rejected(ax, rej, empty=not minima and not approach3_answers(a3))
        _prediction_layer(ax, key, fit, cs, level)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo_c, hi_c)
        log_ticks(ax.xaxis, lo_c, hi_c)
        y_lo, y_hi = ax.get_ylim()
        if y_lo > 0:
            log_ticks(ax.yaxis, y_lo, y_hi)
        ax.set_xlabel("compute budget C (training FLOPs)")
        ax.set_ylabel(ylabel)
        # Below the panel: inside, the legend sat on the largest budgets' minima.
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8.5)
    verdict = "identifiable" if fit.verdict.identifiable else "NOT identifiable"
    extra = f"; dotted lines: {len(rej)} rejected budget(s)" if rej else ""
    if a3 is not None and a3.a is not None and not approach3_answers(a3):
        extra += "; Approach 3 did not converge: not drawn"
    fig.suptitle(f"Compute-optimal scaling (exponent {verdict}{extra})", fontsize=11)
    return fig


def _mark_rejected(ax, rejected, empty: bool) -> None:
    """The budgets Approach 2 rejected as dotted lines named in the legend (what the title calls dotted), and
    on a panel with nothing else to draw, why: an empty panel would read as a broken figure."""
    if empty:
        ax.text(0.5, 0.5, "no law to draw: no budget's minimum lies inside its grid", ha="center", va="center",
                transform=ax.transAxes, fontsize=8.5, color="0.3")  # fmt: skip
    for i, b in enumerate(rejected):
        ax.axvline(b.budget, color="0.45", lw=1.0, ls=":", zorder=0,
                   label="budget Approach 2 rejected (see the report)" if i == 0 else None)  # fmt: skip


def _prediction_layer(ax, key: str, fit, cs: np.ndarray, level: int) -> None:
    """The answer's prediction band over the whole axis, the asked budgets' predictions, and the
    backtest: the largest budget predicted from the others, with its interval."""
    from prism.isoflop.fit.predict import predict  # noqa: PLC0415

    section = fit.prediction
    if section is None or section.model is None:
        return
    grid = [p.answer for p in predict(section.model, cs)]
    if all(e is not None and e.n_ci is not None for e in grid):
        lo = [(e.n_ci if key == "n" else e.d_ci)[0] for e in grid]
        hi = [(e.n_ci if key == "n" else e.d_ci)[1] for e in grid]
        ax.fill_between(cs, lo, hi, color=OKABE_ITO[2], alpha=0.12, lw=0, label=f"{level}% prediction interval")
    asked = [p for p in section.predictions if p.budget in section.asked and p.answer is not None]
    for p in asked:
        e = p.answer
        y, ci = (e.n_opt, e.n_ci) if key == "n" else (e.d_opt, e.d_ci)
        err = [[y - ci[0]], [ci[1] - y]] if ci else None
        ax.errorbar([p.budget], [y], yerr=err, fmt="D", color=OKABE_ITO[2], ms=6, capsize=3)
    if asked:
        ax.plot([], [], "D", color=OKABE_ITO[2], label="predicted (config fit.predict)")
    for b in section.backtests[:1]:
        y = b.n_pred if key == "n" else float(_tokens(section.model, b.budget, b.n_pred))
        ci = b.n_ci if key == "n" else _tokens_ci(section.model, b.budget, b.n_ci)
        err = [[y - ci[0]], [ci[1] - y]] if ci else None
        ax.errorbar(
            [b.budget * 1.15], [y], yerr=err, fmt="s", mfc="none", color=OKABE_ITO[5], ms=6, capsize=3,
            label=f"backtest: largest budget predicted from the others (x{b.n_ratio:.2f})",
        )  # fmt: skip


def _tokens(model, budget: float, n: float):
    from prism.isoflop.fit.predict import tokens_at  # noqa: PLC0415

    return tokens_at(model, budget, n)


def _tokens_ci(model, budget: float, n_ci):
    if n_ci is None:
        return None
    ends = sorted(float(_tokens(model, budget, v)) for v in n_ci)
    return (ends[0], ends[1])


def figure_approach3(records, fit):
    fit = fit if isinstance(fit, FitResult) else FitResult.from_json(fit)
    plt = _style()
    a3 = fit.approach3
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    excluded_ids = {e.run_id for e in fit.exclusions}
    records = [r for r in records if r.run_id not in excluded_ids]
    budgets = sorted({r.budget for r in records})
    colours = dict(zip(budgets, _colours(len(budgets))))
    observed = np.array([r.loss for r in records])
    if approach3_answers(a3) and a3.surface is not None and records:
        n = np.array([r.params for r in records])
        d = np.array([r.tokens for r in records])
        pred = a3.surface.loss(n, d)
        show_legend = len(budgets) <= 8
        for c in budgets:
            sel = np.array([r.budget == c for r in records])
            ax.plot(
                observed[sel],
                pred[sel],
                "o",
                ms=4,
                color=colours[c],
                alpha=0.85,
                label=f"C = {sci(c)}" if show_legend else None,
            )
        lo, hi = min(observed.min(), pred.min()), max(observed.max(), pred.max())
        pad = 0.03 * (hi - lo)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "-", color="black", lw=0.8, label="y = x")
        ax.set_title(
            f"Approach 3: E={a3.E:.3g}, $\\alpha$={a3.alpha:.3f}, $\\beta$={a3.beta:.3f} (converged)",
            fontsize=10,
        )
        ax.legend(frameon=False, loc="upper left")
        ax.set_aspect("equal", adjustable="datalim")
    else:
        why = a3.reason if a3 is not None else "not requested"
        if a3 is not None and a3.a is not None:  # fitted, not converged: its surface is no answer
            why = approach3_not_drawn(a3, fitted_budgets(fit), MIN_BUDGETS).replace("no exponent, not drawn: ", "")
        ax.text(0.5, 0.5, f"Approach 3 not drawn:\n{why}", ha="center", va="center", transform=ax.transAxes,
                wrap=True, fontsize=8)  # fmt: skip
    ax.set_xlabel("observed " + LOSS_LABEL.replace(" (cross-entropy, nats/token)", " (nats/token)"))
    ax.set_ylabel("predicted loss (nats/token)")
    return fig


def plot_study(
    csv: str | Path,
    outdir: str | Path,
    fit_json: str | Path | None = None,
    family: str | None = None,
    regime: str | None = None,
    dpi: int = 150,
) -> list[Path]:
    """`prism isoflop plot`: the three PNGs from the runs CSV and (optionally) the fit JSON.

    Without a fit JSON, a point fit (no bootstrap) is made here to draw the curves.
    """
    loaded = load_runs(csv, family=family, regime=regime)
    records = loaded.records
    if fit_json is not None:
        try:
            fit = read_fit(fit_json, missing="make it with `prism isoflop fit`")
        except PrismError as err:
            raise PrismError(f"--fit-json {err}") from None
    else:
        fit = fit_records(
            records,
            method="both" if len(records) >= 5 else "approach2",
            bootstrap=0,
            excluded=[Exclusion(**e) for e in loaded.excluded_runs],
        )
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    plt = _style()
    written = []
    for name, fig in (
        ("isoflop_curves.png", figure_isoflop_curves(records, fit)),
        ("scaling_laws.png", figure_scaling_laws(fit)),
        ("approach3_fit.png", figure_approach3(records, fit)),
    ):
        written.append(_save(fig, out / name, dpi))
        plt.close(fig)
    return written
