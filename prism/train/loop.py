"""`train(config)`: one run to its FLOP budget, measured, resumable, and honest about collapse.

The number of steps is `round(budget / (flops_per_sample * global_batch))`, with
`flops_per_sample` from the run's calibration JSON, or, when none is given,
counted in-process by `prism.model.accounting` on a meta-device copy (logged;
never a 6ND guess). Every rank weights its loss by its share of the global batch's
label tokens, so the gradient (and the logged loss) is the global batch's mean
whatever the layout: 1 process, DDP, FSDP or HSDP train the same curve.

SIGTERM (what PBS sends at the walltime and on preemption, before SIGKILL) ends the
run after the step in progress with a checkpoint at that step and exit status 143,
and no metrics.json: rerunning the command resumes from there, so a stopped job
loses under one step rather than a checkpoint interval. Every rank stops at the same
step: the flag rides on the all-reduce each step already makes.

Test-only hook: `PRISM_TEST_INJECT_NAN_AT_STEP=K` multiplies the loss of step K by
NaN (the collapse tests use it; nothing else should set it).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prism.errors import PrismError
from prism.train import runfiles
from prism.train.config import RunConfig

PROGRESS_SECONDS = 5.0
MAX_GRAD_NORM = 1.0
INJECT_NAN_ENV = "PRISM_TEST_INJECT_NAN_AT_STEP"
EVAL_BATCH = 64
COLLAPSED_EXIT = 3
STOPPED_EXIT = 128 + 15  # the shell's status for a SIGTERM-ended process


class _StopRequest:
    """Set by SIGTERM while installed; the loop reads it once per step (a handler must not do more)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> _StopRequest:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():  # handlers only install there
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), for the start-up figure."""
    try:
        with open("/proc/self/stat") as handle:
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _fmt_eta(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass
class Plan:
    """What the run derives from its config before the first step."""

    flops_per_sample: float
    flops_source: str
    tokens_per_sample: int
    seq_len: int
    budget_steps: int
    steps: int
    lr: float
    warmup: int
    eval_every: int
    checkpoint_every: int
    params: int
    params_total: int
    extra: dict[str, Any] = field(default_factory=dict)


def _calibration(config: RunConfig) -> dict | None:
    """The calibration record named by --calibration FILE or --calibration-dir DIR, checked."""
    from prism.isoflop.calibrate import calibration_filename, load_calibration

    if config.calibration_dir:
        return load_calibration(config.calibration_dir, config.family, config.backbone, config.variant,
                                config.regime)
    if not config.calibration:
        return None
    path = Path(config.calibration)
    if path.name == calibration_filename(config.family, config.backbone, config.variant, config.regime):
        return load_calibration(path.parent, config.family, config.backbone, config.variant, config.regime)
    record = runfiles.read_json(path)
    if record is None:
        raise PrismError(f"calibration {path} is missing or not JSON; make it with `prism isoflop calibrate`")
    for key in ("family", "backbone", "variant", "regime"):
        if record.get(key) != getattr(config, key):
            raise PrismError(f"calibration {path} is for {key} {record.get(key)!r}, the run is "
                             f"{getattr(config, key)!r}")
    if not isinstance(record.get("flops_per_sample"), (int, float)) or record["flops_per_sample"] <= 0:
        raise PrismError(f"calibration {path} has no positive flops_per_sample")
    return record


def input_fingerprint(config: RunConfig) -> dict[str, str | None]:
    """What a run's result depends on beyond its flags: the shards and the calibration.

    A rerun whose inputs changed (rebuilt data, a recalibrated model; e.g. Snakemake
    rerunning the job for that reason) starts over instead of resuming checkpoints
    that were trained on something else.
    """
    import hashlib
    import json

    manifest = Path(config.data) / "manifest.json"
    calibration = _calibration(config)
    return {
        "data_manifest": hashlib.sha256(manifest.read_bytes()).hexdigest() if manifest.is_file() else None,
        "calibration": (hashlib.sha256(json.dumps(calibration, sort_keys=True).encode()).hexdigest()
                        if calibration else None),
    }


def counted_flops(config: RunConfig, seq_len: int) -> tuple[float, bool]:
    """FLOPs of one sample's training step, counted on a meta-device model and cached.

    Counting imports torch's tracing stack (seconds of start-up), so the figure is kept
    in `flops.json` beside the peak cache, keyed by everything it depends on.
    """

    import torch

    from prism.bench.peak import cache_dir
    from prism.model import build_model
    from prism.model.accounting import count_training_flops

    import hashlib

    import prism.model

    model_src = hashlib.sha256()
    for source in sorted(Path(prism.model.__file__).parent.glob("*.py")):
        model_src.update(source.read_bytes())
    key = "|".join([config.family, config.backbone, config.variant, config.regime, str(seq_len),
                    str(torch.__version__), model_src.hexdigest()[:16]])
    path = cache_dir() / "flops.json"
    cache = runfiles.read_json(path) or {}
    if isinstance(cache.get(key), (int, float)) and cache[key] > 0:
        return float(cache[key]), True
    meta = build_model(config.family, config.backbone, config.variant, config.regime, device="meta")
    fps = float(count_training_flops(meta, seq_len))
    cache = runfiles.read_json(path) or {}
    cache[key] = fps
    try:
        from prism.atomic import write_json_atomic

        write_json_atomic(path, cache, indent=1, sort_keys=True)
    except OSError:
        pass  # a read-only cache only costs the recount
    return fps, False


def make_plan(config: RunConfig, model: Any, world_size: int) -> Plan:
    from prism.families import family_spec
    from prism.model.config import backbone_config
    from prism.train.schedule import default_lr, default_warmup

    spec = family_spec(config.family)
    seq_len = config.seq_len or spec.tokens_per_sample
    record = _calibration(config)
    if record is not None:
        fps = float(record["flops_per_sample"])
        tps = int(record.get("tokens_per_sample", seq_len))
        source = f"calibration {config.calibration or config.calibration_dir}"
        if tps != seq_len:
            if config.layout == "padded":
                raise PrismError(f"calibration for {config.run_id} counts {tps} tokens per sample but the "
                                 f"run's rows are {seq_len} long; recalibrate with that length or drop --seq-len")
            # A packed row of seq_len tokens costs about seq_len/tps calibrated samples (linear in length).
            fps, tps = fps * seq_len / tps, seq_len
            source += f", scaled linearly to {seq_len}-token packed rows"
    else:
        fps, cached = counted_flops(config, seq_len)
        tps = seq_len
        source = "counted in-process (prism.model.accounting; no calibration given)"
        log(f"[{config.run_id}] no --calibration: {fps:.4g} training FLOPs per sample counted in-process"
            + (" (cached)" if cached else ""))
    if fps <= 0:
        raise PrismError(f"{config.run_id}: {fps} FLOPs per sample (nothing trainable?); cannot plan steps")
    budget_steps = round(config.budget / (fps * config.global_batch))
    steps = config.max_steps if config.max_steps is not None else budget_steps
    if steps < 1:
        raise PrismError(f"{config.run_id}: budget {config.budget:g} buys {config.budget / fps:.3g} samples, "
                         f"less than one global batch of {config.global_batch}; raise --budget or lower "
                         "--global-batch")
    if config.global_batch % world_size:
        raise PrismError(f"--global-batch {config.global_batch} is not divisible by the {world_size} processes")
    # Counted here, not via prism.model.accounting: importing that pulls torch's tracing stack
    # (seconds of start-up). parameters() de-duplicates tied weights, as accounting does.
    params = list(model.parameters())
    d_model = backbone_config(config.backbone).d_model
    return Plan(
        flops_per_sample=fps, flops_source=source, tokens_per_sample=tps, seq_len=seq_len,
        budget_steps=budget_steps, steps=steps,
        lr=config.lr if config.lr is not None else default_lr(d_model),
        warmup=min(steps, config.warmup) if config.warmup is not None else default_warmup(steps),
        eval_every=config.eval_every or max(1, steps // 10),
        checkpoint_every=config.checkpoint_every or max(1, steps // 10),
        params=sum(p.numel() for p in params if p.requires_grad),
        params_total=sum(p.numel() for p in params),
    )


def _finished(metrics_path: Path, config: RunConfig) -> dict | None:
    existing = runfiles.read_json(metrics_path)
    if existing is None:
        return None
    status = existing.get("status")
    log(f"[{config.run_id}] {metrics_path} exists (status {status}): the run is finished, nothing to do; "
        "delete the run directory to train it again")
    return existing


def train(config: RunConfig) -> dict:
    """Train (or resume, or skip when finished) one run; returns the metrics.json content."""
    out = config.out_dir
    metrics_path = out / runfiles.METRICS
    if (done := _finished(metrics_path, config)) is not None:
        return done
    from prism.data.loader import ShardLoader  # noqa: F401  (fail early, before torch start-up work)
    from prism.dist.env import discover

    dist_env = discover()
    session = _Session(config, dist_env)
    try:
        return session.run()
    finally:
        session.close()


class _Session:
    """One process's part of a run: set-up, loop, files. Kept as an object so the loop reads linearly."""

    def __init__(self, config: RunConfig, dist_env: Any):
        self.config, self.env = config, dist_env
        self.is_main = dist_env.is_main
        self.perf: runfiles.JsonlWriter | None = None
        self.evals: runfiles.JsonlWriter | None = None

    def close(self) -> None:
        for writer in (self.perf, self.evals):
            if writer is not None:
                writer.close()
        from prism.dist.parallel import destroy

        destroy()

    # --- set-up ----------------------------------------------------------------------

    def _setup_torch(self) -> None:
        import torch

        from prism.device import resolve_device
        from prism.dist.parallel import ParallelConfig, local_device

        config, env = self.config, self.env
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
        self.threads = config.threads or max(1, cores // env.local_world_size)
        torch.set_num_threads(self.threads)
        device_type = resolve_device(config.device).type
        self.parallel = ParallelConfig.resolve(config.strategy, env.world_size, env.local_world_size,
                                               device_type, config.replicate, config.shard)
        self.device = local_device(device_type, env.local_rank)
        # No torch.use_deterministic_algorithms: it costs ~4 s of start-up, and the CPU kernels used
        # here are deterministic for a fixed thread count (what bit-identical resume relies on).
        self.parallel.init_process_group(env)

    def _build(self) -> None:
        import torch

        from prism.model import build_model

        config = self.config
        torch.manual_seed(config.seed)
        model = build_model(config.family, config.backbone, config.variant, config.regime, device=self.device)
        self.plan = make_plan(config, model, self.env.world_size)
        if config.grad_checkpoint:
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

            for i in range(0, len(model.blocks), config.grad_checkpoint):
                model.blocks[i] = checkpoint_wrapper(model.blocks[i])
        if config.compile != "none":
            for block in model.blocks:
                block.compile(dynamic=config.compile == "dynamic")
        self.model = self.parallel.wrap(model, self.device)
        # After wrapping: fully_shard replaces the parameters with sharded DTensor ones.
        self.params = model.trainable_parameters()
        self.eval_model = self.model.module if self.parallel.strategy == "ddp" else self.model
        from prism.train.schedule import build_optimizer, build_scheduler

        self.optimizer = build_optimizer(self.params, self.plan.lr)
        self.scheduler = build_scheduler(self.optimizer, self.plan.warmup, self.plan.steps)

    def _loaders(self) -> None:
        from prism.data.loader import ShardLoader

        config = self.config
        self.loader = ShardLoader(config.data, "train", config.global_batch, config.seed,
                                  rank=self.env.rank, world_size=self.env.world_size,
                                  layout=config.layout, seq_len=config.seq_len, family=config.family)
        self.eval_set = self._eval_subset()

    def _eval_subset(self) -> list[tuple[Any, Any, Any]]:
        """The first `eval_samples` held-out samples, on the device, kept for every evaluation."""
        config = self.config
        batches, seen = [], 0
        for batch in self.loader.eval_batches(min(EVAL_BATCH, config.eval_samples)):
            batches.append(self._to_device(batch))
            seen += int(batches[-1][0].shape[0])
            if seen >= config.eval_samples:
                break
        if not batches:
            raise PrismError(f"{config.data}: the eval split is empty; rebuild the shards")
        return batches

    def _to_device(self, batch: Any) -> tuple[Any, Any, Any]:
        import torch

        out = []
        for key in ("tokens", "modality", "labels"):
            value = batch[key]
            if not isinstance(value, torch.Tensor):
                value = torch.as_tensor(value)
            out.append(value.to(self.device, non_blocking=True))
        return out[0], out[1], out[2]

    # --- the run ---------------------------------------------------------------------

    def run(self) -> dict:

        from prism.train import checkpoint
        from prism.train.collapse import CollapseDetector

        config, env = self.config, self.env
        self.wall_start = time.perf_counter()
        self._setup_torch()
        self._build()
        self._loaders()
        plan = self.plan
        out = config.out_dir
        self.detector = CollapseDetector(warmup=plan.warmup)
        self.step, self.resumed_from, self.prior_wall, self.samples = 0, None, 0.0, 0
        self.last_eval: float | None = None
        self.first_eval: float | None = None
        self.last_eval_step = -1
        self.startup_s: float | None = None
        self.inputs = input_fingerprint(config)
        changed = self._inputs_changed(out)  # every rank decides alike, before rank 0 deletes anything
        if self.is_main:
            checkpoint.remove_partial(out)
            if changed:
                log(f"[{config.run_id}] {', '.join(changed)} changed since this run started: starting over")
                checkpoint.clear(out)
        latest = None if changed else checkpoint.latest(out)
        if latest is None and self.is_main:
            out.mkdir(parents=True, exist_ok=True)
            for name in (runfiles.PERF, runfiles.EVAL):
                (out / name).unlink(missing_ok=True)  # rows of a run that died before its first checkpoint
        self._check_config(out, steps_may_change=bool(changed))
        if latest is not None:
            step, loader_state, extra = checkpoint.load(latest, self.model, self.optimizer, self.scheduler,
                                                        self.device, env.rank)
            self.loader.load_state_dict(loader_state)
            self.detector.load_state_dict(extra["collapse"])
            self.step, self.resumed_from = step, step
            self.prior_wall, self.samples = extra["wall_s"], extra["samples"]
            self.first_eval, self.last_eval = extra["first_eval"], extra["last_eval"]
            self.last_eval_step = extra["last_eval_step"]
            if self.is_main:
                runfiles.truncate_after(out / runfiles.PERF, step)
                runfiles.truncate_after(out / runfiles.EVAL, step)
                log(f"[{config.run_id}] resuming from {latest} (step {step}/{plan.steps})")
        if self.is_main:
            config.to_yaml(out / runfiles.CONFIG, resolved=self._resolved())
        self.perf = runfiles.JsonlWriter(out / runfiles.PERF, self.is_main)
        self.evals = runfiles.JsonlWriter(out / runfiles.EVAL, self.is_main)
        if self.is_main:
            log(f"[{config.run_id}] {plan.steps} steps x {config.global_batch} samples "
                f"({plan.flops_per_sample:.4g} FLOPs/sample, {plan.flops_source}); lr {plan.lr:.3g}, "
                f"warm-up {plan.warmup}; {self.parallel.describe()} on {self.device}, {self.threads} threads")
        if self.step == 0:
            self._evaluate()
        self.model.train()
        with _StopRequest() as stop:
            status, reason = self._loop(stop)
        if status == "stopped":
            return self._stopped(reason)
        if status == "ok":
            if self.last_eval_step != self.step:
                self._evaluate()
            if self.step % plan.checkpoint_every:
                self._checkpoint()
        return self._finish(status, reason)

    def _inputs_changed(self, out: Path) -> list[str]:
        """The inputs (see `input_fingerprint`) that differ from those the run directory was started on."""
        path = out / runfiles.CONFIG
        old = runfiles.resolved_of(path).get("inputs") if path.exists() else None
        if not old:
            return []
        return [name for name, digest in self.inputs.items() if old.get(name) != digest]

    def _check_config(self, out: Path, steps_may_change: bool = False) -> None:
        """A rerun must describe the same run as the one whose checkpoints it finds.

        Its steps may differ only when it starts over on new inputs (a new calibration
        changes FLOPs per sample, hence steps).
        """
        from prism.train.config import RunConfig

        path = out / runfiles.CONFIG
        if not path.exists():
            return
        old = RunConfig.from_yaml(path)
        diff = self.config.result_mismatch(old)
        old_steps = (runfiles.resolved_of(path)).get("steps")
        if old_steps is not None and old_steps != self.plan.steps and not steps_may_change:
            diff.append(f"steps: {old_steps} -> {self.plan.steps}")
        if diff:
            raise PrismError(f"{out} holds a different run ({'; '.join(diff)}); use another --out or delete "
                             f"{out} to start over")

    def _resolved(self) -> dict[str, Any]:
        import torch

        plan = self.plan
        return {
            "run_id": self.config.run_id, "steps": plan.steps, "budget_steps": plan.budget_steps,
            "flops_per_sample": plan.flops_per_sample, "flops_source": plan.flops_source,
            "tokens_per_sample": plan.tokens_per_sample, "seq_len": plan.seq_len, "lr": plan.lr,
            "warmup": plan.warmup, "eval_every": plan.eval_every, "checkpoint_every": plan.checkpoint_every,
            "params": plan.params, "params_total": plan.params_total, "strategy": self.parallel.strategy,
            "world_size": self.parallel.world_size, "mesh": [self.parallel.replicate, self.parallel.shard],
            "device": str(self.device), "threads": self.threads, "torch_version": str(torch.__version__),
            "inputs": self.inputs,
        }

    def _context(self) -> dict[str, Any]:
        import torch

        config = self.config
        return {
            "run_id": config.run_id, "family": config.family, "backbone": config.backbone,
            "variant": config.variant, "regime": config.regime, "layout": config.layout,
            "strategy": self.parallel.strategy, "world_size": self.parallel.world_size,
            "mesh": f"{self.parallel.replicate}x{self.parallel.shard}", "device": self.device.type,
            "threads": self.threads, "global_batch": config.global_batch,
            "torch_version": str(torch.__version__), "compile": config.compile,
            "grad_checkpoint": config.grad_checkpoint, "git_rev": runfiles.git_rev(),
        }

    def _counters(self, step: int) -> dict[str, Any]:
        """Units are samples (padded) or rows (packed): what global_batch counts and FLOPs are per."""
        units = step * self.config.global_batch
        return {"samples": self.samples, "tokens": units * self.plan.tokens_per_sample,
                "flops": units * self.plan.flops_per_sample}

    def _evaluate(self) -> float:
        import torch

        from prism.model.tokenizer import IGNORE

        t0 = time.perf_counter()
        self.eval_model.eval()
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        count = torch.zeros((), dtype=torch.float64, device=self.device)
        with torch.no_grad():
            for tokens, modality, labels in self.eval_set:
                n = (labels != IGNORE).sum()
                total += self.eval_model(tokens, modality, labels).double() * n
                count += n
        self.eval_model.train()
        loss = float(total / count)
        self.last_eval, self.last_eval_step = loss, self.step
        if self.first_eval is None:
            self.first_eval = loss
        n_samples = sum(int(b[0].shape[0]) for b in self.eval_set)
        self.evals.write({"step": self.step, **self._counters(self.step), "loss": loss,
                          "eval_samples": n_samples, "eval_s": time.perf_counter() - t0,
                          "run_id": self.config.run_id})
        return loss

    def _checkpoint(self) -> None:
        from prism.train import checkpoint

        extra = {"collapse": self.detector.state_dict(), "wall_s": self._wall(), "samples": self.samples,
                 "first_eval": self.first_eval, "last_eval": self.last_eval,
                 "last_eval_step": self.last_eval_step}
        checkpoint.save(self.config.out_dir, self.step, self.model, self.optimizer, self.scheduler,
                        self.loader.state_dict(), extra, self.device, self.is_main)

    def _wall(self) -> float:
        return self.prior_wall + time.perf_counter() - self.wall_start

    def _loop(self, stop: _StopRequest) -> tuple[str, str | None]:
        import torch
        import torch.distributed as dist

        from prism.device import max_memory_allocated, synchronize
        from prism.model.tokenizer import IGNORE

        config, plan = self.config, self.plan
        world = self.env.world_size
        try:
            inject = int(os.environ.get(INJECT_NAN_ENV) or 0)
        except ValueError:
            raise PrismError(f"{INJECT_NAN_ENV}={os.environ[INJECT_NAN_ENV]!r} is not a step number "
                             "(it is a test hook; unset it)") from None
        distributed = self.parallel.uses_process_group and world > 1
        batches = iter(self.loader)
        context = self._context() if self.is_main else {}
        if self.resumed_from is not None:
            context["resumed_from"] = self.resumed_from
        peak = None
        win_steps = win_samples = win_time = win_wait = win_cpu = 0.0
        prog_steps = prog_samples = prog_time = 0.0
        last_progress = time.perf_counter()
        first_step_logged = False
        mfu = None
        while self.step < plan.steps:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                batch = next(batches)
            except StopIteration:  # the loader's epoch ended: start the next one
                batches = iter(self.loader)
                batch = next(batches)
            tokens, modality, labels = self._to_device(batch)
            t1 = time.perf_counter()
            if distributed:
                n_local = (labels != IGNORE).sum().to(torch.float64)
                n_global = n_local.clone()
                pending = dist.all_reduce(n_global, async_op=True)
            loss = self.model(tokens, modality, labels)
            step = self.step + 1
            if inject == step:
                loss = loss * float("nan")
            if distributed:
                pending.wait()
                share = (n_local / n_global).to(loss.dtype)
                (loss * (share * world)).backward()
                # One collective for the logged loss and (packed rows) the samples of the global batch.
                # ... and whether any rank was asked to stop, so that all stop after the same step.
                stats = torch.stack([loss.detach().double() * share, n_local.new_tensor(batch["n_samples"]),
                                     n_local.new_tensor(float(stop.requested))])
                dist.all_reduce(stats)
                global_loss, batch_samples, stopping = stats[0], stats[1], bool(stats[2] > 0)
            else:
                loss.backward()
                global_loss, batch_samples, stopping = loss.detach(), batch["n_samples"], stop.requested
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, MAX_GRAD_NORM)
            if hasattr(grad_norm, "full_tensor"):
                grad_norm = grad_norm.full_tensor()
            loss_value, grad_value = global_loss.item(), grad_norm.item()
            reason = self.detector.check(step, loss_value, grad_value)
            if reason is not None:
                self.optimizer.zero_grad(set_to_none=True)
                self.step = step
                if self.is_main:
                    log(f"[{config.run_id}] COLLAPSED at step {step}: {reason}")
                    self.perf.write({"step": step, "loss": loss_value, "grad_norm": grad_value,
                                     "collapsed": reason, **context})
                return "collapsed", reason
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            synchronize(self.device)
            t2 = time.perf_counter()
            self.step = step
            self.samples += int(batch_samples)
            win_samples += int(batch_samples)
            win_steps += 1
            win_time += t2 - t0
            win_wait += t1 - t0
            win_cpu += time.process_time() - c0
            prog_steps, prog_samples, prog_time = prog_steps + 1, prog_samples + int(batch_samples), \
                prog_time + t2 - t0
            if self.is_main and not first_step_logged:
                first_step_logged = True
                self.startup_s = process_age_s()
            last = step == plan.steps
            if self.is_main and (step % config.log_every == 0 or step == 1 or last):
                if peak is None:
                    from prism.bench.peak import peak_flops

                    peak = peak_flops(self.device.type, "fp32")
                units_per_s = win_steps * config.global_batch / win_time  # rows when packed
                sps = win_samples / win_time
                achieved = units_per_s * plan.flops_per_sample
                row = {
                    "step": step, "loss": loss_value, "grad_norm": grad_value,
                    "lr": self.scheduler.get_last_lr()[0],
                    "samples_per_s": sps, "tokens_per_s": units_per_s * plan.tokens_per_sample,
                    "step_time_s": win_time / win_steps, "data_wait_s": win_wait / win_steps,
                    "flops_per_s": achieved, "mfu": achieved / (peak * world),
                    "peak_mem_bytes": max_memory_allocated(self.device), **self._counters(step),
                    **context,
                }
                if self.device.type == "cpu":
                    # CPU seconds per step and thread: on a shared machine the wall clock also counts the
                    # time other tenants held the cores (exact with one thread; see prism.bench.throughput).
                    cpu = win_cpu / win_steps / self.threads
                    row["cpu_time_s"] = cpu
                    row["mfu_cpu"] = config.global_batch * plan.flops_per_sample / cpu / (peak * world) \
                        if cpu > 0 else None
                if step == 1:
                    row["startup_s"] = self.startup_s
                self.perf.write(row)
                mfu = row["mfu"]
                win_steps = win_samples = win_time = win_wait = win_cpu = 0.0
            now = time.perf_counter()
            if self.is_main and (now - last_progress >= PROGRESS_SECONDS or step == 1 or last):
                # Progress for people reading a job log; independent of --log-every.
                eta = (plan.steps - step) * prog_time / prog_steps
                log(f"[{config.run_id}] step {step}/{plan.steps} loss {loss_value:.4f} "
                    f"{prog_samples / prog_time:.1f} samples/s"
                    + (f" mfu {mfu:.1%}" if mfu is not None else "") + f" ETA {_fmt_eta(eta)}")
                last_progress = now
                prog_steps = prog_samples = prog_time = 0.0
            if step % plan.eval_every == 0 and not last:
                self._evaluate()  # before stopping: a resumed run does not evaluate this step again
            if stopping and not last:
                return "stopped", f"SIGTERM during step {step}"
            if step % plan.checkpoint_every == 0:
                self._checkpoint()
        return "ok", None

    def _stopped(self, reason: str | None) -> dict:
        """A checkpoint at the step reached, and no metrics.json: the run is unfinished, not failed."""
        self._checkpoint()
        if self.is_main:
            log(f"[{self.config.run_id}] stopped ({reason}): checkpoint at step {self.step}/{self.plan.steps}; "
                "rerun the same command to resume")
        return {"status": "stopped", "reason": reason, "step": self.step, "run_id": self.config.run_id}

    def _finish(self, status: str, reason: str | None) -> dict:
        config, plan = self.config, self.plan
        metrics = {
            "status": status, "run_id": config.run_id, "family": config.family, "backbone": config.backbone,
            "variant": config.variant, "regime": config.regime, "budget": config.budget,
            "final_eval_loss": self.last_eval if status == "ok" else None,
            "initial_eval_loss": self.first_eval, "last_eval_loss": self.last_eval,
            "params": plan.params, "params_total": plan.params_total,
            "flops_per_sample": plan.flops_per_sample, "flops_source": plan.flops_source,
            "tokens_per_sample": plan.tokens_per_sample, "global_batch": config.global_batch,
            "steps": self.step, "planned_steps": plan.steps, "budget_steps": plan.budget_steps,
            **self._counters(self.step), "lr": plan.lr, "warmup": plan.warmup,
            "strategy": self.parallel.strategy, "world_size": self.parallel.world_size,
            "device": self.device.type, "wall_s": self._wall(), "resumed_from": self.resumed_from,
            "git_rev": runfiles.git_rev(),
        }
        if status != "ok":
            metrics["reason"], metrics["step"] = reason, self.step
        if self.is_main:
            runfiles.write_json_atomic(config.out_dir / runfiles.METRICS, metrics)
            if status == "ok":
                from prism.train import checkpoint

                checkpoint.retire(config.out_dir)
                log(f"[{config.run_id}] done: {self.step} steps, eval loss {self.first_eval:.4f} -> "
                    f"{self.last_eval:.4f}, {metrics['flops']:.3g} FLOPs, {metrics['wall_s']:.1f} s")
        return metrics


def exit_code(metrics: dict) -> int:
    """0 for a finished run; COLLAPSED_EXIT for a collapsed one (also on a rerun); STOPPED_EXIT
    for one that SIGTERM stopped (resumable)."""
    return {"ok": 0, "stopped": STOPPED_EXIT}.get(metrics.get("status"), COLLAPSED_EXIT)
