"""Steady-state summaries: one record per run, and one per preset (modality).

Pure functions on plain dicts, so they are testable without files or plots.
The first steps of a run pay for allocation, compilation and cold caches; the
summary drops them (`warmup_fraction` of the logged steps, at least one when a
run logged two or more) and takes medians over the rest.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from prism.core.errors import PrismError

# Columns first in the CSV, in this order, when present.
LEADING = (
    "run_dir",
    "run_id",
    "sweep_id",
    "design",
    "preset",
    "family",
    "backbone",
    "variant",
    "regime",
    "layout",
    "storage",
    "strategy",
    "world_size",
    "device",
    "compile",
    "grad_checkpoint",
    "torch_version",
    "git_rev",
    "steps_logged",
    "steps_used",
    "first_step",
    "last_step",
    "samples_per_s",
    "samples_per_s_iqr",
    "units_per_s",
    "tokens_per_s",
    "tokens_per_sample",
    "flops_per_s",
    "mfu",
    "mfu_iqr",
    "step_time_s",
    "data_wait_s",
    "data_wait_share",
    "peak_mem_bytes",
    "final_loss",
    "bad_lines",
)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _iqr(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[2] - q[0]


def steady_state(rows: list[dict], warmup_fraction: float = 0.2) -> list[dict]:
    """The rows after warm-up, ordered by step."""
    rows = sorted(rows, key=lambda r: r["step"] if _is_number(r.get("step")) else math.inf)
    skip = math.ceil(len(rows) * warmup_fraction) if len(rows) >= 2 else 0
    return rows[min(skip, len(rows) - 1) :] if rows else []


def with_sample_rates(rows: list[dict]) -> list[dict]:
    """Rows whose `samples_per_s` counts real samples, from the cumulative `samples` counter.

    A packed global-batch unit is a row of several samples; the cumulative `samples`
    counter and the window's step time give the real rate whatever the logger called
    `samples_per_s` (early `prism train` versions logged units there). The unit rate
    (rows per second) is `units_per_s` = global_batch / step_time_s.
    """
    rows = sorted(rows, key=lambda r: r["step"] if _is_number(r.get("step")) else math.inf)
    out, prev_step, prev_samples = [], 0, 0
    for r in rows:
        r = dict(r)
        step, samples, dt = r.get("step"), r.get("samples"), r.get("step_time_s")
        if _is_number(step) and _is_number(samples) and _is_number(dt) and _is_number(r.get("samples_per_s")):
            window = step - prev_step
            if window > 0 and dt > 0 and samples >= prev_samples:
                r["samples_per_s"] = (samples - prev_samples) / (dt * window)
                if _is_number(r.get("global_batch")):
                    r["units_per_s"] = r["global_batch"] / dt
            prev_step, prev_samples = step, samples
        out.append(r)
    return out


def summarize_run(rows: list[dict], meta: dict | None = None, warmup_fraction: float = 0.2) -> dict:
    """One run's record: its metadata (text fields) and steady-state medians of its numeric fields."""
    rows = with_sample_rates(rows)
    out: dict = {}
    for row in rows:  # text fields: the last value a row gave (they are constant in a run)
        for key, value in row.items():
            if not _is_number(value) and value is not None:
                out[key] = value if isinstance(value, (str, bool)) else str(value)
    out.update({k: v for k, v in (meta or {}).items() if v is not None})
    steady = steady_state(rows, warmup_fraction)
    out["steps_logged"] = len(rows)
    out["steps_used"] = len(steady)
    steps = [r["step"] for r in steady if _is_number(r.get("step"))]
    if steps:
        out["first_step"], out["last_step"] = min(steps), max(steps)
    numeric = sorted({k for r in steady for k, v in r.items() if _is_number(v)} - {"step"})
    for key in numeric:
        values = [float(r[key]) for r in steady if _is_number(r.get(key))]
        if key == "peak_mem_bytes":
            out[key] = max(values)
        elif key == "loss":
            out["final_loss"] = values[-1]
        elif key in ("world_size",):
            out[key] = int(values[-1])
        else:
            out[key] = statistics.median(values)
    for key in ("samples_per_s", "mfu"):
        values = [float(r[key]) for r in steady if _is_number(r.get(key))]
        if values:
            out[f"{key}_iqr"] = _iqr(values)
    # Tokens per sample from the rates themselves: what the backbone actually saw per sample.
    ratios = [
        r["tokens_per_s"] / r["samples_per_s"]
        for r in steady
        if _is_number(r.get("tokens_per_s")) and _is_number(r.get("samples_per_s")) and r["samples_per_s"] > 0
    ]
    if ratios and "tokens_per_sample" not in out:
        out["tokens_per_sample"] = statistics.median(ratios)
    waits = [
        r["data_wait_s"] / r["step_time_s"]
        for r in steady
        if _is_number(r.get("data_wait_s")) and _is_number(r.get("step_time_s")) and r["step_time_s"] > 0
    ]
    if waits:
        out["data_wait_share"] = statistics.median(waits)
    return out


