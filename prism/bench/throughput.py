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
peak (`prism.peak`). Two more views for a shared machine, where other
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
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from prism.dist.env import free_port
from prism.errors import PrismError
from prism.model.config import backbone_config
from prism.peak import peak_now
from prism.progress import Bar
from prism.revision import git_rev
from prism.tokenizer import PAD
from prism.train.config import compile_mode
from prism.train.schedule import build_optimizer

TESTS: tuple[str, ...] = ("forward_only", "batch_scaling", "fwd_bwd", "sync_overhead", "ddp_overhead")
# Tests outside `all`: they need shards (`--data`).
DATA_TESTS: tuple[str, ...] = ("packing",)
DEFAULT_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


@dataclass
class BenchConfig:
    """One `prism bench throughput` invocation."""

    test: str = "fwd_bwd"
    model: str = "30k"
    seq_len: int = 128
    family: str = "text_image"
    variant: str = "BASE"
    regime: str = "e2e"
    batch: int = 16
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    device: str = "cpu"
    dtype: str = "fp32"
    warmup: int = 3
    repeats: int = 10
    max_seconds: float = 10.0  # per measurement: fewer repeats (at least 3) for slow steps
    procs: int = 2  # ddp_overhead
    compile: str = "none"  # torch.compile the model: `prism train`'s modes (inductor fuses the element-wise ops)
    threads: int | None = None  # CPU threads (None: torch's default, the cores)
    data: str | None = None  # shard directory for `packing`
    out: str | None = None
    extra: dict = field(default_factory=dict)

    def tests(self) -> list[str]:
        if self.test == "all":
            return list(TESTS)
        if self.test not in TESTS + DATA_TESTS:
            raise PrismError(f"unknown test {self.test!r}; valid: {', '.join(TESTS + DATA_TESTS)}, all")
        return [self.test]


# --- small helpers -------------------------------------------------------------------------------------------


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


def _autocast(device, dtype: str):
    import torch  # noqa: PLC0415 lazy: torch

    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype={"bf16": torch.bfloat16, "fp16": torch.float16}[dtype])


