"""Throughput micro-benchmarks of one PRISM model on one device.

Tests (`TESTS`): `forward_only` (inference forward), `fwd_bwd` (forward, backward,
AdamW step), `batch_scaling` (fwd_bwd over batch sizes: where samples/s
saturates), `sync_overhead` (host time queueing the step vs. time blocked in
device synchronisation), `ddp_overhead` (the same step in 1 process vs. N
processes under DDP: gloo on a CPU, nccl/xccl with one accelerator per process: the
communication share of the step).

Every figure is a median over timed steps after warm-up, with min, max and IQR
beside it. Achieved FLOP/s uses the FLOPs of the measured step itself, counted
once per shape with `FlopCounterMode` (not 6ND), so MFU = achieved / measured
peak (`prism.runtime.peak`). Two more views for a shared machine, where other
tenants stretch the wall clock: `mfu_best` (the fastest step) and, on a CPU,
`mfu_cpu` (FLOPs over the CPU seconds the process got per thread; exact with
`--threads 1`, pessimistic with more, where idle OpenMP threads spin), and for
forward_only, fwd_bwd and batch_scaling `mfu_now` (against the peak re-measured just
before and after the timed steps, the higher of the two: what the device could do then).

Arithmetic intensity (`arithmetic_intensity`, FLOP/byte) is defined as the step's
counted FLOPs over the bytes of the operands and results of the FLOP-carrying
kernels (the ops `FlopCounterMode` counts: matmuls, attention, convolutions),
each read or written once. It is the roofline intensity of the step's compute
kernels; it grows with the tokens per step (batch x sequence), which is why
few-token samples leave the matmuls memory-bound.

This module runs the tests and prints their table; the invocation is `benchconfig.py`, the
timed steps `steps.py`, a row and its rates `rows.py`, the memory check `memory.py`, and
`ddp_overhead`'s processes `ddp.py`.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from prism.bench.benchconfig import BenchConfig
from prism.bench.ddp import ddp_overhead
from prism.bench.memory import check_memory
from prism.bench.rows import base_row, rates
from prism.bench.steps import Bench
from prism.core.errors import PrismError
from prism.core.progress import Bar
from prism.model.config import backbone_config
from prism.runtime.peak import peak_now


def measure(bench: Bench, test: str, batch: int, peak: float) -> dict:
    """One row of forward_only / fwd_bwd at `batch`."""
    train = test != "forward_only"
    check_memory(bench.cfg, bench.device, batch, train)
    args = bench.batch(batch)
    flops, nbytes = bench.flops_and_bytes(batch, train)
    before = peak_now(bench.device, bench.cfg.dtype)
    times = bench.time_steps(bench.step_fn(train), args)
    now = max(before, peak_now(bench.device, bench.cfg.dtype))
    row = rates(base_row(bench.cfg, bench, test, batch, peak), times, flops, nbytes, peak, batch, bench.cpu_times)
    row["peak_flops_now"] = now
    row["mfu_now"] = row["flops_per_s"] / now
    return row


def batch_scaling(bench: Bench, peak: float) -> list[dict]:
    """fwd_bwd over the batch sizes; `saturates_at` is the smallest batch within 10% of the best samples/s."""
    rows = []
    for b in bench.cfg.batch_sizes:
        row = measure(bench, "fwd_bwd", b, peak)
        row["test"] = "batch_scaling"
        rows.append(row)
    best = max(r["samples_per_s"] for r in rows)
    saturated = min(r["batch"] for r in rows if r["samples_per_s"] >= 0.9 * best)
    for r in rows:
        r["saturates_at"] = saturated
    return rows


def sync_overhead(bench: Bench, peak: float) -> dict:
    """Split each training step into host time (copy-in + queueing kernels) and time blocked syncing.

    The batch starts on the host (as it does from a loader) and is copied in each
    step; the loss is read back (`.item()`), as a training loop logging it would.
    """
    from prism.runtime.device import synchronize  # noqa: PLC0415 lazy: torch

    cfg = bench.cfg
    batch = cfg.batch
    check_memory(cfg, bench.device, batch, True)
    host_batch = [t.cpu() for t in bench.batch(batch)]
    if bench.device.type != "cpu":
        host_batch = [t.pin_memory() for t in host_batch]
    flops, nbytes = bench.flops_and_bytes(batch, True)
    copy_s, queue_s, sync_s, total_s = [], [], [], []
    for i in range(cfg.warmup + cfg.repeats):
        synchronize(bench.device)
        t0 = time.perf_counter()
        args = [t.to(bench.device, non_blocking=True) for t in host_batch]
        t1 = time.perf_counter()
        loss = bench._train(*args)
        t2 = time.perf_counter()
        synchronize(bench.device)
        float(loss.detach().item())
        t3 = time.perf_counter()
        if i >= cfg.warmup:
            copy_s.append(t1 - t0)
            queue_s.append(t2 - t1)
            sync_s.append(t3 - t2)
            total_s.append(t3 - t0)
    row = rates(base_row(cfg, bench, "sync_overhead", batch, peak), total_s, flops, nbytes, peak, batch)
    row["copy_in_s"] = statistics.median(copy_s)
    row["host_queue_s"] = statistics.median(queue_s)
    row["sync_s"] = statistics.median(sync_s)
    row["sync_share"] = statistics.median(s / t for s, t in zip(sync_s, total_s))
    return row


def packing(bench: Bench, peak: float) -> list[dict]:
    """Padded vs packed batches of real shards, same model and same [batch, seq_len] shape, steps interleaved.

    Interleaving puts both layouts under the same machine load, so their ratio holds on a
    shared machine where two separate runs minutes apart do not compare. Packed steps pass
    the batch's segment ids (block-diagonal attention), as training does. samples/s counts
    real samples (a packed row holds several); FLOPs are those of the padded row (the
    packed row's extra encoder passes are not counted, so its MFU is a slight underestimate).
    """
    import torch  # noqa: PLC0415 lazy: torch

    from prism.data.loader import ShardLoader  # noqa: PLC0415 lazy: torch
    from prism.runtime.device import synchronize  # noqa: PLC0415 lazy: torch

    cfg = bench.cfg
    if not cfg.data:
        raise PrismError(f"--test packing needs --data DIR: {cfg.family} shards from `prism data build`")
    check_memory(cfg, bench.device, cfg.batch, True)
    loaders = {
        lay: iter(ShardLoader(cfg.data, "train", cfg.batch, 0, layout=lay, seq_len=cfg.seq_len, family=cfg.family))
        for lay in ("padded", "packed")
    }
    flops, nbytes = bench.flops_and_bytes(cfg.batch, True)
    times: dict[str, list[float]] = {lay: [] for lay in loaders}
    cpu: dict[str, list[float]] = {lay: [] for lay in loaders}
    samples = dict.fromkeys(loaders, 0)
    for i in range(cfg.warmup + cfg.repeats):
        for lay, it in loaders.items():
            batch = next(it)
            args = [torch.as_tensor(batch[k]).to(bench.device) for k in ("tokens", "modality", "labels")]
            # Packed rows carry segment ids: each sample attends only to itself, as in training.
            seg = batch.get("segment_ids")
            seg = None if seg is None else torch.as_tensor(seg).to(bench.device)
            synchronize(bench.device)
            t0, c0 = time.perf_counter(), time.process_time()
            bench._train(*args, segment_ids=seg)
            synchronize(bench.device)
            if i >= cfg.warmup:
                times[lay].append(time.perf_counter() - t0)
                cpu[lay].append(time.process_time() - c0)
                samples[lay] += int(batch["n_samples"])
    rows = []
    for lay in loaders:
        row = rates(
            base_row(cfg, bench, "packing", cfg.batch, peak), times[lay], flops, nbytes, peak, cfg.batch, cpu[lay]
        )
        total = sum(times[lay])
        row.update(
            layout=lay,
            data=str(cfg.data),
            samples_per_s=samples[lay] / total,
            units_per_s=len(times[lay]) * cfg.batch / total,
            tokens_per_sample=len(times[lay]) * cfg.batch * cfg.seq_len / samples[lay],
            samples_per_row=samples[lay] / (len(times[lay]) * cfg.batch),
        )
        rows.append(row)
    rows[1]["packing_speedup"] = rows[1]["samples_per_s"] / rows[0]["samples_per_s"]
    return rows


# --- driver --------------------------------------------------------------------------------------------------


def run(cfg: BenchConfig) -> list[dict]:
    """Run the requested tests; rows are appended to `cfg.out` (JSON lines) as each test finishes."""
    from prism.runtime.peak import peak_flops  # noqa: PLC0415 looked up per run: tests fix prism.runtime.peak.peak_flops

    tests = cfg.tests()
    backbone_config(cfg.model)  # a bad name fails before anything is built
    if cfg.seq_len < 1 or cfg.batch < 1 or any(b < 1 for b in cfg.batch_sizes):
        raise PrismError("--seq-len, --batch and --batch-sizes must be positive")
    from prism.runtime.device import resolve_device  # noqa: PLC0415 lazy: torch

    if cfg.threads is not None:
        import torch  # noqa: PLC0415 lazy: torch

        if cfg.threads < 1:
            raise PrismError(f"--threads must be at least 1, got {cfg.threads}")
        torch.set_num_threads(cfg.threads)  # before the peak: its cache key holds the thread count
    device = resolve_device(cfg.device)
    # Check memory before building: the largest batch any requested test uses.
    biggest = max(
        [cfg.batch * (cfg.procs if "ddp_overhead" in tests else 1)]
        + (list(cfg.batch_sizes) if "batch_scaling" in tests else [])
    )
    check_memory(cfg, device, biggest, tests != ["forward_only"])
    with Bar(f"bench {cfg.model}", len(tests)) as bar:  # on a terminal only
        bar.describe("matmul peak")
        peak = peak_flops(device, cfg.dtype)
        bench = Bench(cfg)
        rows: list[dict] = []
        for test in tests:
            bar.describe(test)
            if test in ("forward_only", "fwd_bwd"):
                new = [measure(bench, test, cfg.batch, peak)]
            elif test == "batch_scaling":
                new = batch_scaling(bench, peak)
            elif test == "sync_overhead":
                new = [sync_overhead(bench, peak)]
            elif test == "packing":
                new = packing(bench, peak)
            else:
                new = ddp_overhead(bench, peak)
            rows.extend(new)
            if cfg.out:
                out = Path(cfg.out)
                out.parent.mkdir(parents=True, exist_ok=True)
                with open(out, "a") as fh:  # whole lines only: each row is written in one call
                    fh.write("".join(json.dumps(r) + "\n" for r in new))
            bar.advance()
    return rows


def format_table(rows: list[dict]) -> str:
    """A fixed-width table for the terminal."""
    cols = [
        ("test", "test", "{}"),
        ("strategy", "strategy", "{}"),
        ("world_size", "N", "{}"),
        ("batch", "batch", "{}"),
        ("seq_len", "seq", "{}"),
        ("samples_per_s", "samples/s", "{:.1f}"),
        ("tokens_per_s", "tokens/s", "{:.0f}"),
        ("flops_per_s", "GFLOP/s", None),
        ("mfu", "MFU", None),
        ("mfu_best", "best", None),
        ("mfu_cpu", "MFU(cpu)", None),
        ("mfu_now", "MFU(now)", None),
        ("arithmetic_intensity", "FLOP/B", "{:.1f}"),
        ("step_time_s", "step ms", None),
        ("step_time_iqr_s", "IQR ms", None),
        ("note", "note", "{}"),
    ]

    def fmt(key, spec, r):
        v = r.get(key)
        if key == "note":
            parts = []
            if "saturates_at" in r:
                parts.append(f"saturates at batch {r['saturates_at']}")
            if "sync_share" in r:
                parts.append(f"sync {100 * r['sync_share']:.1f}% of step")
            if "packing_speedup" in r:
                parts.append(f"packed {r['samples_per_row']:.2f} samples/row: {r['packing_speedup']:.2f}x samples/s")
            elif "samples_per_row" in r:
                parts.append(f"{r['layout']} {r['samples_per_row']:.2f} samples/row")
            if r.get("strategy") == "ddp":
                parts.append(f"comm {100 * r['comm_share']:.1f}% of step, all-reduce {1e3 * r['allreduce_s']:.2f} ms")
            return "; ".join(parts)
        if v is None:
            return "-"
        if key == "flops_per_s":
            return f"{v / 1e9:.2f}"
        if key in ("mfu", "mfu_best", "mfu_cpu", "mfu_now"):
            return f"{100 * v:.1f}%"
        if key in ("step_time_s", "step_time_iqr_s"):
            return f"{1e3 * v:.2f}"
        return spec.format(v)

    table = [[h for _, h, _ in cols]] + [[fmt(k, s, r) for k, _, s in cols] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in table]
    head = rows[0] if rows else {}
    title = (
        (
            f"model {head.get('model')} family {head.get('family')} on {head.get('device')} "
            f"({head.get('device_name')}, {head.get('threads')} threads), {head.get('dtype')}, "
            f"peak {head.get('peak_flops', 0) / 1e9:.1f} GFLOP/s"
        )
        if rows
        else "no rows"
    )
    return "\n".join([title, lines[0], "-" * len(lines[0]), *lines[1:]])