def columns(records: Iterable[dict]) -> list[str]:
    """The union of the records' keys: the known ones in LEADING order, the rest sorted."""
    keys: set[str] = set()
    for r in records:
        keys.update(r)
    return [k for k in LEADING if k in keys] + sorted(keys - set(LEADING))


def apply_filters(records: list[dict], filters: dict[str, list[str]]) -> list[dict]:
    """Keep the records whose column equals one of the given values, for every filtered column."""
    available = columns(records)
    for key in filters:
        if key not in available:
            raise PrismError(f"unknown filter key {key!r}; the columns are: {', '.join(available)}")

    def matches(value, wanted: str) -> bool:
        if value is None:
            return False
        if str(value) == wanted or (isinstance(value, bool) and str(value).lower() == wanted.lower()):
            return True
        try:
            return _is_number(value) and float(value) == float(wanted)
        except ValueError:
            return False

    return [r for r in records if all(any(matches(r.get(k), w) for w in ws) for k, ws in filters.items())]


MODALITY_METRICS = ("samples_per_s", "tokens_per_s", "mfu", "tokens_per_sample", "step_time_s", "data_wait_share")


def per_modality(records: list[dict], baseline_layout: str = "padded") -> list[dict]:
    """One record per preset (falling back to the family): medians over its runs, per layout.

    The headline columns are those of the baseline (padded) layout when the preset
    has it; each layout also gets its own `<metric>_<layout>` columns, and
    `packing_speedup` is packed samples/s over padded samples/s.
    """
    groups: dict[str, list[dict]] = {}
    for r in records:
        name = r.get("preset") or r.get("family") or r.get("run_dir", "?")
        groups.setdefault(str(name), []).append(r)
    out = []
    for name in sorted(groups):
        runs = groups[name]
        row: dict = {"preset": name}
        for key in ("family", "backbone", "design", "sweep_id", "device"):
            vals = sorted({str(r[key]) for r in runs if r.get(key) is not None})
            if vals:
                row[key] = ",".join(vals)
        row["runs"] = len(runs)
        by_layout: dict[str, list[dict]] = {}
        for r in runs:
            by_layout.setdefault(str(r.get("layout") or "unknown"), []).append(r)
        base = baseline_layout if baseline_layout in by_layout else sorted(by_layout)[0]
        row["layouts"] = ",".join(sorted(by_layout))
        for layout, lruns in sorted(by_layout.items()):
            for metric in MODALITY_METRICS:
                values = [float(r[metric]) for r in lruns if _is_number(r.get(metric))]
                if not values:
                    continue
                value = statistics.median(values)
                row[f"{metric}_{layout}"] = value
                if layout == base:
                    row[metric] = value
        if row.get("samples_per_s_packed") and row.get("samples_per_s_padded"):
            row["packing_speedup"] = row["samples_per_s_packed"] / row["samples_per_s_padded"]
        if row.get("mfu_packed") and row.get("mfu_padded"):
            row["packing_mfu_gain"] = row["mfu_packed"] / row["mfu_padded"]
        row["bad_lines"] = sum(int(r.get("bad_lines", 0)) for r in runs)
        out.append(row)
    return out


def modality_columns(records: list[dict]) -> list[str]:
    lead = [
        "preset",
        "family",
        "backbone",
        "design",
        "sweep_id",
        "device",
        "runs",
        "layouts",
        *MODALITY_METRICS,
        "packing_speedup",
        "packing_mfu_gain",
    ]
    keys: set[str] = set()
    for r in records:
        keys.update(r)
    return [k for k in lead if k in keys] + sorted(keys - set(lead) - {"bad_lines"}) + ["bad_lines"]
