#!/usr/bin/env -S --ignore-signal=INT python3
"""Cancels this Snakemake run's PBS jobs when Snakemake stops early (Ctrl-C).

cluster-generic starts this "sidecar" once per Snakemake run and terminates it when the
run ends. Its first output line (a registry file) reaches the submit command as
$SNAKEMAKE_CLUSTER_SIDECAR_VARS; the submit command appends each new job id to it. When
the sidecar is terminated (SIGTERM: the executor's end, after Ctrl-C too) it `qdel`s every
registered job that has not recorded an exit status (logs/pbs/status/<id>, see jobscript.sh),
then removes the registry. It ignores SIGINT, as the status command does (pbs_status.py): a
Ctrl-C reaches the terminal's whole foreground group, and a sidecar ended by it would leave every
job Snakemake submits afterwards (it goes on where the interrupt is lost: docs/cluster.md,
"Ctrl-C") unregistered and uncancelled.

Why: on Ctrl-C Snakemake cancels only the jobs in its active list, and the executor empties
that list while a round of status checks runs, so an interrupt during a round would leave
queued jobs behind. On a normal end every job has recorded its status and nothing is
cancelled. Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STATUS_DIR = Path("logs/pbs/status")


def unfinished(registry: Path, status_dir: Path = STATUS_DIR) -> list[str]:
    try:
        ids = [line.strip() for line in registry.read_text().splitlines() if line.strip()]
    except OSError:
        return []
    return [i for i in dict.fromkeys(ids) if not (status_dir / i.split(".")[0]).exists()]


def cancel(registry: Path, status_dir: Path = STATUS_DIR, command: str = "qdel") -> None:
    ids = unfinished(registry, status_dir)
    if ids:
        print(f"sidecar: {command} {' '.join(ids)}", file=sys.stderr, flush=True)
        try:
            subprocess.run([command, *ids], timeout=60, capture_output=True)
        except (OSError, subprocess.TimeoutExpired) as err:
            print(f"sidecar: {command} failed: {err}", file=sys.stderr, flush=True)
    try:
        registry.unlink()
    except OSError:
        pass


def main(status_dir: Path = STATUS_DIR, command: str = "qdel") -> int:
    """Serve one Snakemake run: `status_dir` holds its jobs' exit records, `command` cancels job ids (profiles/
    slurm-packs' sidecar calls this with its own folder and scancel)."""
    folder = status_dir.parent
    folder.mkdir(parents=True, exist_ok=True)
    status_dir.mkdir(parents=True, exist_ok=True)
    registry = (folder / f"submitted.{os.getpid()}.{int(time.time())}").resolve()
    registry.touch()
    done = False

    def stop(signum, frame):
        nonlocal done
        if not done:
            done = True
            cancel(registry, status_dir, command)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(registry, flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
