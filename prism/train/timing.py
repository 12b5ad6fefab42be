"""Where a training job's wall time goes, and what a study's jobs add up to.

A study of small models is mostly overhead if it is anything: start-up, set-up,
evaluation and checkpoints are paid per job, the steps per FLOP. So every job
records its wall seconds by phase in its metrics.json (`time`), with the FLOPs it
trained itself (a branch or a resumed run does not count its prefix again) and
its start and end (Unix seconds), and `study_timing` adds a study's records up:
the phases' shares, the training FLOP/s over the span the jobs ran in, and how
busy the cores were over that span. Pure Python: the summary reads it without torch.

Phases: `startup` (process start to the trainer: imports, CLI, checks), `setup`
(model, budget, loader, the evaluation subset, the run directory, a resume's
checkpoint load), `kernel_build` (compiling the fused CPU kernels, or loading their
cached build: tens of seconds in a fresh environment, else a fraction of one), `data`
(waiting for the next batch), `step` (forward, backward, update), `eval`, `checkpoint`,
`finish` (the closing writes, before metrics.json);
`other_s` is what none of them covers (logging between steps).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

PHASES = ("startup", "setup", "kernel_build", "data", "step", "eval", "checkpoint", "finish")
# Jobs further apart than this with none running belong to another invocation of the study.
STRETCH_GAP_S = 120.0


class PhaseClock:
    """Times a block of work as a phase (`with clock.phase(name):`), adding its seconds through `add`."""

    clock: Callable[[], float]

    def add(self, phase: str, seconds: float) -> None:
        raise NotImplementedError

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = self.clock()
        try:
            yield
        finally:
            self.add(name, self.clock() - t0)


class JobClock(PhaseClock):
    """Accumulates a job's wall seconds per phase; `record()` is what metrics.json keeps."""

    def __init__(self, startup_s: float | None = None, clock=time.perf_counter, now=time.time, cpu=time.process_time):
        self.clock, self.now, self.cpu = clock, now, cpu
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.seconds["startup"] = max(0.0, startup_s or 0.0)
        self.t0 = clock()
        self.started_at = now() - self.seconds["startup"]

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] += seconds

    def record(self, trained_flops: float, steps: int) -> dict[str, Any]:
        """The job so far: wall seconds (start-up included), per phase, the rest, what it trained."""
        wall = self.seconds["startup"] + self.clock() - self.t0
        record: dict[str, Any] = {"started_at": self.started_at, "ended_at": self.now(), "wall_s": wall}
        record.update({f"{name}_s": value for name, value in self.seconds.items()})
        record["other_s"] = max(0.0, wall - sum(self.seconds.values()))
        # The process's CPU seconds (all its threads): on a shared machine what the job itself cost.
        record.update(steps=steps, trained_flops=trained_flops, cpu_s=self.cpu())
        return record


@dataclass(frozen=True)
class StudyTiming:
    """A study's training jobs together (see `study_timing`)."""

    jobs: int
    earlier: int  # jobs of earlier invocations, left out
    span_s: float  # first job's start to last job's end
    job_s: float  # the jobs' wall seconds added up
    phase_s: dict[str, float]  # per phase (and "other"), added up
    trained_flops: float
    concurrency: int  # most jobs that ran at once
    peak_flops: float | None  # one job's device peak (its MFU's denominator) x concurrency
    cpu_s: float | None = None  # the jobs' CPU seconds, where every job recorded them

    @property
    def flops_per_s(self) -> float:
        return self.trained_flops / self.span_s if self.span_s > 0 else float("nan")

    @property
    def busy(self) -> float:
        """Share of the span x concurrency that some job was running: the rest is idle cores."""
        return self.job_s / (self.span_s * self.concurrency) if self.span_s > 0 else float("nan")

    @property
    def of_peak(self) -> float | None:
        return self.flops_per_s / self.peak_flops if self.peak_flops else None

    @property
    def step_flops_per_s(self) -> float:
        """One job's FLOP/s while it steps: the ceiling of the end-to-end figure per core."""
        step_s = self.phase_s.get("step", 0.0)
        return self.trained_flops / step_s if step_s > 0 else float("nan")

    @property
    def flops_per_cpu_s(self) -> float | None:
        """FLOPs per CPU second over whole jobs: what the jobs cost whatever else the host ran."""
        return self.trained_flops / self.cpu_s if self.cpu_s else None

    @property
    def step_of_peak(self) -> float | None:
        return self.step_flops_per_s * self.concurrency / self.peak_flops if self.peak_flops else None


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = most = 0
    for _, change in events:  # an end sorts before a start at the same instant
        running += change
        most = max(most, running)
    return most


