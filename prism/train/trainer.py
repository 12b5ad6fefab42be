"""`Trainer`: one process's part of a run, from its FLOP budget to metrics.json.

`train()` reads top to bottom: prepare the run directory (resume or start over),
evaluate at step 0, `train_step()` until the budget's steps, then one final
evaluation over the held-out split and the metrics. Deciding *when* to act lives
with the helpers: `PerfMeter` (perf rows, progress lines), `Evaluator`
(evaluations), `CollapseDetector` (a run gone bad), the checkpoint interval here.

Every rank weights its loss by its share of the global batch's label tokens, so the
gradient (and the logged loss) is the global batch's mean whatever the layout:
1 process, DDP, FSDP or HSDP train the same curve.

SIGTERM (what PBS sends at the walltime and on preemption, before SIGKILL) ends the
run after the step in progress with a checkpoint at that step and exit status 143,
and no metrics.json: rerunning the command resumes from there. Every rank stops at
the same step: the flag rides on the all-reduce each step already makes.

Test-only hook: `PRISM_TEST_INJECT_NAN_AT_STEP=K` multiplies the loss of step K by
NaN (the collapse tests use it; nothing else should set it).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from prism.atomic import write_json_atomic
from prism.data.loader import ShardLoader
from prism.data.manifest import read_manifest
from prism.data.options import resolve
from prism.data.order import data_order
from prism.device import max_memory_allocated, resolve_device, synchronize
from prism.dist.env import DistEnv, discover
from prism.dist.parallel import ParallelConfig, destroy, local_device
from prism.errors import PrismError
from prism.model import build_model, kernels
from prism.peak import peak_flops
from prism.revision import git_rev
from prism.run_metrics import RunMetrics
from prism.tokenizer import IGNORE
from prism.train import precision, preflight
from prism.train.accumulate import micro_steps
from prism.train.budget import find_calibration, step_budget
from prism.train.collapse import CollapseDetector
from prism.train.config import RunConfig, compile_mode
from prism.train.evaluator import EvalResult, Evaluator, split_rows
from prism.train.identity import run_identity
from prism.train.meter import PerfMeter
from prism.train.rundir import checkpoint, resume, runfiles
from prism.train.rundir import finished as finished_run
from prism.train.rundir.lock import RunLock
from prism.train.schedule import build_optimizer, build_scheduler
from prism.train.spikes import eval_warnings
from prism.train.startup import StartupClock, slowest
from prism.train.timing import JobClock
from prism.train.trackers import Tracking, open_tracking

MAX_GRAD_NORM = 1.0
INJECT_NAN_ENV = "PRISM_TEST_INJECT_NAN_AT_STEP"
COLLAPSED_EXIT = 3
# Steps of a job left out of its steady-state throughput under torch.compile: the first compiles the
# blocks forward and backward, the second may recompile them (automatic dynamic shapes, guards).
COMPILE_WARMUP_STEPS = 2
STOPPED_EXIT = 128 + 15  # the shell's status for a SIGTERM-ended process


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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


# Process start to the trainer's modules imported (the interpreter, torch, prism): a rank's first phase.
IMPORTS_S = process_age_s()


def open_loader(config: RunConfig, env: DistEnv):
    """This rank's training batches: the preloaded split, or streamed from the shards (`config.loader`)."""
    common = dict(rank=env.rank, world_size=env.world_size, layout=config.layout, seq_len=config.seq_len)
    kind = resolve(read_manifest(config.data), "train", config.loader, config.preload_max_mb, config.data)
    if kind == "preload":
        return ShardLoader(config.data, "train", config.global_batch, config.seed, family=config.family, **common)
    from prism.data.stream import StreamLoader  # noqa: PLC0415 lazy: only streamed runs need it

    warn = log if env.is_main else None
    return StreamLoader(
        config.data,
        "train",
        config.global_batch,
        config.seed,
        family=config.family,
        workers=config.workers,
        shuffle_buffer=config.shuffle_buffer,
        warn=warn,
        **common,
    )


def run_order(config: RunConfig, world_size: int) -> str | None:
    """The streamed split's order beyond the seed (None when preloaded): part of the run's inputs."""
    settings = (config.loader, config.preload_max_mb, config.seed, world_size, config.workers, config.shuffle_buffer)
    return data_order(config.data, *settings)


