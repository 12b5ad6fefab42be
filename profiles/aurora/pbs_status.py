#!/usr/bin/env -S --ignore-signal=INT python3
"""Status of one PBS job for Snakemake's cluster-generic executor: prints `running`, `success`
or `failed` and always exits 0 (a non-zero exit would abort the whole workflow).

    pbs_status.py JOBID [--status-dir logs/pbs/status] [--scheduler pbs|slurm]

The job's own record (`STATUS_DIR/<id>`, written by profiles/aurora/jobscript.sh when the job
body ends) decides success or failure. The scheduler is asked only whether the job still
exists: Torque-style `qstat` shows every finished job as `C` without an exit status, and
PBS Pro forgets finished jobs after its history window. A job the scheduler no longer knows
(or shows finished) without a record, even after a few retries, is `failed`: it was killed
(walltime, qdel, node failure) or never started. When the scheduler cannot be reached at
all, the answer is `running` (ask again later) rather than failing a healthy job.
`--scheduler slurm` (profiles/slurm-packs, which submits this profile's job script with sbatch)
asks `squeue` in place of `qstat`: Slurm lists a finished job for its MinJobAge, then forgets it.
Standard library only: it runs under whatever python3 the login node has.

Deaf to SIGINT: a Ctrl-C in Snakemake's terminal reaches every process of its foreground group,
this command too, and the cluster-generic executor (1.0.9) reads an unset result when its status
command dies by a signal, which kills its status thread and leaves Snakemake deaf to the jobs
(docs/cluster.md, "Ctrl-C"). The interrupt is Snakemake's to handle. The shebang has `env` ignore
SIGINT before Python starts (no window while the interpreter loads), and the module does it again
for a call through `python3 pbs_status.py`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

signal.signal(signal.SIGINT, signal.SIG_IGN)

FINISHED_STATES = {"C", "F", "X"}  # Torque: completed; PBS Pro: finished, subjob finished
# qstat exit codes for "no such job": PBS Pro / Torque 153 (unknown job id), PBS Pro 35
# (job finished, history not requested).
UNKNOWN_JOB_CODES = {153, 35}


def job_record(status_dir: Path, job_id: str) -> str | None:
    """`success`/`failed` from the job's own exit-status file, or None when there is none yet."""
    short = job_id.split(".")[0]
    for name in dict.fromkeys((short, job_id)):
        path = status_dir / name
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        try:
            return "success" if int(text) == 0 else "failed"
        except ValueError:
            return "failed"
    return None


# Slurm's states of a job that has ended (squeue --states=all lists them for MinJobAge).
SLURM_ENDED = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
               "PREEMPTED", "TIMEOUT", "SPECIAL_EXIT"}  # fmt: skip


def slurm_state(job_id: str, timeout: float) -> str:
    """`active`, `gone` (unknown or ended) or `unreachable`, from squeue."""
    try:
        command = ["squeue", "--noheader", "--states=all", "--format=%T", f"--jobs={job_id}"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return "unreachable"
    if "Invalid job id" in result.stderr:
        return "gone"
    if result.returncode != 0:
        return "unreachable"
    states = result.stdout.split()
    return "active" if states and not set(states) <= SLURM_ENDED else "gone"


def scheduler_state(job_id: str, timeout: float, scheduler: str = "pbs") -> str:
    """`active`, `gone` (unknown or finished) or `unreachable`."""
    if scheduler == "slurm":
        return slurm_state(job_id, timeout)
    try:
        result = subprocess.run(["qstat", "-f", job_id], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return "unreachable"
    if result.returncode in UNKNOWN_JOB_CODES or "Unknown Job Id" in result.stderr:
        return "gone"
    if result.returncode != 0:
        return "unreachable"
    for line in result.stdout.splitlines():
        key, _, value = line.strip().partition("=")
        if key.strip() == "job_state":
            return "gone" if value.strip() in FINISHED_STATES else "active"
    return "gone" if not result.stdout.strip() else "active"


def register(job_id: str) -> None:
    """Tell this run's sidecar (pbs_sidecar.py) about the job, so Ctrl-C cancels it.

    Submitted jobs are registered by the submit command; this also covers jobs that
    Snakemake adopted from an earlier, interrupted run ("Resuming incomplete job").
    """
    registry = os.environ.get("SNAKEMAKE_CLUSTER_SIDECAR_VARS")
    if registry and os.path.isfile(registry):
        with open(registry, "a") as f:
            f.write(job_id + "\n")


def status(job_id: str, status_dir: Path, retries: int, wait: float, timeout: float, scheduler: str = "pbs") -> str:
    record = job_record(status_dir, job_id)
    if record:
        return record
    state = scheduler_state(job_id, timeout, scheduler)
    if state in ("active", "unreachable"):
        register(job_id)
        return "running"
    # Gone without a record: give a shared filesystem a moment to show the file.
    for _ in range(retries):
        time.sleep(wait)
        record = job_record(status_dir, job_id)
        if record:
            return record
        if scheduler_state(job_id, timeout, scheduler) == "active":  # a transient answer before
            return "running"
    return "failed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job_id")
    parser.add_argument("--status-dir", default="logs/pbs/status", type=Path)
    parser.add_argument("--retries", type=int, default=2)
    parser.add_argument("--wait", type=float, default=1.0, help="seconds between retries")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds qstat may take")
    parser.add_argument("--scheduler", choices=("pbs", "slurm"), default="pbs", help="whom to ask: qstat or squeue")
    try:
        args = parser.parse_args(argv)
        job = args.job_id.strip()
        answer = status(job, args.status_dir, args.retries, args.wait, args.timeout, args.scheduler)
    except SystemExit:
        answer = "failed"
    except Exception as err:  # never exit non-zero (Snakemake would abort); never hang a job forever
        print(f"pbs_status: {err!r}", file=sys.stderr)
        answer = "failed"
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
