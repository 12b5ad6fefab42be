"""How far a study is, counted in what it finishes, and when it ends at the pace it has kept.

A wsd study trains each model's constant-rate trajectory in segments, then one cooldown
branch per run: halfway through, its runs' own folders are mostly empty while most of the
work is done. So its parts are counted (segments and branches, each out of its total), each
run's progress is its trajectory's steps up to its branch point plus its branch's, and the
FLOPs done are those of that progress (a run's own budget, as the plan counts it).

The ETA is measured, not assumed. Each finished job's time in its job (from its body's
writing to its last write: start-up, evaluation and checkpoints included) against the
plan's estimate of its steps gives a job's time as a start-up plus a multiple of its
estimate: the multiple (the pace of steps, the same in every kind of job) from the slope
of the finished jobs' times within each kind, the start-up per kind of job where that kind
has finished jobs (the median of their time beyond their steps: many short wsd branches
are mostly start-up and evaluation, segments mostly steps). The jobs
left take that much in all, over the jobs that have run at once so far (their time in
jobs over the wall time since the first started); or, when longer, the longest chain of
jobs still to run one after another (a trajectory's remaining segments and its longest
branch) at that same line. Pure functions of the runs' and segments' states.
"""

from __future__ import annotations

from dataclasses import dataclass

# The state of a run or segment (prism.isoflop.runs.status.STATES) that counts as finished.
DONE = "done"


@dataclass(frozen=True)
class Part:
    """One training job's work: a cosine run, or a wsd segment or branch, with the plan's estimate of it."""

    key: str
    kind: str  # "run", "segment" or "branch"
    est_s: float | None
    fraction: float  # of its own steps, done
    state: str
    wall_s: float = 0.0  # its measured time (done)
    # The estimated seconds of the chain of jobs that must follow it, one after another (itself included).
    chain_s: float | None = None
    started: float | None = None  # when its folder was first written (epoch seconds)
    job_s: float = 0.0  # its job's time so far (status._job_time), start-up and evaluation included
    # Jobs in the chain `chain_s` counts (itself included): each pays its start-up.
    chain_jobs: int = 1


@dataclass(frozen=True)
class Progress:
    """Parts done of each kind, and the ETA with what it rests on."""

    done: dict[str, int]
    total: dict[str, int]
    eta_s: float | None
    basis: str


def run_fraction(start: int, steps: int, trajectory_step: int, branch_step: int | None, branch_done: bool) -> float:
    """A wsd run's share done: its trajectory's steps up to its branch point, then its cooldown's."""
    if branch_done:
        return 1.0
    prefix = min(trajectory_step, start)
    cooled = 0 if branch_step is None else max(0, branch_step - start)
    return min(1.0, (prefix + cooled) / max(1, steps))


def job_line(parts: list[Part]) -> tuple[float, float]:
    """(start-up s, seconds a second of estimate) of a job, fitted on the finished jobs' time in their job; with
    too few to fit a line, no start-up and their ratio (1 with none)."""
    timed = [(p.est_s, p.job_s) for p in parts if p.state == DONE and p.est_s and p.job_s]
    if not timed:
        return 0.0, 1.0
    xs, ys = [x for x, _ in timed], [y for _, y in timed]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if len(timed) >= 3 and spread > 0:
        slope = sum((x - mean_x) * (y - mean_y) for x, y in timed) / spread
        start = mean_y - slope * mean_x
        if slope > 0 and start >= 0:
            return start, slope
    return 0.0, sum(ys) / sum(xs)


def pace(parts: list[Part]) -> float:
    """Seconds of job a second of estimate, common to every kind: the slope within kinds (each kind its own
    start-up) of the finished jobs' time on their estimate; their ratio where the kinds' estimates do not vary."""
    timed = [p for p in parts if p.state == DONE and p.est_s and p.job_s]
    num = den = 0.0
    for kind in {p.kind for p in timed}:
        xs = [p.est_s for p in timed if p.kind == kind]
        ys = [p.job_s for p in timed if p.kind == kind]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        num += sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
        den += sum((x - mx) ** 2 for x in xs)
    if den > 0 and num > 0 and len(timed) >= 3:
        return num / den
    return job_line(parts)[1]


def kind_start(parts: list[Part], kind: str | None, per_s: float) -> float:
    """The median time `kind`'s finished jobs (every kind's: None) took beyond their estimate at `per_s`."""
    over = sorted(p.job_s - per_s * p.est_s for p in parts
                  if kind in (None, p.kind) and p.state == DONE and p.est_s)  # fmt: skip
    if not over:
        return 0.0
    mid = len(over) // 2
    return max(0.0, over[mid] if len(over) % 2 else (over[mid - 1] + over[mid]) / 2)


def progress(parts: list[Part], now: float) -> Progress:
    """Count the parts by kind and estimate the end: the jobs left at the finished jobs' line over the jobs
    that ran at once, or the longest chain left at that line, whichever is longer."""
    kinds = sorted({p.kind for p in parts})
    done = {k: sum(p.kind == k and p.state == DONE for p in parts) for k in kinds}
    total = {k: sum(p.kind == k for p in parts) for k in kinds}
    left = [p for p in parts if p.state != DONE]
    if not left:
        return Progress(done, total, 0.0, "every part is done")
    if any(p.est_s is None for p in parts):
        return Progress(done, total, None, "the plan has no time estimate (no measured speed)")
    starts = [p.started for p in parts if p.started is not None]
    if not any(p.state == DONE for p in parts) or not starts or now <= min(starts):
        return Progress(done, total, None, "no job has finished yet")
    per_s = pace(parts)
    start_s = kind_start(parts, None, per_s)
    # One pace for the steps of every kind (they run at the same speed), and each kind's own start-up, the
    # median of what its finished jobs took beyond their steps at that pace: a wsd branch is mostly start-up
    # and evaluation, a segment mostly steps. A line per kind would rest on its first finished jobs, the
    # longest (started first), and its start-up, extrapolated to the many short ones left, overshoots.
    lines = {k: (kind_start(parts, k if done[k] else None, per_s), per_s) for k in kinds}
    at_once = max(1.0, sum(p.job_s for p in parts) / (now - min(starts)))  # jobs that ran at a time, measured
    work_left = sum(_left_s(p, *lines[p.kind]) for p in left) / at_once
    chain = max(start_s * p.chain_jobs + per_s * (p.chain_s or 0.0) for p in left)
    how = "; ".join(f"a {k} {s:.0f} s + x{r:.2f} the plan's estimate" for k, (s, r) in lines.items())
    how += ", as the finished ones took"
    if chain > work_left:
        return Progress(done, total, chain, f"the longest chain of jobs left; {how}")
    return Progress(done, total, work_left, f"the jobs left, {at_once:.1f} at a time as so far; {how}")


def _left_s(part: Part, start_s: float, per_s: float) -> float:
    """A job's time left: its start-up unless it has begun, and the rest of its estimate at `per_s`."""
    return start_s * (part.fraction == 0) + per_s * part.est_s * (1 - part.fraction)
