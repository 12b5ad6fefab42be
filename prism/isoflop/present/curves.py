"""The training-curves figure: eval loss against FLOPs (log-log) of every run of a study.

The first figure to check before trusting a study: a diverged or under-trained run
shows at once, and the lower envelope of the curves is what Chinchilla's Approach 1
reads. One panel per budget; colour is the run's size N (one colour per backbone x
variant, ordered by N, the same in every panel); runs that are not fitted (collapsed,
stale, error, incomplete, excluded) are drawn dashed with a hollow end and named.
A plotting module: matplotlib (Agg) only here and in plot.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from prism.core.errors import PrismError
from prism.core.ids import format_budget
from prism.isoflop.fitread import read_fit
from prism.isoflop.runs.table import read_rows

FIGURE = "training_curves.png"


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
    rows = read_rows(csv_path)
    return [
        r
        for r in rows
        if (not family or r.get("family") == family) and (regime in (None, "any") or r.get("regime") == regime)
    ]


def _excluded_by_fit(fit_json: Path | None) -> tuple[set[float], dict[str, str]]:
    """Budgets the fit rejected, and the runs it excluded ({run_id: kind}) though their status is ok."""
    if not fit_json or not Path(fit_json).is_file():
        return set(), {}

    try:
        fit = read_fit(fit_json)
    except PrismError:
        return set(), {}
    budgets = {float(d["budget"]) for d in fit.diagnostics.budgets_dropped or [] if d.get("budget") is not None}
    return budgets, {e.run_id: e.kind for e in fit.exclusions if e.kind != "status"}


def plot_training_curves(
    csv_path: str | Path,
    outdir: str | Path,
    fit_json: str | Path | None = None,
    family: str | None = None,
    regime: str | None = None,
    dpi: int = 150,
) -> Path:
    """Write outdir/training_curves.png; returns its path (a figure saying "no curves" when no run has any)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 lazy: matplotlib

    fig = figure_training_curves(csv_path, fit_json, family, regime)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / FIGURE
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    tmp.replace(path)
    return path


def figure_training_curves(
    csv_path: str | Path, fit_json: str | Path | None = None, family: str | None = None, regime: str | None = None
):
    """One panel per budget (a study of 7 budgets x 7 sizes would be 49 tangled lines on one
    axes), the loss axis shared so panels compare; the legend of sizes sits outside them.
    """
    import matplotlib  # noqa: PLC0415 lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 lazy: matplotlib

    rows = _rows(Path(csv_path), family, regime)
    rejected, excluded = _excluded_by_fit(Path(fit_json) if fit_json else None)
    sizes = sorted({(float(r.get("params") or 0), r.get("backbone", ""), r.get("variant", "")) for r in rows})
    colour = {s[1:]: c for s, c in zip(sizes, size_colours(len(sizes)))}
    curves = []
    for r in rows:
        flops, losses = read_curve(Path(r.get("run_dir") or ""))
        if flops:
            curves.append((r, flops, losses))
    budgets = sorted({float(r["budget"]) for r, *_ in curves if r.get("budget")}) or [None]
    ncols = min(len(budgets), 4)
    nrows = math.ceil(len(budgets) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols + 2.4, 2.8 * nrows + 0.8), sharey=True, squeeze=False)
    panels = dict(zip(budgets, axes.flat))
    for ax in list(axes.flat)[len(budgets) :]:
        ax.set_visible(False)
    not_fitted = sum(
        _draw_curve(panels.get(_budget_of(r), axes.flat[0]), r, fl, ls, colour, excluded) for r, fl, ls in curves
    )
    _style_panels(panels, curves, rejected)
    for ax in axes[-1]:
        ax.set_xlabel("training FLOPs", fontsize=9)
    for ax in axes[:, 0]:
        ax.set_ylabel("eval loss", fontsize=9)
    if not curves:
        axes.flat[0].text(0.5, 0.5, "no run has evaluations yet", transform=axes.flat[0].transAxes, ha="center")
    title = (
        f"Training curves ({family or 'all families'}, {regime or 'any regime'}): {len(curves)} runs, "
        "one panel per budget"
    )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 2.2 / fig.get_figwidth(), 1))
    _size_legend(fig, sizes, colour, not_fitted)
    return fig


def _budget_of(row: dict) -> float | None:
    return float(row["budget"]) if row.get("budget") else None


def _draw_curve(ax, r: dict, flops, losses, colour: dict, excluded: dict) -> bool:
    """One run's curve on its budget's panel, dashed and named with its status when the fit does not use
    it; whether it was not fitted."""
    status = r.get("status", "")
    if status == "ok" and r.get("run_id") in excluded:
        status = f"excluded ({excluded[r['run_id']]})"
    bad = status != "ok"
    c = colour.get((r.get("backbone", ""), r.get("variant", "")), "grey")
    ax.plot(flops, losses, "--" if bad else "-", color=c, alpha=0.6 if bad else 0.95, lw=1.3)
    ax.plot(flops[-1], losses[-1], "o", color=c, ms=4, mfc="white" if bad else c)
    if bad:
        ax.annotate(
            f"{r.get('backbone', '')}: {status}",
            (flops[-1], losses[-1]),
            textcoords="offset points",
            xytext=(-4, 6),
            fontsize=7,
            ha="right",
            color="0.25",
        )
    return bad


def _style_panels(panels: dict, curves: list, rejected) -> None:
    """Log axes with plain loss labels, each panel titled with its budget and its runs."""
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415 lazy: matplotlib

    from prism.isoflop.present.plot import log_ticks  # noqa: PLC0415 lazy: numpy

    plain = FuncFormatter(lambda v, _: f"{v:.3g}")  # losses read as 3.2, not 3.2x10^0
    for budget, ax in panels.items():
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        xs = [f for r, fl, _ in curves if panels.get(_budget_of(r)) is ax for f in fl]
        if xs:
            log_ticks(ax.xaxis, min(xs), max(xs))
        ax.grid(True, which="both", alpha=0.2)
        n = sum(1 for r, *_ in curves if r.get("budget") and float(r["budget"]) == budget)
        if budget is not None:
            note = ", rejected by the fit" if budget in rejected else ""
            ax.set_title(
                f"C = {format_budget(budget)} FLOPs\n{n} runs{note}",
                fontsize=9,
                color="0.45" if budget in rejected else "black",
            )
        ax.tick_params(labelsize=8)


def _size_legend(fig, sizes: list, colour: dict, not_fitted: int) -> None:
    """The sizes' colours (and the not-fitted style) beside the panels."""
    from matplotlib.lines import Line2D  # noqa: PLC0415 lazy: matplotlib

    handles = [Line2D([], [], color=colour[s[1:]], lw=2, label=f"{s[1]} {s[2]}  N={s[0]:.3g}") for s in sizes]
    if not_fitted:
        handles.append(
            Line2D(
                [],
                [],
                color="grey",
                ls="--",
                marker="o",
                mfc="white",
                label="not fitted (collapsed,\nstale, excluded, ...)",
            )
        )
    if handles:
        fig.legend(
            handles=handles,
            fontsize=7.5,
            loc="center left",
            frameon=False,
            title="size (colour)",
            title_fontsize=8,
            bbox_to_anchor=(1 - 2.15 / fig.get_figwidth(), 0.5),
        )


def size_colours(n: int) -> list:
    """n colours ordered by size: plasma without its pale yellow end, every one visible on white."""
    import matplotlib  # noqa: PLC0415 lazy: matplotlib

    cmap = matplotlib.colormaps["plasma"]
    return [cmap(0.82 * i / max(n - 1, 1)) for i in range(n)]
