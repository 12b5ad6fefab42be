"""`prism perf report`: a per-modality sweep as a results document (Markdown + chart).

The document stands alone: every preset's padded and packed figures in one table whose
header has as many columns as its rows, the chart beside it, the commands that measured
and wrote it, the machine (from the cells' status.json) and the dates. Figures are
medians over every run of a preset and layout under the sweep directory, so several
repeats of one sweep (sweep ids r1, r2, ... under one --outputs) give one table with
their spread beside it.
"""

from __future__ import annotations

import json
import shlex
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.perf import markdown, summary
from prism.perf.aggregate import collect_runs
from prism.perf.chart import bar_chart

STATUS = "status.json"  # prism.sweep.cells.STATUS, written last by every finished cell (not imported: torch)

# The tables' columns, fixed: a preset missing a figure shows an empty cell, never a shorter row.
# On a shared host the wall clock also counts the time other tenants held the core; the CPU-time
# table (one thread: exact) counts only this process's, so it moves less with the load.
COLUMNS = (
    "preset",
    "samples_per_s_padded",
    "samples_per_s_packed",
    "packing_speedup",
    "tokens_per_s_padded",
    "tokens_per_s_packed",
    "tokens_per_sample_padded",
    "tokens_per_sample_packed",
    "mfu_padded",
    "mfu_packed",
    "samples_per_s_spread_padded",
    "samples_per_s_spread_packed",
    "runs",
)
CPU_COLUMNS = (
    "preset",
    "samples_per_cpu_s_padded",
    "samples_per_cpu_s_packed",
    "packing_speedup_cpu",
    "mfu_cpu_padded",
    "mfu_cpu_packed",
    "samples_per_cpu_s_spread_padded",
    "samples_per_cpu_s_spread_packed",
    "runs",
)
LAYOUTS = ("padded", "packed")


@dataclass
class SweepInfo:
    """What the cells' status.json files say about how and where the sweep ran."""

    commands: list[str] = field(default_factory=list)
    designs: dict[str, dict] = field(default_factory=dict)
    machines: list[dict] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)


def sweep_info(root: Path) -> SweepInfo:
    """The sweep commands (one per sweep id), designs, machines and finish times under `root`."""
    info = SweepInfo()
    sweeps: dict[tuple, list[str]] = {}
    for path in sorted(Path(root).rglob(STATUS)):
        try:
            status = json.loads(path.read_text())
        except ValueError as err:
            raise PrismError(f"{path}: not valid JSON ({err}); delete it and rerun its cell") from None
        design = status.get("design_settings") or {}
        if status.get("design"):
            info.designs[status["design"]] = design
        if status.get("machine"):
            info.machines.append(status["machine"])
        if status.get("finished_at"):
            info.finished.append(status["finished_at"])
        outputs = path.parents[3]
        data_root = Path(status["data"]).parent if status.get("data") else None
        key = (str(outputs), status.get("sweep_id"), status.get("design"), status.get("storage"), str(data_root))
        sweeps.setdefault(key, []).append(str(status.get("preset")))
    for (outputs, sweep_id, design, storage, data_root), presets in sorted(sweeps.items()):
        words = ["prism", "sweep", "run", "--preset", ",".join(presets), "--designs", str(design)]
        words += ["--outputs", outputs, "--sweep-id", str(sweep_id)]
        if data_root != str(Path(outputs, str(sweep_id), "data")):
            words += ["--data-root", data_root]
        if storage and storage != "local":
            words += ["--storage", storage]
        info.commands.append(shlex.join(words))
    return info


def _name(run: dict) -> str:
    return str(run.get("preset") or run.get("family") or run.get("run_dir", "?"))


def _cpu_rate(run: dict) -> float | None:
    """Samples per CPU second of one run: its samples per step over its CPU seconds per step."""
    sps, step, cpu = run.get("samples_per_s"), run.get("step_time_s"), run.get("cpu_time_s")
    return sps * step / cpu if sps and step and cpu else None


def _values(runs: list[dict], preset: str, layout: str, get) -> list[float]:
    found = (get(r) for r in runs if _name(r) == preset and r.get("layout") == layout)
    return [float(v) for v in found if v is not None and v == v]


def _spread(values: list[float]) -> float | None:
    """(max - min) / median: how far the repeats of one preset and layout agree."""
    return (max(values) - min(values)) / statistics.median(values) if len(values) >= 2 else None


def modality_rows(runs: list[dict], presets: list[str] | None = None) -> list[dict]:
    """One row per preset (in `presets`' order when given; each of them must be there)."""
    rows = {r["preset"]: r for r in summary.per_modality(runs)}
    wanted = presets or sorted(rows)
    missing = [p for p in wanted if p not in rows]
    if missing:
        raise PrismError(
            f"no run of preset(s) {', '.join(missing)} in the sweep (found: {', '.join(sorted(rows)) or 'none'}); "
            f"run `prism sweep run --preset {','.join(missing)} ...` first"
        )
    out = []
    for name in wanted:
        row = dict(rows[name])
        for layout in LAYOUTS:
            rates = _values(runs, name, layout, _cpu_rate)
            mfu_cpu = _values(runs, name, layout, lambda r: r.get("mfu_cpu"))
            row[f"samples_per_cpu_s_{layout}"] = statistics.median(rates) if rates else None
            row[f"mfu_cpu_{layout}"] = statistics.median(mfu_cpu) if mfu_cpu else None
            row[f"samples_per_s_spread_{layout}"] = _spread(
                _values(runs, name, layout, lambda r: r.get("samples_per_s"))
            )
            row[f"samples_per_cpu_s_spread_{layout}"] = _spread(rates)
        if row["samples_per_cpu_s_padded"] and row["samples_per_cpu_s_packed"]:
            row["packing_speedup_cpu"] = row["samples_per_cpu_s_packed"] / row["samples_per_cpu_s_padded"]
        out.append(row)
    return out


