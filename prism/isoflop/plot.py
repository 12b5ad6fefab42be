"""Figures of an IsoFLOP study (the only module here that imports matplotlib; Agg backend).

- isoflop_curves.png: loss vs N per budget, the Approach 2 parabolas, their minima;
  rejected budgets drawn hollow and dashed, with the reason in the legend.
- scaling_laws.png: N_opt(C) and D_opt(C) with the fitted power laws and their
  bootstrap bands (Approach 2), and Approach 3's law when fitted.
- approach3_fit.png: Approach 3's predicted vs observed loss, with y = x.
Colours are the Okabe-Ito palette (distinguishable with every common colour-vision
deficiency); with more budgets than it has colours, the cividis map.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from prism.errors import PrismError

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
LOSS_LABEL = "final eval loss (cross-entropy, nats/token)"


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
    import matplotlib

    categorical = [c for c in OKABE_ITO if c not in ("#F0E442", "#000000")]  # yellow is faint on white; black is y=x
    if n <= len(categorical):
        return categorical[:n]
    cmap = matplotlib.colormaps["cividis"]
    return [cmap(v) for v in np.linspace(0.0, 0.85, n)]


def _style():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    from prism.atomic import write_atomic

    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png"))
    return path


def figure_isoflop_curves(records, fit: dict):
    plt = _style()
    per_budget = (fit.get("approach2") or {}).get("per_budget", [])
    budgets = sorted({r.budget for r in records})
    colours = dict(zip(budgets, _colours(len(budgets))))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    info = {b["budget"]: b for b in per_budget}
    for c in budgets:
        pts = sorted((r.params, r.loss) for r in records if r.budget == c)
        n, loss = np.array(pts).T
        b = info.get(c, {})
        accepted = bool(b.get("accepted")) or not info  # no Approach 2 in the fit: plain points
        col = colours[c]
        label = f"C = {sci(c)} FLOPs"
        if not accepted and info:
            label += f"\n  rejected: {_short_reason(b.get('reason', 'not fitted'))}"
        ax.plot(
            n, loss, "o", ms=5, color=col, label=label,
            markerfacecolor=col if accepted else "none", markeredgewidth=1.2,
        )
        if b.get("coef"):
            c0, c1, c2 = b["coef"]
            x = np.linspace(math.log10(n.min()) - 0.05, math.log10(n.max()) + 0.05, 100)
            ax.plot(10**x, c0 + c1 * x + c2 * x * x, "-" if accepted else "--", color=col, lw=1.3, alpha=0.9)
        if accepted and b.get("n_opt"):
            ax.plot(b["n_opt"], b["loss_min"], marker="*", ms=12, color=col, markeredgecolor="black", markeredgewidth=0.6, zorder=5)
    ax.set_xscale("log")
    ax.set_xlabel("trainable parameters N")
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title("IsoFLOP curves (Approach 2 parabolas; $\\star$ = minimum)")
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def figure_scaling_laws(fit: dict):
    plt = _style()
    a2 = fit.get("approach2") or {}
    a3 = fit.get("approach3") or {}
    acc = [b for b in a2.get("per_budget", []) if b.get("accepted")]
    rej = [b for b in a2.get("per_budget", []) if not b.get("accepted")]
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.2))
    all_c = [b["budget"] for b in a2.get("per_budget", [])] or [1.0]
    cs = np.logspace(math.log10(min(all_c)) - 0.2, math.log10(max(all_c)) + 0.2, 100)
    band = a2.get("band") or {}
    for ax, key, law_k, law_e, ci, lo_key, hi_key, ylabel in (
        (axes[0], "n_opt", "k", "a", "a_ci", "n_opt_lo", "n_opt_hi", "compute-optimal trainable parameters $N_{opt}$"),
        (axes[1], "d_opt", "k_d", "b", "b_ci", "d_opt_lo", "d_opt_hi", "compute-optimal tokens $D_{opt}$"),
    ):
        if acc:
            ax.plot([b["budget"] for b in acc], [b[key] for b in acc], "o", color=OKABE_ITO[0], ms=6,
                    label="Approach 2 per-budget minimum")
        if a2.get(law_e) is not None:
            ci_text = f" [{a2[ci][0]:.3f}, {a2[ci][1]:.3f}]" if a2.get(ci) else ""
            ax.plot(cs, a2[law_k] * cs ** a2[law_e], "-", color=OKABE_ITO[0], lw=1.5,
                    label=f"Approach 2: $\\propto C^{{{a2[law_e]:.3f}}}${ci_text}")
            if band.get(lo_key):
                ax.fill_between(band["budgets"], band[lo_key], band[hi_key], color=OKABE_ITO[0], alpha=0.2, lw=0,
                                label=f"bootstrap {int(100 * fit.get('ci_level', 0.8))}% band")
        if a3.get("a") is not None:
            n3 = a3["k"] * cs ** a3["a"]
            y3 = n3 if key == "n_opt" else cs / (6 * n3)
            e3 = a3["a"] if key == "n_opt" else a3["b"]
            conv = "" if a3.get("converged") else ", NOT converged"
            ax.plot(cs, y3, "--", color=OKABE_ITO[3], lw=1.5, label=f"Approach 3 ($C=6ND$): $\\propto C^{{{e3:.3f}}}${conv}")
        for b in rej:
            ax.axvline(b["budget"], color="0.6", lw=0.8, ls=":", zorder=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("compute budget C (training FLOPs)")
        ax.set_ylabel(ylabel)
        ax.legend(frameon=False, loc="upper left")
    verdict = "identifiable" if fit.get("diagnostics", {}).get("identifiable") else "NOT identifiable"
    extra = f"; dotted: {len(rej)} rejected budget(s)" if rej else ""
    fig.suptitle(f"Compute-optimal scaling (exponent {verdict}{extra})", fontsize=11)
    return fig


def figure_approach3(records, fit: dict):
    plt = _style()
    a3 = fit.get("approach3") or {}
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    budgets = sorted({r.budget for r in records})
    colours = dict(zip(budgets, _colours(len(budgets))))
    observed = np.array([r.loss for r in records])
    if a3.get("E") is not None:
        n = np.array([r.params for r in records])
        d = np.array([r.tokens for r in records])
        pred = a3["E"] + a3["A"] / n ** a3["alpha"] + a3["B"] / d ** a3["beta"]
        show_legend = len(budgets) <= 8
        for c in budgets:
            sel = np.array([r.budget == c for r in records])
            ax.plot(observed[sel], pred[sel], "o", ms=4, color=colours[c], alpha=0.85,
                    label=f"C = {sci(c)}" if show_legend else None)
        lo, hi = min(observed.min(), pred.min()), max(observed.max(), pred.max())
        pad = 0.03 * (hi - lo)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "-", color="black", lw=0.8, label="y = x")
        conv = "converged" if a3.get("converged") else "NOT converged"
        ax.set_title(
            f"Approach 3: E={a3['E']:.3g}, $\\alpha$={a3['alpha']:.3f}, $\\beta$={a3['beta']:.3f} ({conv})",
            fontsize=10,
        )
        ax.legend(frameon=False, loc="upper left")
        ax.set_aspect("equal", adjustable="datalim")
    else:
        ax.text(0.5, 0.5, f"Approach 3 not fitted:\n{a3.get('reason', 'not requested')}", ha="center", va="center",
                transform=ax.transAxes)
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
    from prism.isoflop.fit import fit_records
    from prism.isoflop.table import load_runs

    records = load_runs(csv, family=family, regime=regime).records
    if fit_json is not None:
        try:
            fit = json.loads(Path(fit_json).read_text())
        except (OSError, ValueError) as err:
            raise PrismError(f"--fit-json {fit_json}: cannot read ({err}); make it with `prism isoflop fit`") from None
        if "diagnostics" not in fit:
            raise PrismError(f"--fit-json {fit_json}: not a fit JSON (no diagnostics); make it with `prism isoflop fit`")
    else:
        fit = fit_records(records, method="both" if len(records) >= 5 else "approach2", n_boot=0)
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
