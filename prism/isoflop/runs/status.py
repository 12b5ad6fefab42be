"""Where a running study stands, from its folder alone (safe on a login node while jobs run).

`study_status(family_dir)` reads `plan.yaml` and every run directory (`runs/RUN_ID/`,
and for wsd `stable/TRAJ/to-STEP/`) without importing torch or writing anything, and
sorts each planned run into one state:

- done: `metrics.json` with status ok;
- running: no metrics.json, and a process holds the run's `.lock` on this host
  (read from /proc/locks, so nothing here can disturb a trainer taking it), or one
  of its files changed within `active_s` (a job on another node);
- failed: started but neither (killed, stopped at the walltime, or crashed:
  rerunning resumes it from its last checkpoint), or collapsed;
- waiting: planned, no run directory yet (or one with nothing in it);
- stale: a run directory the plan does not hold (another budget set or study).

A done run whose `final/` (its weights and finished record) is gone stays done (its
metrics are fitted) and is listed with the command that trains it again (`final_gone`).

Time: the finished runs' measured wall time against the plan's estimate for them
(`hours_here`, from the timed steps) gives a ratio; the ETA is the estimate of what is
left times that ratio, divided by the runs training now. FLOPs count each run's own
budget as the plan does (a wsd branch includes its trajectory's prefix).

Node-hours, what a cluster allocation is charged: each job's nodes (the `#PBS -l select=`
of the body it ran, `launch.sh`; one node for a local body) times its time on them, from
the body's writing (the job's start) to the run's last write, or to now while it runs;
a run started by hand (no body) counts its measured wall time on one node. A run killed
and rerun counts its last job only.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prism.core.errors import PrismError
from prism.core.ids import format_budget
from prism.core.studylayout import PLAN, FamilyFolder, run_config
from prism.isoflop.design.trajectories import DEFAULT_COOLDOWN_FRACTION, DEFAULT_MIN_STEPS, trajectories
from prism.isoflop.planread import read_plan
from prism.isoflop.records import PlanRow
from prism.isoflop.runs.progress import Part, Progress, progress, run_fraction
from prism.train.rundir.layout import CHECKPOINTS_DIR, FINAL_DIR, final_dir
from prism.train.rundir.runfiles import CONFIG, EVAL, METRICS, PERF, RunConfigFile, RunConfigUnreadable, read_run_config

ACTIVE_SECONDS = 600.0
STATES = ("done", "running", "failed", "waiting")
BODY = "launch.sh"  # the job body a training job writes at its start, then runs
SELECT_RE = re.compile(r"^#PBS -l select=(\d+)", re.MULTILINE)


@dataclass
class RunStatus:
    """One planned run (or wsd segment) as its files say."""

    run_id: str
    state: str
    budget: float | None = None
    step: int | None = None
    steps: int | None = None
    loss: float | None = None  # the latest training loss (perf.jsonl)
    eval_loss: float | None = None  # the final evaluation (done) or the latest one
    flops_done: float = 0.0
    flops_planned: float = 0.0
    wall_s: float = 0.0  # measured (done) or the logged steps' time so far
    est_wall_s: float | None = None  # the plan's estimate here
    eta_s: float | None = None  # a running run's own remaining time at its current rate
    nodes: int = 1
    job_s: float = 0.0  # its job's time on its nodes so far (see the module's docstring)
    est_node_hours: float | None = None  # the plan's cluster estimate (`node_hours`)
    note: str = ""

    @property
    def node_hours(self) -> float:
        return self.nodes * self.job_s / 3600.0

    @property
    def fraction(self) -> float:
        if self.state == "done":
            return 1.0
        if self.step and self.steps:
            return min(1.0, self.step / self.steps)
        return 0.0


@dataclass
class StudyStatus:
    family_dir: Path
    family: str
    regime: str
    schedule: str
    runs: list[RunStatus]
    segments: list[RunStatus] = field(default_factory=list)
    stale: list[RunStatus] = field(default_factory=list)
    node_hours_total: float | None = None
    now: float = 0.0
    # Every training job's work (runs, or wsd segments and branches) with the plan's estimate of it.
    parts: list[Part] = field(default_factory=list)

    def counts(self, budget: float | None = None) -> dict[str, int]:
        runs = [r for r in self.runs if budget is None or r.budget == budget]
        return {state: sum(r.state == state for r in runs) for state in STATES}

    @property
    def budgets(self) -> list[float]:
        return sorted({r.budget for r in self.runs if r.budget is not None})

    def progress(self) -> Progress:
        """Parts done by kind and the ETA at the pace kept so far (prism.isoflop.runs.progress)."""
        return progress(self.parts, self.now)

    def eta_s(self) -> float | None:
        return self.progress().eta_s

    def running(self) -> int:
        """Runs and wsd segments training now: how many jobs run at a time."""
        return sum(r.state == "running" for r in self.runs + self.segments)

    def node_hours_spent(self) -> float:
        """Every job's nodes x its time so far, over the planned runs and wsd segments (not stale runs)."""
        return sum(r.node_hours for r in self.runs + self.segments)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line being written
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            rows.append(row)
    return rows


