"""The study's expected wall time at some cores: what a user plans by, not the sum of its runs.

The runs' times added up (`hours_here_total`) is the time in runs, one after another: a
wsd study trains each shared prefix once and several jobs run at a time, so that sum
overstated a 12-minute study as 37 minutes. The wall time is bounded below by the
longest chain of jobs that must run one after another (a cosine run; a wsd trajectory's
segments up to its last branch point, then that branch) and by the work spread over the
jobs that run at once; the larger of the two is the estimate (list scheduling, which
Snakemake's critical-path priorities follow, ends within their sum). Pure functions of
the plan's rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prism.isoflop.design.trajectories import DEFAULT_COOLDOWN_FRACTION, DEFAULT_MIN_STEPS, trajectories
from prism.isoflop.records import PlanRow


@dataclass(frozen=True)
class WallTime:
    """Hours: the expected wall time, the longest chain of jobs, and the work, at `slots` jobs at a time."""

    wall_h: float
    path_h: float
    work_h: float
    slots: int
    jobs: int

    def text(self) -> str:
        """`expected wall time 12 min at 2 jobs at a time (longest chain 5.1 min; 24 min of training)`."""
        from prism.isoflop.design.plantext import hours_text  # noqa: PLC0415 the plan's own spelling of hours

        return (
            f"expected wall time {hours_text(self.wall_h)} at {self.slots} job(s) at a time (the steps alone, "
            f"without each job's start-up and evaluation; longest chain of jobs {hours_text(self.path_h)}; "
            f"{hours_text(self.work_h)} of training in {self.jobs} jobs)"
        )


def chains(
    runs: Iterable[PlanRow | Mapping[str, Any]],
    schedule: str,
    cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
    min_steps: int = DEFAULT_MIN_STEPS,
    startup_s: float = 0.0,
) -> tuple[list[float], list[float], int] | None:
    """(hours of each job, hours of each chain of jobs that run one after another, jobs), each job's
    `startup_s` included; None where a run has no time estimate here."""
    rows = list(runs)
    start_h = startup_s / 3600.0
    if schedule != "wsd":
        hours = [_get(r, "hours_here") for r in rows]
        if any(h is None for h in hours):
            return None
        jobs = [float(h) + start_h for h in hours]
        return jobs, jobs, len(jobs)
    trajs = trajectories(rows, cooldown_fraction, min_steps=min_steps)
    if any(t.hours_per_step is None for t in trajs):
        return None
    work, paths, count = [], [], 0
    for t in trajs:
        parts = len(t.segments) + len(t.branches)
        count += parts
        work.append(t.steps * t.hours_per_step + parts * start_h)
        # Its longest chain: the segments up to a branch's start, then that branch.
        paths.append(
            max(b.steps * t.hours_per_step + (1 + sum(p <= b.start for p in t.points)) * start_h for b in t.branches)
        )
    return work, paths, count


def wall_time(
    runs: Iterable[PlanRow | Mapping[str, Any]],
    schedule: str,
    slots: int,
    cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION,
    min_steps: int = DEFAULT_MIN_STEPS,
    startup_s: float = 0.0,
) -> WallTime | None:
    """The study's expected wall time with `slots` training jobs at a time (None: a run has no estimate)."""
    found = chains(runs, schedule, cooldown_fraction, min_steps, startup_s)
    if found is None or not found[0]:
        return None
    work, paths, jobs = found
    slots = max(1, int(slots))
    work_h, path_h = sum(work), max(paths)
    return WallTime(max(path_h, work_h / slots), path_h, work_h, slots, jobs)


def _get(row: PlanRow | Mapping[str, Any], key: str) -> Any:
    return row.get(key) if isinstance(row, Mapping) else getattr(row, key)
