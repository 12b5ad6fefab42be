"""plot: the three PNGs exist, are PNGs, and their axes say what they show."""

from __future__ import annotations

import struct

import pytest

from prism.cli import main
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import Surface
from prism.isoflop.synthetic import isoflop_study, write_csv

SURFACE = Surface(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.35)


@pytest.fixture(scope="module")
def study():
    recs = isoflop_study(SURFACE, [1e18, 1e19, 1e20], per_budget=5, spread=1.0, noise=0.005, seed=2)
    recs += isoflop_study(SURFACE, [1e21], per_budget=4, spread=0.5, offset=0.9)  # edge minimum: rejected
    return recs, fit_records(recs, bootstrap=20)


def _png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_cli_writes_three_pngs(tmp_path, study):
    import json

    recs, fit = study
    write_csv(recs, tmp_path / "runs.csv")
    (tmp_path / "fit.json").write_text(json.dumps(fit.to_json()))
    outdir = tmp_path / "plots"
    assert (
        main(
            [
                "isoflop",
                "plot",
                "--csv",
                str(tmp_path / "runs.csv"),
                "--fit-json",
                str(tmp_path / "fit.json"),
                "--outdir",
                str(outdir),
                "--dpi",
                "60",
            ]
        )
        == 0
    )
    for name in ("isoflop_curves.png", "scaling_laws.png", "approach3_fit.png"):
        w, h = _png_size(outdir / name)
        assert w > 100 and h > 100
    assert not list(outdir.glob(".*"))  # no temporary files left


def test_axes_are_labelled_log_scaled_and_rejections_marked(study):
    import matplotlib.pyplot as plt

    from prism.isoflop.present import plot

    recs, fit = study
    fig = plot.figure_isoflop_curves(recs, fit)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and "parameters" in ax.get_xlabel() and "loss" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("rejected" in t and "10^{21}" in t for t in labels)
    assert any("10^{18}" in t for t in labels)
    # the rejected budget is drawn hollow
    hollow = [line for line in ax.lines if line.get_markerfacecolor() == "none"]
    assert hollow
    plt.close(fig)
    fig = plot.figure_scaling_laws(fit)
    for ax in fig.axes:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        assert "FLOPs" in ax.get_xlabel() and ax.get_ylabel()
        assert ax.collections  # the bootstrap band
    plt.close(fig)
    fig = plot.figure_approach3(recs, fit)
    ax = fig.axes[0]
    assert "observed" in ax.get_xlabel() and "predicted" in ax.get_ylabel()
    plt.close(fig)


def test_sci_labels():
    from prism.isoflop.present.plot import sci

    assert sci(1e12) == "$10^{12}$"
    assert sci(3e17) == "$3{\\times}10^{17}$"
    assert sci(2.5e17) == "$2.5{\\times}10^{17}$"


def _labels_overlap(fig, ax) -> list[tuple[str, str]]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    lo, hi = ax.get_xlim()
    shown = [
        t
        for t in ax.xaxis.get_majorticklabels() + ax.xaxis.get_minorticklabels()
        if t.get_visible() and t.get_text() and lo <= t.get_position()[0] <= hi
    ]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in shown]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1 :] if ba.overlaps(bb)]


def test_power_law_tick_labels_do_not_overlap():
    """Budgets under a decade apart (1e12, 3e12): matplotlib would label 2, 3, 4 ... x 10^12 side by side."""
    import matplotlib.pyplot as plt

    from prism.isoflop.present import plot

    recs = isoflop_study(SURFACE, [1e12, 3e12], per_budget=5, spread=1.0, noise=0.002, seed=1)
    fit = fit_records(recs, method="approach2", bootstrap=20)
    wide = isoflop_study(SURFACE, [1e12, 1e13, 1e14, 1e15], per_budget=5, spread=1.0, noise=0.002, seed=1)
    for budgets_fit in (fit, fit_records(wide, method="approach2", bootstrap=0)):
        fig = plot.figure_scaling_laws(budgets_fit)
        for ax in fig.axes:
            assert _labels_overlap(fig, ax) == []
            assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()]  # some labels remain
        plt.close(fig)


