"""`PerfMeter`: the throughput figures of `perf.jsonl` and the progress line of the job log.

Two windows over the same step timings: one since the last perf row (every
`log_every` steps, and at the first and last step), one since the last progress
line (for people reading a job log, independent of `log_every`: at every
`progress_percent` of the steps, so a short run's log still shows its course, and
at least every `progress_s` seconds, so a slow one's shows it is alive). The meter
only measures and decides *when*; the trainer writes.

A third window, `steady`, runs over the whole job after its first `warmup_steps`
steps (torch.compile's compilation, the allocator's first requests): the job's
steady-state throughput and MFU, which metrics.json records beside the peak and its
dtype. Every MFU is against the measured peak of the precision the run computes in
(`prism.runtime.peak`: bf16's on an accelerator in mixed precision, many times fp32's).

Units are what `global_batch` counts: samples (padded) or rows (packed); FLOPs
and tokens are per unit, `samples` counts real samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROGRESS_SECONDS = 60.0
PROGRESS_PERCENT = 5.0


@dataclass
class Window:
    """Sums over the steps since the window was last reset."""

    steps: int = 0
    samples: int = 0
    time_s: float = 0.0
    wait_s: float = 0.0
    cpu_s: float = 0.0

    def add(self, samples: int, step_s: float, wait_s: float, cpu_s: float) -> None:
        self.steps += 1
        self.samples += samples
        self.time_s += step_s
        self.wait_s += wait_s
        self.cpu_s += cpu_s


def format_eta(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class PerfMeter:
    """Measures steps; says when to log and what; formats the progress line."""

    def __init__(
        self,
        *,
        steps: int,
        log_every: int,
        global_batch: int,
        flops_per_unit: float,
        tokens_per_unit: int,
        world_size: int,
        threads: int,
        cpu: bool,
        peak_flops: Callable[[], float],
        warmup_steps: int = 1,
        progress_s: float = PROGRESS_SECONDS,
        progress_percent: float = PROGRESS_PERCENT,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.steps, self.log_every, self.global_batch = steps, log_every, global_batch
        self.flops_per_unit, self.tokens_per_unit = flops_per_unit, tokens_per_unit
        self.world_size, self.threads, self.cpu = world_size, threads, cpu
        self._peak_flops, self._peak = peak_flops, None  # measured (or read from its cache) on first use
        self.progress_s, self.clock = progress_s, clock
        self.progress_steps = max(1, round(steps * progress_percent / 100))
        self.log_window, self.progress_window, self.steady_window = Window(), Window(), Window()
        self.warmup_steps, self.seen = warmup_steps, 0
        self.last_progress = clock()
        self.mfu: float | None = None

    def update(self, samples: int, step_s: float, wait_s: float, cpu_s: float) -> None:
        """One finished step: its real samples, wall seconds, seconds waiting for data, CPU seconds."""
        self.log_window.add(samples, step_s, wait_s, cpu_s)
        self.progress_window.add(samples, step_s, wait_s, cpu_s)
        self.seen += 1
        if self.seen > self.warmup_steps:
            self.steady_window.add(samples, step_s, wait_s, cpu_s)

    def should_log(self, step: int) -> bool:
        return step % self.log_every == 0 or step == 1 or step == self.steps

    @property
    def peak(self) -> float:
        if self._peak is None:
            self._peak = self._peak_flops()
        return self._peak

    def row(self) -> dict[str, Any]:
        """The throughput part of a perf.jsonl row over the log window, which it then resets."""
        w = self.log_window
        units_per_s = w.steps * self.global_batch / w.time_s
        achieved = units_per_s * self.flops_per_unit
        peak = self.peak * self.world_size
        row: dict[str, Any] = {
            "samples_per_s": w.samples / w.time_s,
            "tokens_per_s": units_per_s * self.tokens_per_unit,
            "step_time_s": w.time_s / w.steps,
            "data_wait_s": w.wait_s / w.steps,
            "flops_per_s": achieved,
            "mfu": achieved / peak,
            "peak_flops": peak,
        }
        if self.cpu:
            # CPU seconds per step and thread: on a shared machine the wall clock also counts the
            # time other tenants held the cores (exact with one thread).
            cpu_s = w.cpu_s / w.steps / self.threads
            row["cpu_time_s"] = cpu_s
            row["mfu_cpu"] = self.global_batch * self.flops_per_unit / cpu_s / peak if cpu_s > 0 else None
        self.mfu = row["mfu"]
        self.log_window = Window()
        return row

    def steady(self) -> dict[str, Any]:
        """The job's steady state (after its warm-up steps): FLOP/s, MFU and the peak; empty before any."""
        w = self.steady_window
        if w.steps == 0 or w.time_s <= 0:
            return {}
        achieved = w.steps * self.global_batch * self.flops_per_unit / w.time_s
        peak = self.peak * self.world_size
        return {
            "steady_steps": w.steps,
            "steady_step_s": w.time_s / w.steps,
            "steady_flops_per_s": achieved,
            "steady_mfu": achieved / peak,
            "peak_flops": peak,
        }

    def progress(self, step: int, loss: float, run_id: str) -> str | None:
        """The progress line when one is due (every few percent or progress_s, the first and last step), else None."""
        now = self.clock()
        if not (
            now - self.last_progress >= self.progress_s
            or step % self.progress_steps == 0
            or step == 1
            or step == self.steps
        ):
            return None
        w = self.progress_window
        eta = (self.steps - step) * w.time_s / w.steps
        line = (
            f"[{run_id}] step {step}/{self.steps} ({step / self.steps:.0%}) loss {loss:.4f} "
            f"{w.samples / w.time_s:.1f} samples/s"
            + (f" mfu {self.mfu:.1%}" if self.mfu is not None else "")
            + f" ETA {format_eta(eta)}"
        )
        self.last_progress, self.progress_window = now, Window()
        return line
