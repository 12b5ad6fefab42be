"""The training-curves figure: eval loss against FLOPs (log-log) of every run of a study.

The first figure to check before trusting a study: a diverged or under-trained run
shows at once, and the lower envelope of the curves is what Chinchilla's Approach 1
reads. Colour is the run's size N (one colour per backbone x variant, ordered by N),
the marker its budget; runs that are not fitted (collapsed, stale, error, incomplete)
are drawn dashed and named in the legend. A plotting module: matplotlib (Agg) only here
and in plot.py.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from prism.ids import format_budget

FIGURE = "training_curves.png"
MARKERS = "osD^v<>ph*"


def read_curve(run_dir: Path) -> tuple[list[float], list[float]]:
    """(FLOPs, eval loss) of every readable line of the run's eval.jsonl (bad lines skipped)."""
    flops, losses = [], []
    path = run_dir / "eval.jsonl"
    if not path.is_file():
        return flops, losses
    for line in path.read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
            f, loss = float(row["flops"]), float(row["loss"])
        except (ValueError, KeyError, TypeError):
            continue
        if f > 0 and loss > 0 and math.isfinite(f) and math.isfinite(loss):
            flops.append(f)
            losses.append(loss)
    return flops, losses


def _rows(csv_path: Path, family: str | None, regime: str | None) -> list[dict]:
    with csv_path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [r for r in rows
            if (not family or r.get("family") == family) and (regime in (None, "any") or r.get("regime") == regime)]


def _excluded_by_fit(fit_json: Path | None) -> tuple[set[float], dict[str, str]]:
    """Budgets the fit rejected, and the runs it excluded ({run_id: kind}) though their status is ok."""
    if not fit_json or not Path(fit_json).is_file():
        return set(), {}
    from prism.isoflop.result import FitResult

    try:
        fit = FitResult.from_json(json.loads(Path(fit_json).read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set(), {}
    budgets = {float(d["budget"]) for d in fit.diagnostics.budgets_dropped or [] if d.get("budget") is not None}
    return budgets, {e.run_id: e.kind for e in fit.exclusions if e.kind != "status"}


def plot_training_curves(csv_path: str | Path, outdir: str | Path, fit_json: str | Path | None = None,
                         family: str | None = None, regime: str | None = None, dpi: int = 150) -> Path:
    """Write outdir/training_curves.png; returns its path (a figure saying "no curves" when no run has any)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    rows = _rows(Path(csv_path), family, regime)
    rejected, excluded = _excluded_by_fit(Path(fit_json) if fit_json else None)
    sizes = sorted({(float(r.get("params") or 0), r.get("backbone", ""), r.get("variant", "")) for r in rows})
    cmap = matplotlib.colormaps["viridis"]
    colour = {s[1:]: cmap(i / max(len(sizes) - 1, 1)) for i, s in enumerate(sizes)}
    budgets = sorted({float(r["budget"]) for r in rows if r.get("budget")})
    marker = {b: MARKERS[i % len(MARKERS)] for i, b in enumerate(budgets)}

    fig, ax = plt.subplots(figsize=(7.5, 5))
    drawn, not_fitted = 0, []
    for r in rows:
        flops, losses = read_curve(Path(r.get("run_dir") or ""))
        if not flops:
            continue
        drawn += 1
        status = r.get("status", "")
        if status == "ok" and r.get("run_id") in excluded:
            status = f"excluded ({excluded[r['run_id']]})"
        budget = float(r["budget"]) if r.get("budget") else None
        bad = status != "ok"
        style = "--" if bad else "-"
        c = colour.get((r.get("backbone", ""), r.get("variant", "")), "grey")
        ax.plot(flops, losses, style, color=c, alpha=0.5 if bad else 0.9, lw=1.2)
        ax.plot(flops[-1], losses[-1], marker.get(budget, "o"), color=c, ms=7,
                mfc="none" if bad or budget in rejected else c)
        if bad:
            ax.annotate(status, (flops[-1], losses[-1]), textcoords="offset points", xytext=(4, 4), fontsize=7)
            not_fitted.append(f"{r.get('run_id')}: {status}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:.3g}")  # losses read as 3.2, not 3.2x10^0
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel("training FLOPs")
    ax.set_ylabel("eval loss")
    title = f"Training curves ({family or 'all families'}, {regime or 'any regime'}): {drawn} runs"
    ax.set_title(title, fontsize=10)
    if not drawn:
        ax.text(0.5, 0.5, "no run has evaluations yet", transform=ax.transAxes, ha="center")
    handles = [Line2D([], [], color=colour[s[1:]], lw=2, label=f"{s[1]} {s[2]} (N={s[0]:.3g})") for s in sizes]
    handles += [Line2D([], [], color="black", marker=marker[b], ls="none",
                       mfc="none" if b in rejected else "black",
                       label=f"C={format_budget(b)}" + (" (rejected by the fit)" if b in rejected else ""))
                for b in budgets]
    if not_fitted:
        handles.append(Line2D([], [], color="grey", ls="--", label="not fitted (collapsed, stale, excluded, ...)"))
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper right", ncol=2 if len(handles) > 8 else 1)
    ax.grid(True, which="both", alpha=0.2)
    fig.tight_layout()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / FIGURE
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    tmp.replace(path)
    return path