def _bytes_mode():
    """A dispatch mode summing the bytes of every FLOP-counted op's tensor inputs and outputs."""
    import torch  # noqa: PLC0415 lazy: torch
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415 lazy: torch
    from torch.utils._pytree import tree_flatten  # noqa: PLC0415 lazy: torch
    from torch.utils.flop_counter import flop_registry  # noqa: PLC0415 lazy: torch

    class BytesMode(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func._overloadpacket in flop_registry:
                flat, _ = tree_flatten((args, kwargs or {}, out))
                self.bytes += sum(t.numel() * t.element_size() for t in flat if isinstance(t, torch.Tensor))
            return out

    return BytesMode()


# --- memory check for the real sizes -------------------------------------------------------------------------


def _available_bytes(device) -> int | None:
    from prism.device import memory_capacity  # noqa: PLC0415 lazy: torch

    cap = memory_capacity(device)
    if device.type == "cpu":
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    return min(cap, avail) if cap else avail
        except OSError:
            pass
    return cap


def required_bytes(cfg: BenchConfig, batch: int, train: bool) -> int:
    """A lower bound on the memory one step needs: weights (+ grads + AdamW state) + a rough activation term."""
    from prism.model.prism import build_model  # noqa: PLC0415 lazy: torch

    model = build_model(cfg.family, cfg.model, cfg.variant, cfg.regime, device="meta")
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    bc = model.backbone_config
    act_bytes = 2 if cfg.dtype != "fp32" else 4
    # Weights fp32 (autocast keeps fp32 masters); training adds grads and two Adam moments.
    weights = 4 * total + (3 * 4 * trainable if train else 0)
    # Per token and layer: ~16 d_model-wide tensors saved for backward (norms, q/k/v, MLP) in training.
    acts = batch * cfg.seq_len * bc.n_layers * bc.d_model * act_bytes * (16 if train else 2)
    logits = batch * cfg.seq_len * bc.vocab_size * 4 * (3 if train else 1)
    return weights + acts + logits


def check_memory(cfg: BenchConfig, device, batch: int, train: bool) -> None:
    need = required_bytes(cfg, batch, train)
    have = _available_bytes(device)
    if have is not None and need > 0.9 * have:
        raise PrismError(
            f"--model {cfg.model} at batch {batch}, seq_len {cfg.seq_len} ({'training' if train else 'forward'}, "
            f"{cfg.dtype}) needs at least {need / 2**30:.1f} GiB but {device} has {have / 2**30:.1f} GiB available; "
            f"use a smaller --model/--batch/--seq-len or a device with more memory"
        )


# --- the measured steps --------------------------------------------------------------------------------------


class Bench:
    """One model on one device with helpers to time its forward and training steps."""

    def __init__(self, cfg: BenchConfig):
        import torch  # noqa: PLC0415 lazy: torch

        from prism.device import resolve_device  # noqa: PLC0415 lazy: torch
        from prism.model.prism import build_model  # noqa: PLC0415 lazy: torch

        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        torch.manual_seed(0)
        self.model = build_model(cfg.family, cfg.model, cfg.variant, cfg.regime, device=self.device)
        # The optimizer `prism train` uses, so a bench step is a training step.
        self.opt = (
            build_optimizer(self.model.trainable_parameters(), 1e-4) if self.model.trainable_parameters() else None
        )
        self._flops: dict[tuple, tuple[int, int]] = {}
        # The timed calls go through `step_model`; FLOPs are always counted on the plain model's meta copy.
        self.compile = compile_mode(cfg.compile, self.device.type)
        self.step_model = (
            torch.compile(self.model, dynamic=self.compile == "dynamic") if self.compile != "none" else self.model
        )

    def batch(self, batch: int):
        from prism.model.accounting import example_batch  # noqa: PLC0415 lazy: torch

        return example_batch(self.model, self.cfg.seq_len, batch, device=self.device)

    def _fwd(self, tokens, modality, labels):
        import torch  # noqa: PLC0415 lazy: torch

        with torch.no_grad(), _autocast(self.device, self.cfg.dtype):
            return self.step_model(tokens, modality, labels)

    def _train(self, tokens, modality, labels, segment_ids=None):
        with _autocast(self.device, self.cfg.dtype):
            loss = self.step_model(tokens, modality, labels, segment_ids)
        loss.backward()
        if self.opt is not None:
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        return loss

    def step_fn(self, train: bool):
        return self._train if train else self._fwd

    def flops_and_bytes(self, batch: int, train: bool) -> tuple[int, int]:
        """FLOPs and kernel operand bytes of one step at this batch, counted once per shape."""
        import torch  # noqa: PLC0415 lazy: torch
        from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415 lazy: torch

        from prism.model.accounting import example_batch, meta_copy  # noqa: PLC0415 lazy: torch

        key = (batch, train)
        if key not in self._flops:
            # Counted on a meta copy: the fused CPU attention kernel is invisible to FlopCounterMode,
            # and the meta device allocates nothing (so real sizes count cheaply).
            meta = meta_copy(self.model)
            tokens, modality, labels = example_batch(meta, self.cfg.seq_len, batch, device="meta")
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.cfg.dtype)
            if dtype is not None:  # autocast runs the matmuls in the low precision: count bytes at that width
                meta = meta.to(dtype)
            with FlopCounterMode(display=False) as counter, _bytes_mode() as bm:
                with torch.set_grad_enabled(train):
                    loss = meta(tokens, modality, labels)
                    if train and loss.requires_grad:
                        loss.backward()
            self._flops[key] = (int(counter.get_total_flops()), int(bm.bytes))
        return self._flops[key]

    def time_steps(self, fn, batch_args, on_step=None) -> list[float]:
        """Warm up, then time individual synchronised steps (at least 3, up to `repeats` or `max_seconds`)."""
        from prism.device import synchronize  # noqa: PLC0415 lazy: torch

        started = time.perf_counter()
        for _ in range(self.cfg.warmup):
            fn(*batch_args)
            if time.perf_counter() - started > self.cfg.max_seconds / 2:
                break  # slow steps warm up within one or two calls; keep `--test all` bounded
        synchronize(self.device)
        times: list[float] = []
        self.cpu_times: list[float] = []
        started = time.perf_counter()
        while len(times) < self.cfg.repeats:
            t0, c0 = time.perf_counter(), time.process_time()
            out = fn(*batch_args)
            if on_step is not None:
                on_step(out)
            synchronize(self.device)
            times.append(time.perf_counter() - t0)
            self.cpu_times.append(time.process_time() - c0)
            if len(times) >= 3 and time.perf_counter() - started > self.cfg.max_seconds:
                break
        return times


