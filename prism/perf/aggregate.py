"""`prism perf aggregate`: every perf.jsonl under a root -> CSV + Markdown + PNG.

A run is a directory holding `perf.jsonl`. Its metadata comes from the rows
themselves and from any `cell.json` (written by `prism sweep`) in the run
directory or its parents up to the root, so sweep cells carry their preset,
design and layout even when the training rows do not.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.perf import markdown, summary
from prism.perf.chart import bar_chart
from prism.perf.reader import BadLine, read_perf


@dataclass
class AggregateResult:
    records: list[dict]
    columns: list[str]
    bad_lines: list[BadLine] = field(default_factory=list)
    csv_path: Path | None = None
    md_path: Path | None = None
    png_path: Path | None = None


def parse_filters(items: list[str] | None) -> dict[str, list[str]]:
    """`key=value` strings -> {key: [values]}; a repeated key means any of its values."""
    filters: dict[str, list[str]] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PrismError(f"bad --filter {item!r}: expected key=value, e.g. preset=text_image")
        filters.setdefault(key.strip(), []).append(value.strip())
    return filters


def _cell_meta(run_dir: Path, root: Path) -> dict:
    """The merged cell.json files from the root down to the run (the nearest wins)."""
    chain = []
    d = run_dir
    while True:
        chain.append(d)
        if d == root or d.parent == d:
            break
        d = d.parent
    meta: dict = {}
    for d in reversed(chain):
        path = d / "cell.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except ValueError as err:
                raise PrismError(f"{path}: not valid JSON ({err}); rewrite or delete it") from None
            meta.update({k: v for k, v in data.items() if isinstance(v, (str, int, float, bool))})
    return meta


def collect_runs(root: Path, warmup_fraction: float = 0.2) -> tuple[list[dict], list[BadLine]]:
    """One summary record per perf.jsonl under `root`, and every malformed line met."""
    root = Path(root)
    if not root.is_dir():
        raise PrismError(f"--sweep-dir {root}: no such directory")
    paths = sorted(root.rglob("perf.jsonl"))
    if not paths:
        raise PrismError(f"no perf.jsonl under {root}; run `prism train` or `prism sweep run` first")
    records, bad = [], []
    for path in paths:
        rows, bad_here = read_perf(path)
        bad.extend(bad_here)
        run_dir = path.parent
        meta = {"run_dir": str(run_dir.relative_to(root)) or "."}
        meta.update(_cell_meta(run_dir, root))
        if not rows:
            # An empty (or wholly damaged) log is still a run to report, with no figures.
            records.append({**meta, "steps_logged": 0, "bad_lines": len(bad_here)})
            continue
        rec = summary.summarize_run(rows, None, warmup_fraction)
        rec.update(meta)
        rec["bad_lines"] = len(bad_here)
        records.append(rec)
    return records, bad


def _csv_text(records: list[dict], cols: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow({c: r.get(c, "") for c in cols})
    return buf.getvalue()


# The columns of the Markdown table per mode (the CSV has them all).
_MD_RUN_COLS = (
    "run_dir",
    "preset",
    "family",
    "backbone",
    "layout",
    "world_size",
    "samples_per_s",
    "tokens_per_s",
    "tokens_per_sample",
    "mfu",
    "step_time_s",
    "data_wait_share",
    "bad_lines",
)


def _md_modality_cols(records: list[dict]) -> list[str]:
    """Padded and packed side by side where the sweep measured both, else the headline figure."""
    cols = [c for c in ("preset", "family", "backbone") if any(c in r for r in records)]
    for metric in ("samples_per_s", "tokens_per_s", "tokens_per_sample", "mfu"):
        split = [f"{metric}_{lay}" for lay in ("padded", "packed") if any(f"{metric}_{lay}" in r for r in records)]
        cols.extend(split or [metric])
        if metric == "samples_per_s" and any("packing_speedup" in r for r in records):
            cols.append("packing_speedup")
    return cols + ["bad_lines"]


def aggregate(
    outputs: Path,
    csv_path: Path,
    filters: list[str] | None = None,
    per_modality: bool = False,
    warmup_fraction: float = 0.2,
    chart: bool = True,
    log=None,
) -> AggregateResult:
    """Scan, summarise, filter and write OUT (CSV), OUT.md and OUT.png; malformed lines go to `log`."""
    log = log or sys.stderr
    runs, bad = collect_runs(Path(outputs), warmup_fraction)
    for b in bad:
        print(f"warning: skipped malformed line {b}", file=log)
    if bad:
        print(f"warning: {len(bad)} malformed line(s) skipped in total; the rest was aggregated", file=log)
    parsed = parse_filters(filters)
    kept = summary.apply_filters(runs, parsed)
    if not kept:
        raise PrismError(f"no run under {outputs} matches --filter {' '.join(filters or [])}")
    if per_modality:
        records = summary.per_modality(kept)
        cols = summary.modality_columns(records)
        md_cols = _md_modality_cols(records)
        label = "preset"
    else:
        records = kept
        cols = summary.columns(records)
        md_cols = [c for c in _MD_RUN_COLS if c in cols]
        label = "run_dir"
    csv_path = Path(csv_path)
    write_text_atomic(csv_path, _csv_text(records, cols))
    md_path = csv_path.with_suffix(".md")
    title = "Throughput per modality" if per_modality else "Throughput per run"
    note = (
        f"\n{len(records)} row(s) from {len(kept)} run(s) under `{outputs}`; steady-state medians "
        f"(first {warmup_fraction:.0%} of logged steps dropped); {len(bad)} malformed line(s) skipped.\n"
    )
    write_text_atomic(md_path, f"## {title}\n\n" + markdown.table(records, md_cols) + note)
    png_path = None
    if chart:
        png_path = bar_chart(records, csv_path.with_suffix(".png"), label_key=label, title=title)
    return AggregateResult(records, cols, bad, csv_path, md_path, png_path)
