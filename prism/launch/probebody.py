"""One body of the probe run under its own limits, so that the probe's job always ends inside its walltime.

A probe body is a real job body (`bash probe.sh`: mpiexec over a node's ranks), and a real launcher
can hang: the ranks may never reach a first step (a collective that never forms, a compile that
never ends), and PALS' `mpiexec` may neither forward SIGTERM nor exit. An unbounded wait on it runs
the job to its walltime, PBS kills it, no record is written, and the retry repeats it. So each body
has limits of its own: START_LIMIT_S from launch to its first step, then its `seconds` of steps,
then SIGTERM to the launcher and TERM_GRACE_S for the ranks to checkpoint and exit, then SIGKILL to
the body's whole process group and KILL_WAIT_S for it to go. `body_limit_s` is their sum, from
which the probe job's walltime is derived (prism.workflow.probe), and every body also ends before
the job's own deadline (`until`). A SIGTERM to the probe itself (the scheduler's walltime; `note_job_stopped`)
stops the body the same way. Whatever happens, `drive_body` returns what the body did, its `outcome` one of:

- `checkpointed`: stopped by SIGTERM after its steps, and the trainer wrote its checkpoint;
- `stopped`: ended after SIGTERM without a checkpoint (a launcher that does not forward SIGTERM);
- `killed`: still alive TERM_GRACE_S after SIGTERM, ended by SIGKILL;
- `hung`: no first step within START_LIMIT_S (then stopped as above: `sigkill` says whether it took SIGKILL);
- `finished`: ended on its own before it was stopped (a body that failed: its exit status and log say why).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# Launch to first step: every rank's imports, the process group, the model, the loader's first batch, a compile.
START_LIMIT_S = 600.0
# SIGTERM to exit: the trainer's checkpoint at SIGTERM and the ranks' exit.
TERM_GRACE_S = 60.0
# SIGKILL to exit (a process in uninterruptible sleep may take a moment).
KILL_WAIT_S = 10.0
POLL_S = 0.2
# The trainer's line when SIGTERM stopped it (prism.train.trainer): the step its checkpoint holds.
STOPPED_LINE = re.compile(r"stopped \(SIGTERM during step \d+\): checkpoint at step (\d+)")


# Set when the probe's own job got SIGTERM (its walltime): stop the body, write the record, run no more.
JOB_STOPPED = threading.Event()


@dataclass(frozen=True)
class Limits:
    """One body's limits in seconds; `until` is the job's deadline (time.monotonic), by which the body has ended."""

    seconds: float
    until: float
    start_s: float = START_LIMIT_S
    grace_s: float = TERM_GRACE_S
    kill_s: float = KILL_WAIT_S

    def stop_by(self, t0: float, first: float | None) -> float:
        """When SIGTERM goes out: `seconds` after the first step, else at the start limit; never so late that
        the grace and the kill would pass the job's deadline."""
        planned = t0 + (self.start_s if first is None else first + self.seconds)
        return min(planned, self.until - self.grace_s - self.kill_s)


def body_limit_s(seconds: float) -> float:
    """The longest one body of `seconds` of steps can take, start to exit: what a probe job's walltime adds up."""
    return START_LIMIT_S + seconds + TERM_GRACE_S + KILL_WAIT_S


def perf_rows(path: Path) -> list[dict]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line being written
    return rows


def note_job_stopped(signum: int, frame: object) -> None:
    """The probe's SIGTERM handler: a flag the body's watch reads (an exception could land while the body is
    being stopped and leave it running)."""
    JOB_STOPPED.set()


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def launchers(body_pid: int) -> list[int]:
    """The body's launchers: the highest `mpiexec` processes under it (a pack's body runs its `mpiexec`
    under the slot's wrapper and a shell), else the body's own children."""
    level = children(body_pid)
    while level:
        found = [pid for pid in level if command_name(pid).startswith("mpiexec")]
        if found:
            return found
        level = [child for pid in level for child in children(pid)]
    return children(body_pid)


def terminate_launcher(body_pid: int) -> None:
    """SIGTERM to the body's launcher (`mpiexec`), which passes it to every rank, as at a walltime; the
    ranks' loader workers are left to end with their rank (signalled themselves, a rank's DataLoader
    would fail instead of checkpointing). Without a launcher to signal, the whole body's group."""
    found = launchers(body_pid)
    for pid in found:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    if not found:
        kill_group(body_pid, signal.SIGTERM)


def kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def watch(proc: subprocess.Popen, perf: Path, rows_before: int, limits: Limits) -> tuple[float | None, bool]:
    """Poll the body until its stop time or its exit: (seconds from launch to its first step, whether the
    probe's own job was stopped meanwhile)."""
    t0, first = time.monotonic(), None
    while proc.poll() is None and time.monotonic() < limits.stop_by(t0, first) and not JOB_STOPPED.is_set():
        if first is None and len(perf_rows(perf)) > rows_before:
            first = time.monotonic() - t0
        time.sleep(POLL_S)
    if first is None and len(perf_rows(perf)) > rows_before:
        first = time.monotonic() - t0  # its first step landed as it ended
    return first, JOB_STOPPED.is_set()


def stop(proc: subprocess.Popen, limits: Limits) -> tuple[int | None, bool, float]:
    """SIGTERM to the launcher, SIGKILL to the body's group after the grace: (exit status, whether SIGKILL was
    needed, seconds from SIGTERM to exit). Whatever is left of the group afterwards is killed too."""
    signalled = time.monotonic()
    killed = False
    if proc.poll() is None:
        terminate_launcher(proc.pid)
        try:
            proc.wait(timeout=limits.grace_s)
        except subprocess.TimeoutExpired:
            killed = True
            kill_group(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=limits.kill_s)
            except subprocess.TimeoutExpired:
                pass  # unkillable (uninterruptible sleep): said by an exit status of None
    kill_group(proc.pid, signal.SIGKILL)  # ranks or workers that outlived the launcher
    return proc.returncode, killed, time.monotonic() - signalled


def outcome(first: float | None, ended_itself: bool, killed: bool, checkpoint_step: int | None) -> str:
    """The body's outcome in one word (the module's docstring)."""
    if ended_itself:
        return "finished"
    if first is None:
        return "hung"
    if killed:
        return "killed"
    return "checkpointed" if checkpoint_step is not None else "stopped"


def drive_body(argv: list[str], perf: Path, log_path: Path, limits: Limits) -> dict:
    """Run `argv` (a body writing `perf` rows) under `limits`, logging to `log_path`; what it did (never raises
    for the body's sake). Only the perf rows and log lines this run appends count."""
    rows_before = len(perf_rows(perf))
    log_before = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "a") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        first, job_stopped = watch(proc, perf, rows_before, limits)
        ended_itself = proc.poll() is not None and not job_stopped
        status, killed, stop_s = stop(proc, limits)
    with open(log_path, errors="replace") as handle:
        handle.seek(log_before)
        stopped = STOPPED_LINE.search(handle.read())
    checkpoint_step = int(stopped.group(1)) if stopped else None
    return {
        "outcome": outcome(first, ended_itself, killed, checkpoint_step), "sigkill": killed,
        "job_stopped": job_stopped, "first_step_s": first, "exit_status": status,
        "checkpoint_s": None if ended_itself else stop_s, "checkpoint_step": checkpoint_step,
        "limits": {"start_s": limits.start_s, "seconds": limits.seconds, "grace_s": limits.grace_s},
        "rows": perf_rows(perf)[rows_before:], "log": str(log_path),
    }  # fmt: skip
