"""A benchmark row: what was measured (model, shapes, device, revision) and the rates of its step
times (median and spread, samples/s, FLOP/s, MFU against the peak, arithmetic intensity)."""

from __future__ import annotations

import socket
import statistics
import time

from prism.bench.benchconfig import BenchConfig
from prism.bench.steps import Bench
from prism.core.revision import git_rev
from prism.core.tokenizer import PAD


def spread(times: list[float]) -> dict:
    """Median, min, max and IQR of step times (seconds)."""
    if len(times) >= 2:
        q = statistics.quantiles(times, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = 0.0
    return {
        "step_time_s": statistics.median(times),
        "step_time_min_s": min(times),
        "step_time_max_s": max(times),
        "step_time_iqr_s": iqr,
        "repeats": len(times),
    }


def base_row(cfg: BenchConfig, bench: Bench, test: str, batch: int, peak: float) -> dict:
    import torch  # noqa: PLC0415 lazy: torch

    from prism.runtime.device import device_name  # noqa: PLC0415 lazy: torch

    n_real = int((bench.batch(1)[0] != PAD).sum())  # the tokens of one sample that are not padding
    return {
        "test": test,
        "model": cfg.model,
        "family": cfg.family,
        "variant": cfg.variant,
        "regime": cfg.regime,
        "seq_len": cfg.seq_len,
        "batch": batch,
        "dtype": cfg.dtype,
        "tokens_per_sample": cfg.seq_len,
        "real_tokens_per_sample": n_real,
        "device": str(bench.device),
        "device_name": device_name(bench.device),
        "threads": torch.get_num_threads(),
        "compile": bench.compile,
        "strategy": "single",
        "world_size": 1,
        "peak_flops": peak,
        "torch_version": torch.__version__,
        "git_rev": git_rev(),
        "host": socket.gethostname(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def rates(
    row: dict,
    times: list[float],
    flops: int,
    nbytes: int,
    peak: float,
    samples_per_step: int,
    cpu_times: list[float] | None = None,
) -> dict:
    sp = spread(times)
    t = sp["step_time_s"]
    row.update(sp)
    row["samples_per_s"] = samples_per_step / t
    row["tokens_per_s"] = samples_per_step * row["seq_len"] / t
    row["flops_per_step"] = flops
    row["flops_per_s"] = flops / t
    row["mfu"] = flops / t / peak
    # The fastest step: what the device did when nothing else ran (a shared machine's medians drift).
    row["mfu_best"] = flops / sp["step_time_min_s"] / peak
    row["arithmetic_intensity"] = flops / nbytes if nbytes else None
    if cpu_times and row.get("device", "cpu").startswith("cpu"):
        # CPU seconds the process got per step, per thread: on a shared machine the wall clock also counts
        # the time other tenants held the cores; with one thread this is the step's own cost.
        cpu = statistics.median(cpu_times) / max(1, row.get("threads") or 1)
        row["cpu_time_s"] = cpu
        row["mfu_cpu"] = flops / cpu / peak if cpu > 0 else None
    return row