def _base_row(cfg: BenchConfig, bench: Bench, test: str, batch: int, peak: float) -> dict:
    import torch  # noqa: PLC0415 lazy: torch

    from prism.device import device_name  # noqa: PLC0415 lazy: torch

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


def _rates(
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


def measure(bench: Bench, test: str, batch: int, peak: float) -> dict:
    """One row of forward_only / fwd_bwd at `batch`."""
    train = test != "forward_only"
    check_memory(bench.cfg, bench.device, batch, train)
    args = bench.batch(batch)
    flops, nbytes = bench.flops_and_bytes(batch, train)
    before = peak_now(bench.device, bench.cfg.dtype)
    times = bench.time_steps(bench.step_fn(train), args)
    now = max(before, peak_now(bench.device, bench.cfg.dtype))
    row = _rates(_base_row(bench.cfg, bench, test, batch, peak), times, flops, nbytes, peak, batch, bench.cpu_times)
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
    from prism.device import synchronize  # noqa: PLC0415 lazy: torch

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
    row = _rates(_base_row(cfg, bench, "sync_overhead", batch, peak), total_s, flops, nbytes, peak, batch)
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
    from prism.device import synchronize  # noqa: PLC0415 lazy: torch

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
        row = _rates(
            _base_row(cfg, bench, "packing", cfg.batch, peak), times[lay], flops, nbytes, peak, cfg.batch, cpu[lay]
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


# --- ddp_overhead: N real processes -------------------------------------------------------------------------


def _ddp_worker(rank: int, world: int, cfg_dict: dict, port: int, outdir: str) -> None:
    """One rank: time the plain step, then the DDP step, then a bare all-reduce of the gradient size."""
    import torch  # noqa: PLC0415 lazy: torch
    import torch.distributed as dist  # noqa: PLC0415 lazy: torch
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415 lazy: torch

    from prism.device import synchronize  # noqa: PLC0415 lazy: torch
    from prism.dist.parallel import BACKENDS  # noqa: PLC0415 lazy: torch

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
            with _autocast(bench.device, cfg.dtype):
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

    from prism.dist.parallel import BACKENDS  # noqa: PLC0415 lazy: torch

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
        row = _base_row(cfg, bench, "ddp_overhead", cfg.batch, peak)
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
        _rates(row, times, flops * world, nbytes * world, share, cfg.batch * world)
        rows.append(row)
    t_plain, t_ddp = rows[0]["step_time_s"], rows[1]["step_time_s"]
    rows[1]["comm_share"] = max(0.0, 1.0 - t_plain / t_ddp)
    rows[1]["allreduce_s"] = statistics.median(ar)
    rows[1]["allreduce_share"] = statistics.median(ar) / t_ddp
    rows[1]["grad_bytes"] = 4 * results[0]["grad_params"]
    rows[0]["comm_share"] = 0.0
    return rows


# --- driver --------------------------------------------------------------------------------------------------


def run(cfg: BenchConfig) -> list[dict]:
    """Run the requested tests; rows are appended to `cfg.out` (JSON lines) as each test finishes."""
    from prism.peak import peak_flops  # noqa: PLC0415 looked up per run: tests fix prism.peak.peak_flops

    tests = cfg.tests()
    backbone_config(cfg.model)  # a bad name fails before anything is built
    if cfg.seq_len < 1 or cfg.batch < 1 or any(b < 1 for b in cfg.batch_sizes):
        raise PrismError("--seq-len, --batch and --batch-sizes must be positive")
    from prism.device import resolve_device  # noqa: PLC0415 lazy: torch

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
