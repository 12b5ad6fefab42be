"""Markdown tables a researcher pastes into the docs."""

from __future__ import annotations

import math

# Short headers and formats for the usual columns; others print as they are.
_FORMATS = {
    "samples_per_s": ("samples/s", "{:.1f}"),
    "tokens_per_s": ("tokens/s", "{:.0f}"),
    "flops_per_s": ("GFLOP/s", lambda v: f"{v / 1e9:.2f}"),
    "mfu": ("MFU", lambda v: f"{100 * v:.1f}%"),
    "tokens_per_sample": ("tokens/sample", "{:.1f}"),
    "step_time_s": ("step (s)", "{:.4f}"),
    "data_wait_share": ("data wait", lambda v: f"{100 * v:.1f}%"),
    "samples_per_s_spread": ("samples/s spread", lambda v: f"{100 * v:.0f}%"),
    "samples_per_cpu_s": ("samples/CPU-s", "{:.1f}"),
    "samples_per_cpu_s_spread": ("samples/CPU-s spread", lambda v: f"{100 * v:.0f}%"),
    "mfu_cpu": ("MFU by CPU time", lambda v: f"{100 * v:.1f}%"),
    "packing_speedup": ("packing speed-up", "{:.2f}x"),
    "packing_speedup_cpu": ("packing speed-up by CPU time", "{:.2f}x"),
    "packing_mfu_gain": ("packing MFU gain", "{:.2f}x"),
    "peak_mem_bytes": ("peak mem (MiB)", lambda v: f"{v / 2**20:.0f}"),
}


def _fmt(key: str, value) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    base = key
    for suffix in ("_padded", "_packed"):
        if key.endswith(suffix):
            base = key[: -len(suffix)]
    fmt = _FORMATS.get(base, (None, None))[1]
    if fmt is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt(value) if callable(fmt) else fmt.format(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def _header(key: str) -> str:
    for suffix in ("_padded", "_packed"):
        if key.endswith(suffix) and key[: -len(suffix)] in _FORMATS:
            return f"{_FORMATS[key[: -len(suffix)]][0]} ({suffix[1:]})"
    return _FORMATS.get(key, (key, None))[0]


def table(records: list[dict], cols: list[str]) -> str:
    """A GitHub-flavoured Markdown table of `records` over `cols`."""
    lines = ["| " + " | ".join(_header(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in records:
        lines.append("| " + " | ".join(_fmt(c, r.get(c)) for c in cols) + " |")
    return "\n".join(lines) + "\n"