def test_error_bars_band_and_excluded_runs_are_drawn():
    import matplotlib.pyplot as plt

    from prism.isoflop.present import plot
    from prism.isoflop.records import RunRecord

    recs = isoflop_study(SURFACE, [1e18, 1e19, 1e20], per_budget=6, spread=1.0, noise=0.003, seed=5)
    recs = [RunRecord(r.run_id, r.params, r.tokens, r.loss, r.budget, loss_se=0.004) for r in recs]
    bad = recs[2]
    recs[2] = RunRecord(bad.run_id, bad.params, bad.tokens, bad.loss + 0.3, bad.budget, loss_se=0.004)  # outlier
    fit = fit_records(recs, method="approach2", bootstrap=30)
    assert [e.run_id for e in fit.exclusions] == [bad.run_id]
    fig = plot.figure_isoflop_curves(recs, fit)
    ax = fig.axes[0]
    assert ax.containers  # error bars
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("excluded (outlier" in t for t in labels)
    assert "loss_se" in ax.get_title()
    crosses = [line for line in ax.lines if line.get_marker() == "x"]
    assert len(crosses) == 1 and crosses[0].get_xdata()[0] == bad.params
    plt.close(fig)
    fig = plot.figure_scaling_laws(fit)
    for ax in fig.axes:
        assert ax.containers and ax.collections  # minima with their intervals, and the band
        assert any("band" in t.get_text() for t in ax.get_legend().get_texts())
    plt.close(fig)


def test_sizes_beyond_a_budgets_window_are_faded_not_drawn_as_fitted():
    """A parabola fitted on a window says nothing of the sizes beyond it: those points are faded
    (and said so in the legend), so a reader does not read their distance from it as misfit."""
    import matplotlib.pyplot as plt

    from prism.isoflop.present import plot

    recs = isoflop_study(SURFACE, [1e18, 1e19, 1e20], per_budget=9, spread=2.0, noise=0.002, seed=1)
    fit = fit_records(recs, method="approach2", bootstrap=0)
    windowed = [b for b in fit.approach2.per_budget if b.windowed]
    assert windowed  # two decades is more than a parabola describes: the fit chose windows
    beyond = sorted(r.params for b in windowed for r in recs if r.budget == b.budget and not b.in_window(r.params))
    fig = plot.figure_isoflop_curves(recs, fit)
    ax = fig.axes[0]
    faded = [c.lines[0] for c in ax.containers if c.lines[0].get_alpha() == plot.FADED]
    assert sorted(x for line in faded for x in line.get_xdata()) == beyond
    solid = [c.lines[0] for c in ax.containers if c.lines[0].get_alpha() == 1.0]
    assert len(recs) == len(beyond) + sum(len(line.get_xdata()) for line in solid)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[-1].startswith("faded: beyond its budget's window")
    plt.close(fig)
    fig = plot.figure_isoflop_curves(recs, fit_records(recs, method="approach2", bootstrap=0, span="full"))
    assert not any("faded" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    plt.close(fig)


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_scaling_law_legends_sit_off_the_data(study):
    from prism.isoflop.present import plot

    _, fit = study
    fig = plot.figure_scaling_laws(fit)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        assert not _overlaps(ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer))


def test_training_curves_one_panel_per_budget_legend_outside(tmp_path):
    import csv
    import json

    import matplotlib.pyplot as plt

    from prism.isoflop.present.curves import figure_training_curves, size_colours

    rows = []
    for budget in (1e10, 2e10, 4e10, 8e10, 1.6e11):
        for i, size in enumerate(("30k", "60k", "120k")):
            run = tmp_path / "runs" / f"{size}-C{budget:g}"
            run.mkdir(parents=True)
            (run / "eval.jsonl").write_text(
                "".join(json.dumps({"flops": budget * f, "loss": 5 - f - 0.1 * i}) + "\n" for f in (0.1, 0.5, 1.0))
            )
            rows.append(
                {
                    "run_id": run.name,
                    "family": "text_image",
                    "backbone": size,
                    "variant": "BASE",
                    "regime": "e2e",
                    "budget": budget,
                    "params": 3e4 * 2**i,
                    "status": "collapsed" if (budget, size) == (1e10, "30k") else "ok",
                    "run_dir": str(run),
                }
            )
    with (tmp_path / "runs.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fig = figure_training_curves(tmp_path / "runs.csv", family="text_image", regime="e2e")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title().split(" FLOPs")[0] for ax in panels] == [
        "C = 1e10",
        "C = 2e10",
        "C = 4e10",
        "C = 8e10",
        "C = 1.6e11",
    ]
    assert all(len([ln for ln in ax.lines if ln.get_linestyle() in ("-", "--")]) == 3 for ax in panels)
    assert [ln.get_linestyle() for ln in panels[0].lines if ln.get_linestyle() in ("-", "--")].count("--") == 1
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    assert not any(_overlaps(legend, ax.get_window_extent(renderer)) for ax in panels)
    assert [t.get_text().split()[0] for t in fig.legends[0].get_texts()][:3] == ["30k", "60k", "120k"]
    plt.close(fig)
    # every size colour is dark enough to read on white (luminance well below the background's)
    for r, g, b, _ in size_colours(11):
        assert 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.75
