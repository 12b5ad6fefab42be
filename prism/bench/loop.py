"""Benchmark: what the training loop costs beyond the step itself.

    prism bench loop --data DIR [--backbone 3m] [--global-batch 32] [--steps 60]

Times a bare step (forward + backward + AdamW step on one fixed batch, nothing
else) and then `prism.train.train` on the same shapes (loader, loss weighting,
gradient clipping, collapse checks, logging, all included; evaluations and
checkpoints excluded, as perf.jsonl reports them), then the bare step again;
prints loop/bare samples/s, the loop's MFU against the measured peak
(`prism.runtime.peak`), and the start-up time of a fresh `prism train` process to
its first step. A figure for docs/measurements.md, not a test: it depends on the machine.

torch and the trainer are imported inside the functions: `report_loop` must tune the process
(`prism.runtime.host.tune_host`) before torch is imported, as `prism train` does.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prism.model import build_model
from prism.model.config import backbone_config
from prism.runtime.host import tune_host
from prism.runtime.peak import peak_flops, peak_now
from prism.train.config import RunConfig
from prism.train.lr_schedule import build_optimizer, default_lr
from prism.train.rundir.runfiles import read_jsonl


def bare_step_samples_per_s(
    family: str, backbone: str, variant: str, regime: str, data: str, global_batch: int, steps: int, threads: int
) -> tuple[float, float]:
    """(samples/s by the wall clock, CPU seconds per step and thread) of the bare step."""
    import torch  # noqa: PLC0415 lazy: torch

    from prism.data.loader import ShardLoader  # noqa: PLC0415 lazy: torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model(family, backbone, variant, regime)
    opt = build_optimizer(model.trainable_parameters(), default_lr(backbone_config(backbone).d_model))
    batch = next(iter(ShardLoader(data, "train", global_batch, 0, family=family)))
    tokens, modality, labels = batch["tokens"], batch["modality"], batch["labels"]
    times, cpu = [], []
    for i in range(steps + 5):
        t0, c0 = time.perf_counter(), time.process_time()
        model(tokens, modality, labels).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= 5:
            times.append(time.perf_counter() - t0)
            cpu.append((time.process_time() - c0) / threads)
    return global_batch / statistics.median(times), statistics.median(cpu)


def loop_samples_per_s(
    family: str,
    backbone: str,
    variant: str,
    regime: str,
    data: str,
    global_batch: int,
    steps: int,
    threads: int,
    out: Path,
) -> tuple[float, float, list[dict]]:
    from prism.train.lifecycle import train  # noqa: PLC0415 lazy: torch

    config = RunConfig(
        family=family,
        backbone=backbone,
        variant=variant,
        regime=regime,
        budget=1e18,
        data=data,
        out=str(out),
        global_batch=global_batch,
        max_steps=steps,
        log_every=5,
        eval_samples=64,
        eval_every=10**9,
        checkpoint_every=10**9,
        threads=threads,
    )
    train(config)
    rows = [r for r in read_jsonl(out / "perf.jsonl") if r["step"] > 5]
    return (statistics.median(r["samples_per_s"] for r in rows), statistics.median(r["mfu"] for r in rows), rows)


def startup_s(family: str, data: str, out: Path, threads: int) -> float | None:
    """Process start to the end of the first step of a fresh `prism train` (30k backbone)."""
    cmd = [
        sys.executable,
        "-m",
        "prism",
        "train",
        "--family",
        family,
        "--backbone",
        "30k",
        "--variant",
        "BASE",
        "--regime",
        "e2e",
        "--budget",
        "3e11",
        "--data",
        data,
        "--out",
        str(out),
        "--max-steps",
        "2",
        "--eval-samples",
        "32",
        "--threads",
        str(threads),
    ]
    subprocess.run(cmd, capture_output=True, check=True)
    first = json.loads((out / "perf.jsonl").read_text().splitlines()[0])
    return first.get("startup_s")


def report_loop(
    data: str,
    family: str = "text_image",
    backbone: str = "3m",
    variant: str = "BASE",
    regime: str = "e2e",
    global_batch: int = 32,
    steps: int = 60,
    threads: int = 2,
) -> None:
    """Print the loop against the bare step (twice, around it), its MFU, and a fresh process's start-up."""
    tune_host()  # as `prism train` does, so both sides of the comparison run alike
    import torch  # noqa: PLC0415 lazy: torch

    torch.set_num_threads(threads)  # before the peak: measured with the benchmark's thread count
    shape = (family, backbone, variant, regime, data, global_batch)
    peaks = [peak_now()]
    with tempfile.TemporaryDirectory() as tmp:
        bare1 = bare_step_samples_per_s(*shape, steps, threads)
        loop, mfu, rows = loop_samples_per_s(*shape, steps, threads, Path(tmp) / "loop")
        peaks.append(peak_now())
        bare2 = bare_step_samples_per_s(*shape, steps, threads)
        peaks.append(peak_now())
        start = startup_s(family, data, Path(tmp) / "startup", threads)
    bare = (bare1[0] + bare2[0]) / 2
    bare_cpu = (bare1[1] + bare2[1]) / 2
    loop_cpu = statistics.median(r["cpu_time_s"] for r in rows)
    mfu_cpu = statistics.median(r["mfu_cpu"] for r in rows)
    wait = statistics.median(r["data_wait_s"] / r["step_time_s"] for r in rows)
    print(f"{backbone} {regime} batch {global_batch}, {threads} threads:")
    print(f"  bare fwd+bwd+AdamW step: {bare1[0]:.1f} / {bare2[0]:.1f} samples/s (before / after the loop)")
    print(
        f"  training loop:           {loop:.1f} samples/s = {loop / bare:.1%} of the bare step "
        f"(data wait {wait:.1%} of a step)"
    )
    print(
        f"  CPU time per step:       bare {bare_cpu * 1e3:.0f} ms, loop {loop_cpu * 1e3:.0f} ms: loop at "
        f"{bare_cpu / loop_cpu:.1%} of the bare step's speed (robust to other tenants with 1 thread)"
    )
    print(
        f"  loop MFU:                {mfu:.1%} of the cached fp32 peak {peak_flops() / 1e9:.0f} GFLOP/s "
        f"(wall clock); {mfu_cpu:.1%} by CPU time"
    )
    # The peak re-measured around the runs, the highest of three: what the cores could do meanwhile.
    now = max(peaks)
    print(
        f"  loop MFU (peak now):     {mfu * peak_flops() / now:.1%} of the fp32 peak measured around the runs, "
        f"{now / 1e9:.0f} GFLOP/s"
    )
    print(
        f"  start-up (30k, process start to end of step 1): {start:.2f} s"
        if start is not None
        else "  start-up: unknown (no /proc)"
    )