def _inject_nan_step() -> int:
    try:
        return int(os.environ.get(INJECT_NAN_ENV) or 0)
    except ValueError:
        raise PrismError(
            f"{INJECT_NAN_ENV}={os.environ[INJECT_NAN_ENV]!r} is not a step number (it is a test hook; unset it)"
        ) from None


class StopRequest:
    """Set by SIGTERM while installed; the loop reads it once per step (a handler must not do more)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():  # handlers only install there
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


@dataclass(frozen=True)
class StepResult:
    """One optimizer step, as every rank agrees on it."""

    step: int
    loss: float
    grad_norm: float
    samples: int  # real samples of the global batch
    stopping: bool  # some rank was asked to stop
    collapsed: str | None = None  # why the run collapsed at this step (no update was made)


class Trainer:
    """Set-up in the constructor; `train_step()` is one step; `train()` is the run."""

    def __init__(self, config: RunConfig, env: DistEnv):
        self.config, self.env, self.is_main = config, env, env.is_main
        self.wall_start = time.perf_counter()
        self.clock = JobClock(process_age_s())  # this job's wall time by phase (metrics.json `time`)
        self.startup = StartupClock(IMPORTS_S)  # its seconds to the first step by phase (metrics.json `startup`)
        self.startup_record: dict[str, float | None] | None = None
        self._setup_process()
        # Rows of a forward and backward, and how many make this rank's share of a step (accumulation).
        self.micro_rows, self.accum_steps = micro_steps(config.global_batch, env.world_size, config.micro_batch)
        with self.startup.phase("model_build"):
            self._build()
        with self.startup.phase("loader"):
            self.loader = open_loader(config, env)
        self.evaluator = Evaluator(
            self.loader.eval_batches,
            self.to_device,
            self.budget.eval_every,
            self.budget.steps,
            config.eval_samples,
            config.final_eval_samples,
            max_rows=self.micro_rows,
            autocast=lambda: precision.autocast(self.device, self.precision),
            mod=config.spec.vocab.mod,
        )
        self.detector = CollapseDetector(warmup=self.budget.warmup)
        self.distributed = self.parallel.uses_process_group and env.world_size > 1
        self.inject_nan_at = _inject_nan_step()
        # Counters a checkpoint carries (see `state`).
        self.step, self.samples, self.prior_wall = 0, 0, 0.0
        self.resumed_from: int | None = None
        self.first_eval: float | None = None
        self.last_eval: float | None = None
        self.last_eval_step = -1
        self.warnings: list[str] = []
        self.collapse_reason: str | None = None
        self.started_from: str | None = None  # "RUNDIR@STEP" of --init-from
        self.startup_s: float | None = None
        self.perf = runfiles.JsonlWriter(config.out_dir / runfiles.PERF, enabled=False)
        self.evals = runfiles.JsonlWriter(config.out_dir / runfiles.EVAL, enabled=False)
        self.tracking = Tracking()  # TensorBoard / W&B, opened with the logs (prism.train.trackers)
        self.first_step = 0  # where this job's training started (after a resume or --init-from)
        self.meter: PerfMeter | None = None
        self.clock.add("setup", time.perf_counter() - self.wall_start)
        if self.device.type == "cpu" and self.precision == "fp32":  # steps that may take the fused kernels
            with self.clock.phase("kernel_build"), self.startup.phase("kernel_build"):  # else built by the
                kernels.prepare()  # first evaluation, and booked there

    # --- set-up ----------------------------------------------------------------------

    def _setup_process(self) -> None:
        config, env = self.config, self.env
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
        self.threads = config.threads or max(1, cores // env.local_world_size)
        torch.set_num_threads(self.threads)
        device_type = resolve_device(config.device).type
        self.parallel = ParallelConfig.resolve(
            config.strategy, env.world_size, env.local_world_size, device_type, config.replicate, config.shard
        )
        self.device = local_device(device_type, env.local_rank)
        self.precision = precision.resolve(config.precision, device_type)  # fp32 or bf16
        self.compile = compile_mode(config.compile, device_type)  # none, static or dynamic
        # No torch.use_deterministic_algorithms: it costs seconds of start-up, and the CPU kernels
        # used here are deterministic for a fixed thread count (what bit-identical resume relies on).
        with self.startup.phase("process_group"):
            self.parallel.init_process_group(env)

    def _build(self) -> None:
        config = self.config
        torch.manual_seed(config.seed)
        model = build_model(
            config.family, config.backbone, config.variant, config.regime, device=self.device, spec=config.spec
        )
        self.budget = step_budget(config, model, self.env.world_size, log=log)
        if config.grad_checkpoint:
            # Imported here: only runs with activation checkpointing pay for this module.
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper  # noqa: PLC0415 lazy: torch.distributed.algorithms._checkpoint.checkpoint_wrapper

            for i in range(0, len(model.blocks), config.grad_checkpoint):
                model.blocks[i] = checkpoint_wrapper(model.blocks[i])
        model.compile_blocks(self.compile)
        self.model = self.parallel.wrap(model, self.device, precision.fsdp_policy(self.precision))
        # After wrapping: fully_shard replaces the parameters with sharded DTensor ones.
        self.params = model.trainable_parameters()
        self.eval_model = self.model.module if self.parallel.strategy == "ddp" else self.model
        self.optimizer = build_optimizer(self.params, self.budget.lr)
        self.scheduler = build_scheduler(self.optimizer, self.budget.schedule)

    def to_device(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return tuple(
            torch.as_tensor(batch[key]).to(self.device, non_blocking=True)  # type: ignore[return-value]
            for key in ("tokens", "modality", "labels")
        )

    def close(self) -> None:
        if hasattr(self.loader, "close"):
            self.loader.close()  # the stream's worker processes
        self.tracking.close()
        self.perf.close()
        self.evals.close()
        destroy()

    # --- one step --------------------------------------------------------------------

    def train_step(self, batch: dict, stop_requested: bool = False) -> StepResult:
        """Forward, backward, clip and update on one global batch (this rank's slice of it).

        A collapsed step (non-finite loss or gradients, a spike, vanished gradients)
        makes no update and is reported in the result; the counters move on either way.
        """
        tokens, modality, labels = self.to_device(batch)
        segments = batch.get("segment_ids")  # packed rows: samples attend only within themselves
        if segments is not None:
            segments = torch.as_tensor(segments).to(self.device, non_blocking=True)
        if self.distributed:
            n_local = (labels != IGNORE).sum().to(torch.float64)
            n_global = n_local.clone()
            pending = dist.all_reduce(n_global, async_op=True)
        step = self.step + 1
        if self.accum_steps > 1:
            if self.distributed:
                pending.wait()
            total = n_global if self.distributed else (labels != IGNORE).sum().to(torch.float64)
            loss = self._accumulate(tokens, modality, labels, segments, total, step)
            share = loss.new_tensor(1.0)  # the micro-steps' losses are weighted already
        else:
            with precision.autocast(self.device, self.precision):
                loss = self.model(tokens, modality, labels, segments)
            if self.inject_nan_at == step:
                loss = loss * float("nan")
        if self.distributed:
            if self.accum_steps == 1:
                pending.wait()
                share = (n_local / n_global).to(loss.dtype)
                (loss * (share * self.env.world_size)).backward()
            # One collective for the logged loss, the samples of the global batch (packed rows vary)
            # and whether any rank was asked to stop, so that all stop after the same step.
            stats = torch.stack(
                [
                    loss.detach().double() * share,
                    n_local.new_tensor(batch["n_samples"]),
                    n_local.new_tensor(float(stop_requested)),
                ]
            )
            dist.all_reduce(stats)
            global_loss, samples, stopping = stats[0], int(stats[1]), bool(stats[2] > 0)
        else:
            if self.accum_steps == 1:
                loss.backward()
            global_loss, samples, stopping = loss.detach(), int(batch["n_samples"]), stop_requested
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, MAX_GRAD_NORM)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        loss_value, grad_value = global_loss.item(), grad_norm.item()
        collapsed = self.detector.check(step, loss_value, grad_value)
        if collapsed is None:
            self.optimizer.step()
            self.scheduler.step()
            self.samples += samples
        self.optimizer.zero_grad(set_to_none=True)
        synchronize(self.device)
        self.step = step
        return StepResult(step, loss_value, grad_value, samples, stopping, collapsed)

    def _accumulate(
        self, tokens: torch.Tensor, modality: torch.Tensor, labels: torch.Tensor, segments, total, step: int
    ) -> torch.Tensor:
        """Forward and backward of this rank's rows in `accum_steps` micro-batches; the summed gradient is
        the whole batch's (each micro-batch's mean loss weighted by its share of the `total` label tokens
        of the global batch, times the ranks a gradient is averaged over). Returns the weighted loss sum,
        this rank's part of the global batch's loss. Only the last micro-step syncs gradients."""
        scale = self.env.world_size if self.distributed else 1
        parts = list(split_rows((tokens, modality, labels), self.micro_rows, self.config.spec.vocab.mod))
        rows = [0] + [int(t.shape[0]) for t, _, _ in parts]
        weighted = torch.zeros((), dtype=torch.float64, device=tokens.device)
        for j, (tok, mod, lab) in enumerate(parts):
            last = j == len(parts) - 1
            seg = None if segments is None else segments[sum(rows[: j + 1]) : sum(rows[: j + 2])]
            with self._sync(last):
                with precision.autocast(self.device, self.precision):
                    loss = self.model(tok, mod, lab, seg)
                if self.inject_nan_at == step:
                    loss = loss * float("nan")
                share = ((lab != IGNORE).sum().to(torch.float64) / total).to(loss.dtype)
                (loss * (share * scale)).backward()
            weighted = weighted + loss.detach().double() * share.double()
        return weighted

    def _sync(self, last: bool):
        """Where the gradients of a micro-step are not synchronised: DDP's `no_sync` until the last;
        under hsdp the all-reduce across replicas waits for the last (the reduce-scatter within a
        replica runs every micro-step, keeping the gradients sharded)."""
        if not self.distributed or self.parallel.strategy not in ("ddp", "hsdp"):
            return nullcontext()
        if self.parallel.strategy == "ddp":
            return nullcontext() if last else self.model.no_sync()
        self.model.set_requires_all_reduce(last)
        return nullcontext()

    # --- the run ---------------------------------------------------------------------

    def train(self) -> RunMetrics:
        """Train (or resume) to the budget's steps; returns the metrics (status ok, collapsed or stopped)."""
        config, budget = self.config, self.budget
        with self.clock.phase("setup"):
            calibration = find_calibration(config)
            self.inputs = resume.input_fingerprint(config, calibration, run_order(config, self.env.world_size))
            start = resume.prepare(config, self.inputs, budget.steps, self.is_main, log=log)
            if start.checkpoint is not None:
                with self.startup.phase("resume"):
                    self.resume(start.checkpoint)
            elif config.init_from:
                with self.startup.phase("resume"):
                    self.start_from(resume.init_checkpoint(Path(config.init_from), config.init_step))
            self.first_step = self.step
            self._open_logs()
        if self.step == 0:
            with self.startup.phase("first_eval"):
                self.evaluate()
        self.model.train()
        with StopRequest() as stop:
            outcome = self.run_steps(stop)
        if outcome == "stopped":
            self.checkpoint()
            if self.is_main:
                log(
                    f"[{config.run_id}] stopped (SIGTERM during step {self.step}): checkpoint at step "
                    f"{self.step}/{budget.steps}; rerun the same command to resume"
                )
            return self.metrics("stopped", f"SIGTERM during step {self.step}")
        final = None
        if outcome == "ok":
            final = self.evaluate(final=True)
            if not self.checkpoint_due(self.step):
                self.checkpoint()
        return self.finish(outcome, final)

    def run_steps(self, stop: StopRequest) -> str:
        """Steps until the budget ("ok"), a collapse ("collapsed") or SIGTERM ("stopped")."""
        meter = self.meter = self._meter()
        context = self._context()
        batches = self._batches()
        while self.step < self.budget.steps:
            t0, c0 = time.perf_counter(), time.process_time()
            batch = next(batches)
            t1 = time.perf_counter()
            result = self.train_step(batch, stop.requested)
            if result.collapsed is not None:
                if self.is_main:
                    log(f"[{self.config.run_id}] COLLAPSED at step {result.step}: {result.collapsed}")
                    self.perf.write(
                        {
                            "step": result.step,
                            "loss": result.loss,
                            "grad_norm": result.grad_norm,
                            "collapsed": result.collapsed,
                            **context,
                        }
                    )
                self.collapse_reason = result.collapsed
                return "collapsed"
            t2 = time.perf_counter()
            if not self.startup.closed:
                self.close_startup(t1 - t0, t2 - t1)
            meter.update(result.samples, t2 - t0, t1 - t0, time.process_time() - c0)
            self.clock.add("data", t1 - t0)
            self.clock.add("step", t2 - t1)
            self._log_step(result, meter, context)
            last = result.step == self.budget.steps
            if self.evaluator.due(result.step):
                self.evaluate()  # before stopping: a resumed run does not evaluate this step again
            if result.stopping and not last:
                return "stopped"
            if self.checkpoint_due(result.step):
                self.checkpoint()
        return "ok"

    def close_startup(self, first_batch_s: float, first_step_s: float) -> None:
        """The job's first step is done: its start-up by phase, the slowest rank's (every rank calls this
        after the same step, so the one all-reduce meets)."""
        self.startup.close(first_batch_s, first_step_s, process_age_s())
        record = self.startup.record()
        self.startup_record = slowest(record, self._reduce_max) if self.distributed else record

    def _reduce_max(self, values: list[float]) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float32, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.tolist()

    def _batches(self) -> Iterator[dict]:
        """The loader's batches, epoch after epoch."""
        while True:
            yield from self.loader

    def _meter(self) -> PerfMeter:
        return PerfMeter(
            steps=self.budget.steps,
            log_every=self.config.log_every,
            global_batch=self.config.global_batch,
            flops_per_unit=self.budget.flops_per_sample,
            tokens_per_unit=self.budget.tokens_per_sample,
            world_size=self.parallel.world_size,
            threads=self.threads,
            cpu=self.device.type == "cpu",
            peak_flops=lambda: peak_flops(self.device.type, self.precision),
            warmup_steps=COMPILE_WARMUP_STEPS if self.compile != "none" else 1,
        )

    def _log_step(self, result: StepResult, meter: PerfMeter, context: dict[str, Any]) -> None:
        """The perf row and the progress line this step is due (rank 0 only)."""
        if not self.is_main:
            return
        if self.startup_s is None and result.step == (self.resumed_from or 0) + 1:
            self.startup_s = process_age_s()
        if meter.should_log(result.step):
            row = {
                "step": result.step,
                "loss": result.loss,
                "grad_norm": result.grad_norm,
                "lr": self.scheduler.get_last_lr()[0],
                **meter.row(),
                "peak_mem_bytes": max_memory_allocated(self.device),
                **self.counters(result.step),
                **context,
            }
            if result.step == 1:
                row["startup_s"] = self.startup_s
            if result.step == self.first_step + 1 and self.startup_record is not None:
                row["startup"] = self.startup_record  # the job's start-up by phase (the probe reads it)
            self.perf.write(row)
            self.tracking.train(row)
        line = meter.progress(result.step, result.loss, self.config.run_id)
        if line is not None:
            log(line)

    # --- evaluation, checkpoints, files ----------------------------------------------

    def evaluate(self, final: bool = False) -> EvalResult:
        """Evaluate now and log the row; `final`: the loss at the budget, over the held-out split."""
        with self.clock.phase("eval"):
            result = self.evaluator.evaluate(self.eval_model, final=final)
        self.last_eval, self.last_eval_step = result.loss, self.step
        if self.first_eval is None:
            self.first_eval = result.loss
        row = {
            "step": self.step,
            **self.counters(self.step),
            "loss": result.loss,
            "eval_samples": result.samples,
            "eval_s": result.seconds,
            "run_id": self.config.run_id,
        }
        if final:
            row.update(loss_se=result.loss_se, final=True)
        self.evals.write(row)
        self.tracking.eval(row)
        return result

    def checkpoint(self) -> None:
        with self.clock.phase("checkpoint"):
            path = checkpoint.save(
                self.config.out_dir,
                self.step,
                self.model,
                self.optimizer,
                self.scheduler,
                self.loader.state_dict(),
                self.state(),
                self.device,
                self.is_main,
            )
            if self.is_main and self.step in self.config.keep_steps:
                checkpoint.keep(path)

    def checkpoint_due(self, step: int) -> bool:
        return step % self.budget.checkpoint_every == 0 or step in self.config.keep_steps

    def state(self) -> dict[str, Any]:
        """The trainer's counters, as a checkpoint carries them."""
        return {
            "collapse": self.detector.state_dict(),
            "wall_s": self.wall_s(),
            "samples": self.samples,
            "first_eval": self.first_eval,
            "last_eval": self.last_eval,
            "last_eval_step": self.last_eval_step,
            "warnings": self.warnings,
            "started_from": self.started_from,
            "precision": self.precision,
        }

    def _restore(self, step: int, loader_state: Any, extra: dict[str, Any]) -> None:
        trained_in = extra.get("precision", "fp32")  # checkpoints from before the setting are fp32
        if trained_in != self.precision:
            raise PrismError(
                f"[{self.config.run_id}] the checkpoint at step {step} was trained in {trained_in}, this run computes "
                f"in {self.precision} (--precision {self.config.precision} on {self.device.type}): pass --precision "
                f"{trained_in} to continue it, or delete the run directory to train it again"
            )
        self.loader.load_state_dict(loader_state)
        self.detector.load_state_dict(extra["collapse"])
        self.step = step
        self.prior_wall, self.samples = extra["wall_s"], extra["samples"]
        self.first_eval, self.last_eval = extra["first_eval"], extra["last_eval"]
        self.last_eval_step = extra["last_eval_step"]
        self.warnings = list(extra.get("warnings", []))
        self.started_from = extra.get("started_from")

    def resume(self, path: Path) -> None:
        step, loader_state, extra = checkpoint.load(
            path, self.model, self.optimizer, self.scheduler, self.device, self.env.rank
        )
        self._restore(step, loader_state, extra)
        self.resumed_from = step
        if self.is_main:
            resume.truncate_logs(self.config.out_dir, step)
            log(f"[{self.config.run_id}] resuming from {path} (step {step}/{self.budget.steps})")

    def start_from(self, path: Path) -> None:
        """Continue another run's trajectory from its checkpoint, under this run's schedule.

        Weights, optimizer state, data position, RNG and counters come from the
        checkpoint, so a run that branches off at step S continues exactly as a run
        of this config that never stopped at S would (given the same warm-up and lr).
        """
        source = Path(self.config.init_from)
        resume.check_trajectory(self.config, source, self.inputs, self.budget.lr, self.budget.warmup)
        # A kept checkpoint that went bad is rewritten by the run that kept it: without it, that run
        # is no longer finished and trains again from its own start (prism.train.rundir.finished).
        fix = (
            f"delete it and rerun the run that wrote it ({source}; in a study, rerun the workflow), "
            "which trains it again from its own start, then this run"
        )
        step, loader_state, extra = checkpoint.load(
            path, self.model, self.optimizer, self.scheduler, self.device, self.env.rank, fix=fix
        )
        if step >= self.budget.steps:
            raise PrismError(
                f"--init-from {path} is at step {step}, not before this run's last step {self.budget.steps}"
            )
        self._restore(step, loader_state, extra)
        # The learning rate of the next update is this run's schedule's, not the source run's.
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * self.budget.schedule.factor(step)
        self.scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]
        self.started_from = f"{source}@{step}"
        if self.is_main:
            resume.copy_logs(source, self.config.out_dir, step)
            log(f"[{self.config.run_id}] starting from {path} (step {step}/{self.budget.steps})")

    def _open_logs(self) -> None:
        config, out = self.config, self.config.out_dir
        if self.is_main:
            config.to_yaml(out / runfiles.CONFIG, resolved=self._resolved())
            log(
                f"[{config.run_id}] {self.budget.steps} steps x {config.global_batch} samples "
                f"({self.budget.flops_per_sample:.4g} FLOPs/sample, {self.budget.flops_source}); "
                f"lr {self.budget.lr:.3g}, warm-up {self.budget.warmup}; {self.parallel.describe()} on "
                f"{self.device}, {self.threads} threads"
            )
        self.perf = runfiles.JsonlWriter(out / runfiles.PERF, self.is_main)
        self.evals = runfiles.JsonlWriter(out / runfiles.EVAL, self.is_main)
        self.tracking = open_tracking(config, self.step, self._resolved(), enabled=self.is_main)

    def wall_s(self) -> float:
        return self.prior_wall + time.perf_counter() - self.wall_start

    def counters(self, step: int) -> dict[str, Any]:
        """Units are samples (padded) or rows (packed): what global_batch counts and FLOPs are per."""
        units = step * self.config.global_batch
        return {
            "samples": self.samples,
            "tokens": units * self.budget.tokens_per_sample,
            "flops": units * self.budget.flops_per_sample,
        }

    def _resolved(self) -> dict[str, Any]:
        return {
            "run_id": self.config.run_id,
            **self.budget.to_dict(),
            "strategy": self.parallel.strategy,
            "world_size": self.parallel.world_size,
            "mesh": [self.parallel.replicate, self.parallel.shard],
            "device": str(self.device),
            "precision": self.precision,
            "threads": self.threads,
            "torch_version": str(torch.__version__),
            "inputs": self.inputs,
            # Every value that decides what it computes, defaults included: a rerun under another is another run.
            "identity": run_identity(self.config),
        }

    def _context(self) -> dict[str, Any]:
        """The keys every perf row repeats, so a row read alone says what it measured."""
        config = self.config
        context = {
            "run_id": config.run_id,
            "family": config.family,
            "backbone": config.backbone,
            "variant": config.variant,
            "regime": config.regime,
            "layout": config.layout,
            "strategy": self.parallel.strategy,
            "world_size": self.parallel.world_size,
            "mesh": f"{self.parallel.replicate}x{self.parallel.shard}",
            "device": self.device.type,
            "threads": self.threads,
            "global_batch": config.global_batch,
            "torch_version": str(torch.__version__),
            "compile": self.compile,
            "precision": self.precision,
            "grad_checkpoint": config.grad_checkpoint,
            "git_rev": git_rev(),
        }
        if self.resumed_from is not None:
            context["resumed_from"] = self.resumed_from
        return context

    def metrics(self, status: str, reason: str | None = None, final: EvalResult | None = None) -> RunMetrics:
        config, budget = self.config, self.budget
        return RunMetrics(
            status=status,
            run_id=config.run_id,
            family=config.family,
            backbone=config.backbone,
            variant=config.variant,
            regime=config.regime,
            budget=config.budget,
            loss=final.loss if final else None,
            loss_se=final.loss_se if final else None,
            eval_samples=final.samples if final else None,
            final_eval_loss=final.loss if final else None,
            initial_eval_loss=self.first_eval,
            last_eval_loss=self.last_eval,
            epochs=self.samples / self.loader.state_dict()["samples"],
            warnings=list(self.warnings),
            params=budget.params,
            params_total=budget.params_total,
            flops_per_sample=budget.flops_per_sample,
            flops_source=budget.flops_source,
            tokens_per_sample=budget.tokens_per_sample,
            global_batch=config.global_batch,
            steps=self.step,
            planned_steps=budget.steps,
            budget_steps=budget.budget_steps,
            **self.counters(self.step),
            lr=budget.lr,
            warmup=budget.warmup,
            schedule=budget.schedule.kind,
            strategy=self.parallel.strategy,
            world_size=self.parallel.world_size,
            device=self.device.type,
            precision=self.precision,
            wall_s=self.wall_s(),
            resumed_from=self.resumed_from,
            started_from=self.started_from,
            git_rev=git_rev(),
            reason=reason,
            step=None if status == "ok" else self.step,
            time=self.time_record(),
            startup=self.startup_record,
        )

    def time_record(self) -> dict[str, Any]:
        """This job's wall time by phase and the FLOPs it trained (prism.train.timing)."""
        trained = (self.step - self.first_step) * self.config.global_batch * self.budget.flops_per_sample
        record = self.clock.record(trained_flops=trained, steps=self.step - self.first_step)
        record["threads"] = self.threads
        record["precision"] = self.precision  # the dtype of the peak every MFU is against
        if self.device.type == "cpu":  # the cached peak every MFU is against (measured at the first perf row)
            record["peak_flops"] = peak_flops(self.device.type, self.precision) * self.parallel.world_size
        if self.meter is not None:
            record.update(self.meter.steady())
        return record

    def finish(self, status: str, final: EvalResult | None) -> RunMetrics:
        """metrics.json (last, atomically: its presence means finished); an ok run retires its checkpoints."""
        if self.is_main:
            with self.clock.phase("finish"):
                spikes = eval_warnings(runfiles.read_jsonl(self.config.out_dir / runfiles.EVAL))
            self.warnings += [w for w in spikes if w not in self.warnings]
            for warning in spikes:
                log(f"[{self.config.run_id}] warning: {warning}")
        metrics = self.metrics(status, self.collapse_reason, final)
        if self.is_main:
            write_json_atomic(self.config.out_dir / runfiles.METRICS, metrics.to_json(), indent=2, sort_keys=True)
            if metrics.ok:
                checkpoint.retire(self.config.out_dir)
                finished_run.keep(self.config.out_dir, self.config, self.inputs, metrics.to_json())
                se = f" +- {metrics.loss_se:.4f}" if metrics.loss_se is not None else ""
                log(
                    f"[{self.config.run_id}] done: {self.step} steps, eval loss {self.first_eval:.4f} -> "
                    f"{metrics.loss:.4f}{se} ({metrics.eval_samples} samples), {metrics.flops:.3g} FLOPs, "
                    f"{metrics.wall_s:.1f} s"
                )
        return metrics