def latest_stretch(intervals: list[tuple[float, float]], gap_s: float = STRETCH_GAP_S) -> list[int]:
    """Indices of the jobs in the last stretch without a gap of `gap_s` with no job running:
    a study extended or rerun later keeps its earlier runs, which are not this invocation's time."""
    order = sorted(range(len(intervals)), key=lambda i: intervals[i][0])
    stretch: list[int] = []
    reach = float("-inf")
    for i in order:
        start, end = intervals[i]
        if start - reach > gap_s:
            stretch = []
        stretch.append(i)
        reach = max(reach, end)
    return stretch


def study_timing(records: Iterable[dict[str, Any]], gap_s: float = STRETCH_GAP_S) -> StudyTiming | None:
    """Add up the `time` records (metrics.json) of the latest stretch of jobs; None when there are none.

    `peak_flops` in a record is the peak its MFU was against (per process, times
    its world size); the study's peak is the largest of them times the most jobs
    that ran at once, what the cores the study used could have done.
    """
    records = [r for r in records if isinstance(r, dict) and _finite(r.get("started_at"), r.get("ended_at"))]
    if not records:
        return None
    keep = latest_stretch([(float(r["started_at"]), float(r["ended_at"])) for r in records], gap_s)
    earlier = len(records) - len(keep)
    records = [records[i] for i in keep]
    intervals = [(float(r["started_at"]), float(r["ended_at"])) for r in records]
    phase_s = {name: sum(float(r.get(f"{name}_s") or 0.0) for r in records) for name in (*PHASES, "other")}
    peaks = [float(r["peak_flops"]) for r in records if _finite(r.get("peak_flops"))]
    concurrency = max(1, _most_at_once(intervals))
    return StudyTiming(
        jobs=len(records),
        earlier=earlier,
        span_s=max(e for _, e in intervals) - min(s for s, _ in intervals),
        job_s=sum(float(r.get("wall_s") or 0.0) for r in records),
        phase_s=phase_s,
        trained_flops=sum(float(r.get("trained_flops") or 0.0) for r in records),
        concurrency=concurrency,
        peak_flops=max(peaks) * concurrency if peaks else None,
        cpu_s=sum(float(r["cpu_s"]) for r in records) if all(_finite(r.get("cpu_s")) for r in records) else None,
    )


def _finite(*values: Any) -> bool:
    try:
        return all(v is not None and float(v) == float(v) and abs(float(v)) != float("inf") for v in values)
    except (TypeError, ValueError):
        return False


def timing_lines(timing: StudyTiming | None) -> list[str]:
    """The summary's lines: training FLOP/s end to end against the peak, idle cores, where the time went."""
    if timing is None:
        return ["  time: no job recorded its time (metrics.json `time`)"]
    of_peak = f", {timing.of_peak:.1%} of the peak {timing.peak_flops / 1e9:.0f}" if timing.of_peak else ""
    lines = [
        f"  training: {timing.trained_flops:.3g} FLOPs in {timing.span_s / 60:.1f} min of wall time over "
        f"{timing.jobs} jobs "
        f"({timing.concurrency} at once): {timing.flops_per_s / 1e9:.1f} GFLOP/s end to end{of_peak}; "
        f"cores busy {timing.busy:.0%} of that span"
        + (f" ({timing.earlier} jobs of earlier invocations left out)" if timing.earlier else "")
    ]
    total = sum(timing.phase_s.values())
    if total > 0:
        shares = ", ".join(f"{name} {100 * s / total:.0f}%" for name, s in timing.phase_s.items() if s > 0)
        lines.append(f"  time in jobs, added up, {total / 60:.1f} min: {shares}")
    if timing.phase_s.get("step", 0.0) > 0:
        of = f" ({timing.step_of_peak:.1%} of a job's peak)" if timing.step_of_peak else ""
        lines.append(f"  while stepping: {timing.step_flops_per_s / 1e9:.1f} GFLOP/s per job{of}")
    if timing.flops_per_cpu_s:
        of = (
            f" ({timing.flops_per_cpu_s * timing.concurrency / timing.peak_flops:.1%} of a job's peak)"
            if timing.peak_flops
            else ""
        )
        lines.append(f"  by CPU time: {timing.flops_per_cpu_s / 1e9:.1f} GFLOP/s per CPU second, whole jobs{of}")
    return lines
