"""`ddp_overhead`: the same training step in 1 process and in N processes under DDP (gloo on a CPU,
nccl/xccl with one accelerator per process), and a bare all-reduce of the gradient: the
communication share of the step."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from prism.bench.benchconfig import BenchConfig
from prism.bench.memory import check_memory
from prism.bench.rows import base_row, rates
from prism.bench.steps import Bench, autocast
from prism.core.errors import PrismError
from prism.parallel.env import free_port
from prism.train.lr_schedule import build_optimizer


def _ddp_worker(rank: int, world: int, cfg_dict: dict, port: int, outdir: str) -> None:
    """One rank: time the plain step, then the DDP step, then a bare all-reduce of the gradient size."""
    import torch  # noqa: PLC0415 lazy: torch
    import torch.distributed as dist  # noqa: PLC0415 lazy: torch
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415 lazy: torch

    from prism.parallel.config import BACKENDS  # noqa: PLC0415 lazy: torch
    from prism.runtime.device import synchronize  # noqa: PLC0415 lazy: torch

    cfg = BenchConfig(**{**cfg_dict, "batch_sizes": tuple(cfg_dict["batch_sizes"]), "compile": "none"})
    kind = cfg.device.split(":")[0]
    if kind != "cpu":  # one accelerator per rank
        getattr(torch, kind).set_device(rank)
        cfg = BenchConfig(**{**asdict(cfg), "device": f"{kind}:{rank}"})
    torch.set_num_threads(max(1, (cfg.threads or os.cpu_count() or 1) // world))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(BACKENDS[kind], rank=rank, world_size=world)
    try:
        bench = Bench(cfg)
        args = bench.batch(cfg.batch)
        # Every rank runs the plain step at the same time, so both figures see the same core contention.
        dist.barrier()
        plain = bench.time_steps(bench._train, args)
        dist.barrier()
        ddp = DDP(bench.model, device_ids=None if kind == "cpu" else [rank])
        opt = build_optimizer([p for p in ddp.parameters() if p.requires_grad], 1e-4)

        def ddp_step(tokens, modality, labels):
            with autocast(bench.device, cfg.dtype):
                loss = ddp(tokens, modality, labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        timed = bench.time_steps(ddp_step, args)
        n_grad = sum(p.numel() for p in bench.model.parameters() if p.requires_grad)
        flat = torch.zeros(n_grad, device=bench.device)
        dist.barrier()
        ar = []
        for i in range(cfg.warmup + cfg.repeats):
            t0 = time.perf_counter()
            dist.all_reduce(flat)
            synchronize(bench.device)
            if i >= cfg.warmup:
                ar.append(time.perf_counter() - t0)
        with open(Path(outdir) / f"rank{rank}.json", "w") as fh:
            json.dump(
                {
                    "plain": plain,
                    "ddp": timed,
                    "allreduce": ar,
                    "threads": torch.get_num_threads(),
                    "grad_params": n_grad,
                },
                fh,
            )
    finally:
        dist.destroy_process_group()


def ddp_overhead(bench: Bench, peak: float) -> list[dict]:
    """Rows for 1 process (the plain step, timed inside the N-process job) and N processes under DDP."""
    import torch.multiprocessing as mp  # noqa: PLC0415 lazy: torch

    from prism.parallel.config import BACKENDS  # noqa: PLC0415 lazy: torch

    cfg = bench.cfg
    kind = bench.device.type
    if kind != "cpu":
        import torch  # noqa: PLC0415 lazy: torch

        if getattr(torch, kind).device_count() < cfg.procs:
            raise PrismError(
                f"ddp_overhead with --procs {cfg.procs} on {kind} needs one device per process; "
                f"{getattr(torch, kind).device_count()} here: lower --procs"
            )
    else:
        check_memory(cfg, bench.device, cfg.batch * cfg.procs, True)
    cfg = BenchConfig(**{**asdict(cfg), "device": kind})  # each rank takes its own index of an accelerator
    flops, nbytes = bench.flops_and_bytes(cfg.batch, True)
    with tempfile.TemporaryDirectory(prefix="prism-ddp-") as tmp:
        cfg_dict = asdict(cfg)
        mp.spawn(_ddp_worker, args=(cfg.procs, cfg_dict, free_port(), tmp), nprocs=cfg.procs, join=True)
        results = [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(cfg.procs)]
    # A step ends when the slowest rank ends: take per-step maxima across ranks.
    plain = [max(vals) for vals in zip(*(r["plain"] for r in results))]
    ddp = [max(vals) for vals in zip(*(r["ddp"] for r in results))]
    ar = [max(vals) for vals in zip(*(r["allreduce"] for r in results))]
    rows = []
    for strategy, world, times in (("single", 1, plain), ("ddp", cfg.procs, ddp)):
        row = base_row(cfg, bench, "ddp_overhead", cfg.batch, peak)
        row.update(
            strategy=strategy,
            world_size=world,
            threads=results[0]["threads"],
            backend=BACKENDS[kind],
            procs_started=cfg.procs,
        )
        # Per-rank batch is fixed (weak scaling): N ranks process N x batch samples per step. The CPU ranks
        # share the machine's cores, so one rank's MFU is against its share of the peak, N ranks' against all
        # of it; on accelerators each rank has a device of its own.
        share = peak * world / cfg.procs if kind == "cpu" else peak * world
        row["peak_flops"] = share
        rates(row, times, flops * world, nbytes * world, share, cfg.batch * world)
        rows.append(row)
    t_plain, t_ddp = rows[0]["step_time_s"], rows[1]["step_time_s"]
    rows[1]["comm_share"] = max(0.0, 1.0 - t_plain / t_ddp)
    rows[1]["allreduce_s"] = statistics.median(ar)
    rows[1]["allreduce_share"] = statistics.median(ar) / t_ddp
    rows[1]["grad_bytes"] = 4 * results[0]["grad_params"]
    rows[0]["comm_share"] = 0.0
    return rows
