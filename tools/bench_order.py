"""How long a wsd study's training jobs take on N cores under two job orders, simulated.

    python tools/bench_order.py --study scaling-study [--family text_image] [--cores 2]

Reads the family's plan (`plan.yaml`) and, where the study has run, each job's
measured wall time (metrics.json `time`; else the plan's estimate, `hours_here`).
Then plays Snakemake's choice among ready jobs (the highest priority first, one
thread each) for:

- by steps: a segment's end step, a branch's planned steps (the order before);
- longest chain: `Trajectory.segment_priority` / `branch_priority` (the work that
  waits on a job, in this machine's seconds), what the workflow uses now.

Prints each order's makespan, its idle core-seconds, and the lower bound
max(all jobs' time / cores, the longest chain of dependent jobs). A simulation
with measured durations, not a rerun: it leaves out start-up jitter and other tenants.
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path
from typing import NamedTuple

import yaml


class Job(NamedTuple):
    name: str
    seconds: float
    after: str | None  # the job it waits for
    by_steps: int
    longest_chain: int


def jobs_of(study: Path, family: str, cooldown_fraction: float = 0.2) -> list[Job]:
    from prism.isoflop.design.trajectories import plan_trajectories

    folder = study / family
    plan = yaml.safe_load((folder / "plan.yaml").read_text())
    jobs = []
    for t in plan_trajectories(plan, cooldown_fraction):
        per_step = (t.hours_per_step or 0.0) * 3600

        def measured(path: Path, steps: int, per_step: float = per_step) -> float:
            try:
                return float(json.loads(path.read_text())["time"]["wall_s"])
            except (OSError, ValueError, KeyError, TypeError):
                return steps * per_step

        for seg in t.segments:
            seconds = measured(
                folder / "stable" / t.traj_id / f"to-{seg.end:08d}" / "metrics.json", seg.end - seg.start
            )
            after = f"{t.traj_id}@{seg.start}" if seg.start else None
            jobs.append(Job(f"{t.traj_id}@{seg.end}", seconds, after, seg.end, t.segment_priority(seg.end)))
        for b in t.branches:
            seconds = measured(folder / "runs" / b.run_id / "metrics.json", b.cooldown)
            jobs.append(Job(b.run_id, seconds, f"{t.traj_id}@{b.start}", b.steps, t.branch_priority(b.run_id)))
    return jobs


def makespan(jobs: list[Job], cores: int, order: str) -> float:
    """Greedy list scheduling: whenever a core is free, the ready job of highest priority starts."""
    waiting: dict[str, list[Job]] = {}
    ready: list[tuple[int, int, Job]] = []
    for i, job in enumerate(jobs):
        if job.after is None:
            heapq.heappush(ready, (-getattr(job, order), i, job))
        else:
            waiting.setdefault(job.after, []).append(job)
    index = {job.name: i for i, job in enumerate(jobs)}
    running: list[tuple[float, str]] = []
    now = 0.0
    while ready or running:
        while ready and len(running) < cores:
            _, _, job = heapq.heappop(ready)
            heapq.heappush(running, (now + job.seconds, job.name))
        now, name = heapq.heappop(running)
        for job in waiting.pop(name, []):
            heapq.heappush(ready, (-getattr(job, order), index[job.name], job))
    return now


def longest_chain(jobs: list[Job]) -> float:
    by_name = {job.name: job for job in jobs}
    memo: dict[str, float] = {}

    def finish(job: Job) -> float:
        if job.name not in memo:
            memo[job.name] = job.seconds + (finish(by_name[job.after]) if job.after else 0.0)
        return memo[job.name]

    return max(map(finish, jobs), default=0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True, help="the study dir (study_dir)")
    parser.add_argument("--family", default="text_image")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--cooldown-fraction", type=float, default=0.2)
    args = parser.parse_args(argv)
    jobs = jobs_of(Path(args.study), args.family, args.cooldown_fraction)
    total = sum(job.seconds for job in jobs)
    bound = max(total / args.cores, longest_chain(jobs))
    print(
        f"{len(jobs)} jobs, {total / 60:.1f} min of job time on {args.cores} cores; lower bound "
        f"{bound / 60:.1f} min (longest chain {longest_chain(jobs) / 60:.1f} min)"
    )
    for order in ("by_steps", "longest_chain"):
        span = makespan(jobs, args.cores, order)
        print(
            f"{order:>13}: {span / 60:.1f} min, {(span * args.cores - total) / 60:.1f} core-min idle "
            f"({span / bound:.3f} x the bound)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
