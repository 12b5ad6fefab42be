"""`Trainer`: one process's part of a run, from its FLOP budget to metrics.json.

`train()` reads top to bottom: prepare the run directory (resume or start over),
evaluate at step 0, `train_step()` until the budget's steps, then one final
evaluation over the held-out split and the metrics. Deciding *when* to act lives
with the helpers: `PerfMeter` (perf rows, progress lines), `Evaluator`
(evaluations), `CollapseDetector` (a run gone bad), the checkpoint interval.
This module is the set-up, the step and the loop; checkpoints and resuming are
`checkpointing.py`, what the run writes `runrecord.py`, its batches `batches.py`, and
the command's life around it (finished runs, the lock, the exit status) `lifecycle.py`.

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
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from prism.core.errors import PrismError
from prism.core.run_metrics import RunMetrics
from prism.core.tokenizer import IGNORE
from prism.model import build_model, kernels
from prism.parallel.config import ParallelConfig, destroy, local_device
from prism.parallel.env import DistEnv
from prism.runtime.device import max_memory_allocated, resolve_device, synchronize
from prism.runtime.peak import peak_flops
from prism.train import precision
from prism.train.accumulate import micro_steps
from prism.train.batches import open_loader, run_order
from prism.train.budget import find_calibration, step_budget
from prism.train.checkpointing import Checkpointing
from prism.train.collapse import CollapseDetector
from prism.train.config import RunConfig, compile_mode
from prism.train.evaluator import Evaluator, split_rows
from prism.train.lr_schedule import build_optimizer, build_scheduler
from prism.train.meter import PerfMeter
from prism.train.process import StopRequest, log, process_age_s
from prism.train.rundir import resume, runfiles
from prism.train.runrecord import RunRecording
from prism.train.startup import StartupClock, slowest
from prism.train.timing import JobClock
from prism.train.trackers import Tracking

MAX_GRAD_NORM = 1.0
INJECT_NAN_ENV = "PRISM_TEST_INJECT_NAN_AT_STEP"
# Steps of a job left out of its steady-state throughput under torch.compile: the first compiles the
# blocks forward and backward, the second may recompile them (automatic dynamic shapes, guards).
COMPILE_WARMUP_STEPS = 2


# Process start to the trainer's modules imported (the interpreter, torch, prism): a rank's first phase.
IMPORTS_S = process_age_s()


def _inject_nan_step() -> int:
    try:
        return int(os.environ.get(INJECT_NAN_ENV) or 0)
    except ValueError:
        raise PrismError(
            f"{INJECT_NAN_ENV}={os.environ[INJECT_NAN_ENV]!r} is not a step number (it is a test hook; unset it)"
        ) from None


@dataclass(frozen=True)
class StepResult:
    """One optimizer step, as every rank agrees on it."""

    step: int
    loss: float
    grad_norm: float
    samples: int  # real samples of the global batch
    stopping: bool  # some rank was asked to stop
    collapsed: str | None = None  # why the run collapsed at this step (no update was made)


class Trainer(Checkpointing, RunRecording):
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
        kernels.reset_path()  # metrics.json's kernel_path: this run's evaluations and steps only

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

    def close(self, ended: bool = True) -> None:
        """Release the loader, the records and the process group; `ended`: training returned on every rank
        (else an error is on its way out, and no rank waits for the others)."""
        if hasattr(self.loader, "close"):
            self.loader.close()  # the stream's worker processes
        self.tracking.close()
        self.perf.close()
        self.evals.close()
        destroy(barrier=ended)

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
            order = run_order(config, self.env.world_size, self.loader.manifest)  # the manifest its loader read
            self.inputs = resume.input_fingerprint(config, calibration, order)
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

    def wall_s(self) -> float:
        return self.prior_wall + time.perf_counter() - self.wall_start