def _machine_line(machines: list[dict]) -> str:
    if not machines:
        return "not recorded (cells written before prism recorded it)"
    hosts = sorted({f"{m.get('host', '?')} ({m.get('cpu', '?')}, {m.get('cores', '?')} cores)" for m in machines})
    loads = [float(m[k]) for m in machines for k in ("load_avg_1m_start", "load_avg_1m") if m.get(k) is not None]
    load = f"; 1-minute load average {min(loads):.1f}-{max(loads):.1f} around the cells" if loads else ""
    return ", ".join(hosts) + load


def _design_line(designs: dict[str, dict]) -> str:
    parts = []
    for name, d in sorted(designs.items()):
        threads = d.get("threads")
        parts.append(
            f"`{name}`: backbone {d.get('backbone', '?')}, {d.get('max_steps', '?')} steps logged every "
            f"{d.get('log_every', '?')}, {d.get('nodes', 1)} node(s) x {d.get('procs_per_node', 1)} process(es), "
            f"{d.get('device', '?')}" + (f", {threads} thread(s)" if threads else "")
        )
    return "; ".join(parts) or "not recorded"


def render(rows: list[dict], info: SweepInfo, command: str, n_runs: int, note: str = "", chart: str = "") -> str:
    """The document's Markdown (pure: tests give it a fake aggregate)."""
    dates = sorted(d[:10] for d in info.finished)
    when = (dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}") if dates else "not recorded"
    lines = [
        "# Per-modality throughput sweep",
        "",
        f"Written by `{command}`; do not edit by hand (rerun it).",
        "",
        f"- **Measured**: {when}, {n_runs} run(s).",
        f"- **Machine**: {_machine_line(info.machines)}.",
        f"- **Design**: {_design_line(info.designs)}.",
        "- **Commands** that measured it:",
        "",
        "```sh",
        *info.commands,
        "```",
        "",
    ]
    if note:
        lines += [note, ""]
    lines += [
        "Steady-state medians (the first 20% of each run's logged steps dropped), then the median over a",
        "preset's runs of each layout. Padded: one sample per row, the rest padding; packed: whole samples",
        "packed into rows of the same length (same model, same rows per step). Packing speed-up is packed",
        "over padded samples/s; spread is (max - min) / median over the repeats. MFU counts a row's FLOPs",
        "at its full length in both layouts (same model, same shapes), so it compares the time a row takes;",
        "samples/s is what packing buys, a packed row carrying tokens/sample (padded) / tokens/sample",
        "(packed) samples.",
        "",
        "**By the wall clock**, what a user waits for:",
        "",
        markdown.table(rows, list(COLUMNS)).rstrip("\n"),
        "",
        "**By CPU time**: the wall clock also counts the time other work held the core; samples per CPU",
        "second and MFU by CPU time (one thread: the process's own CPU seconds per step) count only this",
        "process's, so they move less with the load:",
        "",
        markdown.table(rows, list(CPU_COLUMNS)).rstrip("\n"),
        "",
    ]
    if chart:
        lines += [f"![samples per CPU second and MFU by CPU time per preset, padded and packed]({chart})", ""]
    return "\n".join(lines)


def write_report(
    sweep_dir: str | Path,
    out: str | Path,
    command: str,
    presets: list[str] | None = None,
    note: str = "",
    chart: bool = True,
) -> tuple[Path, Path | None]:
    """Aggregate `sweep_dir` per preset and write OUT (Markdown) and OUT's .png beside it."""
    runs, bad = collect_runs(Path(sweep_dir))
    if bad:
        raise PrismError(f"{bad[0]}: a damaged perf.jsonl ({len(bad)} bad line(s)); rerun that cell before reporting")
    rows = modality_rows(runs, presets)
    if presets:
        runs = [r for r in runs if _name(r) in presets]
    out = Path(out)
    png = None
    if chart:  # the CPU-time figures: the ones the load moves least
        by_cpu = [
            {"preset": r["preset"]}
            | {f"samples_per_s_{lay}": r.get(f"samples_per_cpu_s_{lay}") for lay in LAYOUTS}
            | {f"mfu_{lay}": r.get(f"mfu_cpu_{lay}") for lay in LAYOUTS}
            for r in rows
        ]
        png = bar_chart(by_cpu, out.with_suffix(".png"), title="Per modality, by CPU time (samples/s per CPU second)")
    text = render(rows, sweep_info(Path(sweep_dir)), command, len(runs), note, png.name if png else "")
    write_text_atomic(out, text)
    return out, png