def _locked_inodes() -> set[tuple[int, int, int]]:
    """(major, minor, inode) of every file with a lock on this host (Linux /proc/locks)."""
    found = set()
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        for part in line.split():
            bits = part.split(":")
            if len(bits) == 3:
                try:
                    found.add((int(bits[0], 16), int(bits[1], 16), int(bits[2])))
                except ValueError:
                    pass
                break
    return found


def _lock_held(run_dir: Path, locked: set[tuple[int, int, int]]) -> bool:
    try:
        st = os.stat(run_dir / ".lock")
    except OSError:
        return False
    return (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in locked


def _newest_mtime(run_dir: Path) -> float:
    newest = 0.0
    for name in (PERF, EVAL, CONFIG, CHECKPOINTS_DIR):
        try:
            newest = max(newest, (run_dir / name).stat().st_mtime)
        except OSError:
            pass
    return newest


def run_status(
    run_id: str,
    run_dir: Path,
    planned: PlanRow | None,
    locked: set[tuple[int, int, int]],
    now: float,
    active_s: float = ACTIVE_SECONDS,
) -> RunStatus:
    """The state of one run directory (which need not exist yet), with its job's nodes and time."""
    status = _run_state(run_id, run_dir, planned, locked, now, active_s)
    if status.state != "waiting":
        status.nodes, status.job_s = _job_time(run_dir, status, now)
    return status


def _job_time(run_dir: Path, status: RunStatus, now: float) -> tuple[int, float]:
    """(nodes, seconds) of the run's last job: from its body's writing to its last write (or now)."""
    try:
        body = run_dir / BODY
        started, text = body.stat().st_mtime, body.read_text(errors="replace")
    except OSError:
        return 1, status.wall_s  # started by hand: the measured time, on one node
    found = SELECT_RE.search(text)
    nodes = int(found.group(1)) if found else 1
    if status.state == "running":
        return nodes, max(0.0, now - started)
    ended = started
    for name in (METRICS, PERF, EVAL, CHECKPOINTS_DIR, FINAL_DIR):
        try:
            ended = max(ended, (run_dir / name).stat().st_mtime)
        except OSError:
            pass
    return nodes, ended - started


def _run_state(
    run_id: str,
    run_dir: Path,
    planned: PlanRow | None,
    locked: set[tuple[int, int, int]],
    now: float,
    active_s: float,
) -> RunStatus:
    hours = planned.hours_here if planned else None
    status = RunStatus(
        run_id,
        "waiting",
        budget=float(planned.budget) if planned else None,
        steps=planned.steps if planned else None,
        flops_planned=(_float(planned.flops) or 0.0) if planned else 0.0,
        est_wall_s=None if hours is None else 3600.0 * float(hours),
        est_node_hours=_float(planned.node_hours) if planned else None,
    )
    if not run_dir.is_dir():
        status.note = "not started"
        return status
    try:
        config = read_run_config(run_dir)
    except RunConfigUnreadable:
        config = RunConfigFile({})
    status.steps = _int(config.resolved.get("steps")) or status.steps
    if status.budget is None:
        status.budget = _float(config.settings.get("budget"))
    perf, evals = _read_jsonl(run_dir / PERF), _read_jsonl(run_dir / EVAL)
    trained = [r for r in perf if "collapsed" not in r]
    if trained:
        last = trained[-1]
        status.step, status.loss = last["step"], _float(last.get("loss"))
        status.flops_done = _float(last.get("flops")) or 0.0
        status.wall_s = _logged_seconds(trained)
    if evals:
        status.eval_loss = _float(evals[-1].get("loss"))
    metrics = _read_json(run_dir / "metrics.json")
    if metrics is not None:
        if metrics.get("status") == "ok":
            status.state = "done"
            status.step = _int(metrics.get("steps")) or status.step
            status.eval_loss = _float(metrics.get("loss")) or status.eval_loss
            status.flops_done = _float(metrics.get("flops")) or status.flops_done
            status.wall_s = _float(metrics.get("wall_s")) or status.wall_s
        else:
            status.state = "failed"
            status.note = f"{metrics.get('status')} at step {metrics.get('step')}: {metrics.get('reason')}"
        return status
    newest = _newest_mtime(run_dir)
    if _lock_held(run_dir, locked) or (newest and now - newest < active_s):
        status.state = "running"
        if trained and _float(trained[-1].get("step_time_s")) and status.steps:
            status.eta_s = (status.steps - status.step) * float(trained[-1]["step_time_s"])
        return status
    if not (perf or evals or run_config(run_dir).exists()):
        status.note = "directory made, nothing trained"
        return status
    status.state = "failed"
    quiet = format_duration(now - newest)
    status.note = (
        f"stopped at step {status.step or 0} ({quiet} without a write, no trainer holds it): rerunning "
        "resumes from its last checkpoint"
    )
    return status


def _logged_seconds(rows: list[dict[str, Any]]) -> float:
    """Training time of the logged steps: each row's mean step time over the steps since the row before."""
    total, previous = 0.0, 0
    for row in rows:
        step_s = _float(row.get("step_time_s"))
        if step_s is not None and row["step"] > previous:
            total += step_s * (row["step"] - previous)
        previous = row["step"]
    return total


def final_gone(run_dir: Path) -> bool:
    """A finished run (metrics.json, status ok) whose `final/`, its weights and finished record, is gone.

    Nothing reruns it (its metrics.json, the job's output, is there), so it is said instead.
    """
    metrics = _read_json(Path(run_dir) / "metrics.json")
    return isinstance(metrics, dict) and metrics.get("status") == "ok" and not final_dir(run_dir).is_dir()


def final_gone_line(run_dir: Path, family: str, schedule: str) -> str:
    """One line: a run's final/ is gone, and the command that puts it back (the same weights, trained again)."""
    how = "from its branch point (its cooldown only)" if schedule == "wsd" else "from its start"
    return (
        f"{run_dir}/final/ is gone (the run's weights); its metrics stay fitted. `snakemake fit_{family} --forcerun "
        f"{run_dir}/metrics.json` puts it back, training the run again {how}: the same weights"
    )


def lost_finals(family_dir: str | Path, run_ids, schedule: str) -> list[str]:
    """final_gone_line of each of `run_ids` (runs of `family_dir`) whose final/ is gone."""
    family_dir = Path(family_dir)
    runs = [FamilyFolder(family_dir).run_dir(run_id) for run_id in run_ids]
    return [final_gone_line(run, family_dir.name, schedule) for run in runs if final_gone(run)]


def study_status(family_dir: str | Path, active_s: float = ACTIVE_SECONDS, now: float | None = None) -> StudyStatus:
    """Read a family folder of a study (`STUDY/F`, holding plan.yaml)."""
    family_dir = Path(family_dir)
    folder = FamilyFolder(family_dir)
    read = read_plan(folder.plan, fix=f"`snakemake plan_{family_dir.name}` makes it")
    plan, rows = read.header, read.rows
    now = time.time() if now is None else now
    locked = _locked_inodes()
    runs_root = folder.runs_dir
    runs = [run_status(run_id, runs_root / run_id, row, locked, now, active_s) for run_id, row in rows.items()]
    runs.sort(key=lambda r: (r.budget or 0.0, r.flops_planned, r.run_id))
    stale = []
    if runs_root.is_dir():
        for path in sorted(p for p in runs_root.iterdir() if p.is_dir() and p.name not in rows):
            found = run_status(path.name, path, None, locked, now, active_s)
            found.note, found.state = f"not in the plan ({found.state})", "stale"
            stale.append(found)
    segments = []
    for path in sorted(family_dir.glob("stable/*/to-*")):
        if path.is_dir():
            segments.append(run_status(f"{path.parent.name}/{path.name}", path, None, locked, now, active_s))
    cost = plan.get("cost") if isinstance(plan.get("cost"), dict) else {}
    options = plan.get("options") if isinstance(plan.get("options"), dict) else {}
    schedule = "wsd" if segments or options.get("schedule") == "wsd" else "cosine"
    for run in runs:
        if run.state == "done" and final_gone(runs_root / run.run_id):
            run.note = final_gone_line(runs_root / run.run_id, family_dir.name, schedule)
    if schedule == "wsd":
        parts = wsd_parts(runs, segments, list(rows.values()), plan, runs_root)
    else:
        parts = [_part(r, "run", r.est_wall_s, 0, r.steps or 0, runs_root / r.run_id) for r in runs]
    return StudyStatus(
        family_dir,
        str(plan.get("family") or family_dir.name),
        str(plan.get("regime") or ""),
        schedule,
        runs,
        segments,
        stale,
        _float(cost.get("node_hours_total")),
        now,
        parts,
    )


def _started(path: Path) -> float | None:
    """When a job first wrote its folder (its config.yaml), None before."""
    try:
        return run_config(path).stat().st_mtime
    except OSError:
        return None


def _part(r: RunStatus, kind: str, est_s: float | None, start: int, end: int, path: Path,
          chain_s: float | None = None) -> Part:  # fmt: skip
    """One job's work from its status: steps `start` to `end` of its model (a wsd branch or segment starts
    at its point), the estimated seconds `chain_s` of the jobs that follow it (itself included)."""
    span = max(1, end - start)
    fraction = 1.0 if r.state == "done" else min(1.0, max(0, (r.step or start) - start) / span)
    chain = est_s * (1 - fraction) if chain_s is None and est_s is not None else chain_s
    return Part(r.run_id, kind, est_s, fraction, r.state, r.wall_s, chain, _started(path), r.job_s)


def wsd_parts(runs: list[RunStatus], segments: list[RunStatus], rows: list[PlanRow], plan: dict,
              runs_root: Path) -> list[Part]:  # fmt: skip
    """The segments and branches of a wsd study, each with its estimate; each run's FLOPs done set to its
    trajectory's steps up to its branch point and its branch's (`run_fraction`)."""
    cooldown = _float((plan.get("schedules") or {}).get("cooldown_fraction")) or DEFAULT_COOLDOWN_FRACTION
    min_steps = _int(plan.get("min_steps")) or DEFAULT_MIN_STEPS
    by_id = {r.run_id: r for r in runs + segments}
    family_dir, parts = runs_root.parent, []
    for t in trajectories(rows, cooldown, min_steps=min_steps):
        step_s = None if t.hours_per_step is None else 3600.0 * t.hours_per_step
        at = 0  # the trajectory's steps trained so far
        for seg in t.segments:
            key = f"{t.traj_id}/to-{seg.end:08d}"
            found = by_id.get(key) or RunStatus(key, "waiting")
            at = seg.end if found.state == "done" else max(at, found.step or 0)
            # The longest chain of jobs this segment starts: it, the segments after it, and the longest branch.
            last = max((b for b in t.branches if b.start >= seg.end), key=lambda b: b.steps, default=None)
            chain_end, cut = (last.steps, last.start) if last else (seg.end, seg.end)
            est, chain = (None, None) if step_s is None else ((seg.end - seg.start) * step_s, None)
            part = _part(found, "segment", est, seg.start, seg.end, family_dir / "stable" / key)
            if step_s is not None:
                chain = (chain_end - seg.start) * step_s - est * part.fraction
            jobs = sum(g.start >= seg.start and g.end <= cut for g in t.segments) + (last is not None)
            parts.append(Part(**{**part.__dict__, "chain_s": chain, "chain_jobs": jobs}))
        for b in t.branches:
            run = by_id.get(b.run_id)
            if run is None:
                continue
            est = None if step_s is None else b.cooldown * step_s
            parts.append(_part(run, "branch", est, b.start, b.steps, runs_root / b.run_id))
            if run.state != "done":
                branch_step = run.step if run.state != "waiting" else None
                run.flops_done = run.flops_planned * run_fraction(b.start, b.steps, at, branch_step, False)
    return parts


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def status_text(status: StudyStatus) -> str:
    """What `prism isoflop status` prints."""
    counts = status.counts()
    lines = [
        f"{status.family_dir} ({status.family}, {status.regime}): {len(status.runs)} planned runs: "
        + ", ".join(f"{counts[s]} {s}" for s in STATES)
        + (f"; {len(status.stale)} stale" if status.stale else "")
    ]
    lines.append(
        f"{'budget':>8} {'runs':>5} {'done':>5} {'running':>8} {'failed':>7} {'waiting':>8} "
        f"{'FLOPs done':>11} {'of planned':>11}"
    )
    for budget in status.budgets:
        c = status.counts(budget)
        runs = [r for r in status.runs if r.budget == budget]
        lines.append(
            f"{format_budget(budget):>8} {len(runs):>5} {c['done']:>5} {c['running']:>8} {c['failed']:>7} "
            f"{c['waiting']:>8} {sum(r.flops_done for r in runs):>11.3g} "
            f"{sum(r.flops_planned for r in runs):>11.3g}"
        )
    done_flops = sum(r.flops_done for r in status.runs)
    planned_flops = sum(r.flops_planned for r in status.runs)
    share = f" ({done_flops / planned_flops:.0%})" if planned_flops else ""
    prefix = ", a wsd run's trajectory up to its branch point included" if status.schedule == "wsd" else ""
    lines.append(f"FLOPs: {done_flops:.3g} of {planned_flops:.3g} planned{share} (each run's own budget{prefix})")
    lines += _parts_lines(status)
    lines.append(_time_line(status))
    if status.node_hours_total is not None or any(r.nodes > 1 for r in status.runs + status.segments):
        lines.append(_node_hours_line(status))  # a laptop study has no node-hours
    for title, state in (("running", "running"), ("failed", "failed")):
        chosen = [r for r in status.runs + status.segments if r.state == state]
        if chosen:
            lines.append(f"{title}:")
            lines += [f"  {_run_line(r)}" for r in chosen]
    gone = [r for r in status.runs if r.state == "done" and r.note]
    if gone:
        lines.append("done, final/ gone:")
        lines += [f"  {r.note}" for r in gone]
    if status.stale:
        lines.append("stale (not fitted):")
        lines += [f"  {r.run_id}: {r.note}" for r in status.stale]
    return "\n".join(lines)


def _parts_lines(status: StudyStatus) -> list[str]:
    """A wsd study's training jobs by kind, each out of its total: what it finishes before its runs do."""
    if status.schedule != "wsd":
        return []
    prog = status.progress()
    running = {k: sum(p.kind == k and p.state == "running" for p in status.parts) for k in prog.total}
    kinds = ", ".join(
        f"{prog.done[k]} of {prog.total[k]} {k}es done" if k == "branch" else f"{prog.done[k]} of {prog.total[k]} "
        f"trajectory {k}s done" + (f" ({running[k]} running)" if running[k] else "")
        for k in ("segment", "branch") if k in prog.total
    )  # fmt: skip
    return [f"wsd training jobs: {kinds} (a run is done when its branch is)"]


def _time_line(status: StudyStatus) -> str:
    """Time in steps (the jobs' added up), the wall time since the first job started, and the ETA."""
    started = [p.started for p in status.parts if p.started is not None]
    spent = sum(r.wall_s for r in status.runs + status.segments)
    text = f"time in steps so far {format_duration(spent)} (the jobs' added up)"
    if started:
        text += f"; wall time since the first training job started {format_duration(status.now - min(started))}"
    prog = status.progress()
    if prog.eta_s == 0.0:
        return text + "; every planned run is done"
    jobs = f"{sum(prog.done.values())} of {sum(prog.total.values())} training jobs done"
    return text + (
        f"\nETA {format_duration(prog.eta_s)} of wall time ({jobs}; from {prog.basis})"
        if prog.eta_s is not None
        else f"\nETA unknown ({jobs}; {prog.basis})"
    )


def _node_hours_line(status: StudyStatus) -> str:
    """Node-hours spent (nodes x job time) beside the plan's cluster estimate, whole and for the finished runs."""
    text = f"node-hours: {status.node_hours_spent():.3g} spent"
    if status.node_hours_total is None:
        return text + "; the plan has no cluster estimate (plan.node_peak_flops, plan.mfu)"
    text += f" of the plan's estimate {status.node_hours_total:.3g}"
    done = [r for r in status.runs if r.state == "done" and r.est_node_hours]
    if done:
        used, est = sum(r.node_hours for r in done), sum(r.est_node_hours for r in done)
        text += f"; finished runs used {used:.3g} against their {est:.3g} (x{used / est:.2f})"
    return text


def _run_line(r: RunStatus) -> str:
    step = f"step {r.step or 0}/{r.steps}" if r.steps else f"step {r.step or 0}"
    loss = f" loss {r.loss:.4f}" if r.loss is not None else ""
    evaluated = f" eval {r.eval_loss:.4f}" if r.eval_loss is not None else ""
    eta = f" ETA {format_duration(r.eta_s)}" if r.eta_s is not None else ""
    note = f"  {r.note}" if r.note else ""
    return f"{r.run_id}: {step} ({r.fraction:.0%}){loss}{evaluated}{eta}{note}"


def family_dirs(path: str | Path) -> list[Path]:
    """A family folder (holding plan.yaml), or every family folder of a study folder."""
    path = Path(path)
    if FamilyFolder(path).plan.is_file():
        return [path]
    if not path.is_dir():
        raise PrismError(f"{path}: no such study folder")
    found = sorted(p.parent for p in path.glob(f"*/{PLAN}"))
    if not found:
        raise PrismError(
            f"{path}: no plan.yaml here or in a family folder below it (plan the study first: `snakemake plan_F`)"
        )
    return found


def _float(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _int(value: Any) -> int | None:
    v = _float(value)
    return None if v is None else int(v)