def finished(config: RunConfig) -> RunMetrics | None:
    """The metrics of a run whose metrics.json exists (nothing to do), else None.

    An ok run missing a kept checkpoint is not finished (see prism.train.rundir.finished).
    """
    path = config.out_dir / runfiles.METRICS
    existing = runfiles.read_json(path)
    if existing is None:
        return None
    if existing.get("status") == "ok" and finished_run.missing_kept(config.out_dir, config, existing.get("steps")):
        return None
    finished_run.check_identity(config.out_dir, config)
    log(
        f"[{config.run_id}] {path} exists (status {existing.get('status')}): the run is finished, nothing to "
        "do; delete the run directory to train it again"
    )
    return RunMetrics.from_json(existing)


def train(config: RunConfig, retrain: bool | None = None, wait_lock: bool | None = None) -> RunMetrics:
    """Train (or resume, or skip when finished, or restore an unchanged finished run); returns its metrics.

    Nothing in the run directory is touched until the settings, the inputs and the
    memory have been checked (prism.train.rundir.finished, prism.train.preflight); then rank 0
    holds the directory's lock (prism.train.rundir.lock) for the rest of the run.
    """
    retrain = finished_run.retrain_requested(retrain)
    finished_run.check_same_run(config.out_dir, config)
    if not retrain and (done := finished(config)) is not None:
        return done
    env = discover()
    # A missing calibration stops here.
    inputs = resume.input_fingerprint(config, find_calibration(config), run_order(config, env.world_size))
    preflight.check(config, env.world_size)
    with RunLock(config.out_dir, wait=wait_lock) if env.is_main else nullcontext():
        if env.is_main:
            if retrain:
                finished_run.forget(config.out_dir, config)
            else:
                if (done := finished(config)) is not None:
                    return done  # another trainer finished it while this one waited
                if (restored := finished_run.restore(config.out_dir, config, inputs)) is not None:
                    return RunMetrics.from_json(restored)
                if (config.out_dir / runfiles.METRICS).exists():  # finished, but a kept checkpoint is gone
                    finished_run.forget(config.out_dir, config, why="a kept checkpoint is missing")
        trainer = Trainer(config, env)
        try:
            return trainer.train()
        finally:
            trainer.close()


def exit_code(metrics: RunMetrics) -> int:
    """0 for a finished run; COLLAPSED_EXIT for a collapsed one (also on a rerun); STOPPED_EXIT
    for one that SIGTERM stopped (resumable)."""
    return {"ok": 0, "stopped": STOPPED_EXIT}.get(metrics.status, COLLAPSED_EXIT)
