"""The bar chart of samples/s and MFU per modality (the only matplotlib user in prism.perf)."""

from __future__ import annotations

from pathlib import Path

from prism.core.atomic import write_atomic
from prism.core.palette import OKABE_ITO

HATCHES = ("", "//", "..", "xx")


def bar_chart(records: list[dict], out: Path, label_key: str = "preset", title: str = "") -> Path:
    """Two panels (samples/s, MFU), one bar group per record, one bar per layout present."""
    import matplotlib  # noqa: PLC0415 lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 lazy: matplotlib

    order = {"padded": 0, "packed": 1}
    layouts = sorted(
        {k.rsplit("_", 1)[1] for r in records for k in r if k.startswith("samples_per_s_") and not k.endswith("_iqr")},
        key=lambda lay: (order.get(lay, 2), lay),
    )
    series = [(f"{{}}_{lay}", lay) for lay in layouts] or [("{}", None)]
    labels = [str(r.get(label_key, "?")) for r in records]
    fig, axes = plt.subplots(1, 2, figsize=(max(6.0, 1.2 * len(records) + 3), 4.0))
    width = 0.8 / len(series)
    for ax, metric, ylabel, scale in ((axes[0], "samples_per_s", "samples/s", 1.0), (axes[1], "mfu", "MFU (%)", 100.0)):
        for i, (pattern, layout) in enumerate(series):
            key = pattern.format(metric)
            values = [scale * float(r.get(key) or 0.0) for r in records]
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(records))]
            ax.bar(
                xs,
                values,
                width,
                label=layout or metric,
                color=OKABE_ITO[i % len(OKABE_ITO)],
                hatch=HATCHES[i % len(HATCHES)],
                edgecolor="black",
                linewidth=0.5,
            )
        ax.set_xticks(range(len(records)), labels, rotation=30, ha="right")
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    top = 1.0
    if title:
        fig.suptitle(title, y=0.99)
        top = 0.93
    if layouts:  # one legend for both panels, above them, where it hides no bar
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(
            handles,
            names,
            title="layout",
            loc="upper center",
            ncol=len(layouts),
            bbox_to_anchor=(0.5, top),
            frameon=False,
        )
        top -= 0.1
    fig.tight_layout(rect=(0, 0, 1, top))
    try:
        return write_atomic(out, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(fig)
