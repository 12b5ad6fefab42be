#!/usr/bin/env python3
"""A real PBS-style scheduler on this machine, for the cluster tests.

Slurm (slurmctld + slurmd) with munge authentication, everything - keys, sockets,
state, logs, pid files - in one private folder, and Slurm's Torque-compatible
`qsub`/`qstat`/`qdel` (Debian package `slurm-wlm-torque`) in front of it. Jobs
really queue and run; nothing is faked. The Torque wrapper honours only the last `-l`,
exports the whole environment and has no `qstat -x`: jobs record their own exit status.

    tools/local_pbs.py start DIR      # prints `export SLURM_CONF=DIR/slurm.conf`
    eval "$(tools/local_pbs.py start DIR)"; qsub ...; tools/local_pbs.py stop DIR

Needs root (slurmd runs jobs as their user) and the Debian packages that
`tools/install-system-deps.sh` installs. Daemons are stopped only by the pids in
their own pid files under DIR, never by name. Ports are picked free at start, so
two instances (two test sessions) do not collide.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

NEEDED = ("munged", "slurmctld", "slurmd", "sinfo", "qsub", "qstat", "qdel")
SPANK_PBS = "/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_pbs.so"
# Partitions named like Aurora's queues, so a profile's `-q debug` (or capacity) works here too.
PARTITIONS = ("debug", "debug-scaling", "prod", "capacity")


class SchedulerUnavailable(RuntimeError):
    """The scheduler cannot run here (not root, packages missing); the message says why."""


def missing_requirements() -> str | None:
    """Why the scheduler cannot start here, or None when it can."""
    if os.geteuid() != 0:
        return "the local Slurm scheduler needs root (slurmd runs jobs as their owner)"
    missing = [name for name in NEEDED if shutil.which(name) is None]
    if missing:
        return f"missing {', '.join(missing)}: run tools/install-system-deps.sh as root"
    if not Path(SPANK_PBS).exists():
        return f"missing {SPANK_PBS} (package slurm-wlm-torque)"
    return None


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def env_for(folder: str | os.PathLike) -> dict[str, str]:
    """The environment variables a client (qsub, sinfo, a test) needs to reach this instance."""
    return {"SLURM_CONF": str(Path(folder).resolve() / "slurm.conf")}


# Each instance numbers its jobs from one of ID_BLOCKS blocks of ID_BLOCK ids (all below Slurm's MaxJobId).
ID_BLOCK, ID_BLOCKS = 4_000, 16_000


def first_job_id(port: int, now: float) -> int:
    """The first job id of an instance whose slurmctld listens on `port`, started at `now`.

    Job ids differ between instances (Slurm would restart at 1), so that a job's recorded exit status
    (logs/pbs/status/<id>) is never mistaken for an older job's, nor a job's /tmp/prism.<id> for that of
    another instance running at once (the test suite runs two): instances running at once have
    different ports, so blocks of their own, and one started later another block again."""
    return (int(now) + port) % ID_BLOCKS * ID_BLOCK + 1


def write_config(folder: Path, cpus: int, host: str) -> Path:
    """Write slurm.conf and plugstack.conf; return the slurm.conf path."""
    ctld_port, d_port = _free_ports(2)
    (folder / "state").mkdir(exist_ok=True)
    (folder / "spool").mkdir(exist_ok=True)
    (folder / "plugstack.conf").write_text(f"required {SPANK_PBS}\n")
    lines = [
        "ClusterName=prismlocal",
        f"SlurmctldHost={host}",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={d_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder}/munge.sock",
        f"StateSaveLocation={folder}/state",
        f"SlurmdSpoolDir={folder}/spool",
        f"SlurmctldPidFile={folder}/slurmctld.pid",
        f"SlurmdPidFile={folder}/slurmd.pid",
        f"SlurmctldLogFile={folder}/slurmctld.log",
        f"SlurmdLogFile={folder}/slurmd.log",
        f"PlugStackConfig={folder}/plugstack.conf",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=2",
        "AccountingStorageType=accounting_storage/none",
        # The scheduler's own record of every job that ended (one line each: id, name, state, nodes,
        # times, working directory): what a test counts a study's jobs from, not the workflow's logs.
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={folder}/jobcomp.log",
        "JobAcctGatherType=jobacct_gather/none",
        "MailProg=/bin/true",
        # Keep finished jobs visible to qstat for 10 minutes (state C).
        "MinJobAge=600",
        f"FirstJobId={first_job_id(ctld_port, time.time())}",
        "SchedulerParameters=sched_interval=1",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        f"NodeName={host} CPUs={cpus} RealMemory=4000 State=UNKNOWN",
    ]
    if cpus > (os.cpu_count() or 1):
        # A node declared with more CPUs than this host has (an Aurora node's 12 device slots on a 2-core
        # host): slurmd takes the declared shape instead of refusing it; its jobs share the real cores.
        lines.append("SlurmdParameters=config_overrides")
    for i, part in enumerate(PARTITIONS):
        default = "YES" if i == 0 else "NO"
        lines.append(f"PartitionName={part} Nodes={host} Default={default} MaxTime=INFINITE State=UP")
    conf = folder / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def start(folder: str | os.PathLike, cpus: int | None = None, timeout: float = 30.0) -> dict[str, str]:
    """Start munged, slurmctld and slurmd with everything under `folder`; wait until the node is idle.

    Returns the client environment (`SLURM_CONF`). Raises SchedulerUnavailable when
    the machine cannot run it, RuntimeError (with the daemon's log tail) when a
    daemon does not come up.
    """
    why = missing_requirements()
    if why:
        raise SchedulerUnavailable(why)
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    host = socket.gethostname().split(".")[0]
    cpus = cpus or os.cpu_count() or 1

    key = folder / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    subprocess.run(
        [
            "munged",
            "--force",
            f"--key-file={key}",
            f"--socket={folder}/munge.sock",
            f"--pid-file={folder}/munged.pid",
            f"--log-file={folder}/munged.log",
            f"--seed-file={folder}/munge.seed",
        ],
        check=True,
    )
    conf = write_config(folder, cpus, host)
    env = {**os.environ, **env_for(folder)}
    for daemon in ("slurmctld", "slurmd"):
        # -c: start clean (no state from an earlier instance); daemonises, writes its pid file.
        result = subprocess.run([daemon, "-c", "-f", str(conf)], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            stop(folder)
            raise RuntimeError(f"{daemon} failed to start: {result.stderr.strip()}\n{_tail(folder / f'{daemon}.log')}")
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True)
        state = out.stdout.strip()
        if state.startswith("idle"):
            return env_for(folder)
        time.sleep(0.3)
    stop(folder)
    raise RuntimeError(
        f"node not idle after {timeout:.0f}s (sinfo says {state!r})\n"
        f"{_tail(folder / 'slurmctld.log')}\n{_tail(folder / 'slurmd.log')}"
    )


def completed_jobs(folder: str | os.PathLike) -> list[dict[str, str]]:
    """Every job this instance has ended, as the scheduler logged it (jobcomp/filetxt): one dict of its
    `Key=value` fields a job (JobId, JobName, JobState, NodeCnt, StartTime, EndTime, WorkDir, ...)."""
    path = Path(folder) / "jobcomp.log"
    if not path.exists():
        return []
    jobs = []
    for line in path.read_text(errors="replace").splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("JobId"):
            jobs.append(fields)
    return jobs


def _tail(path: Path, n: int = 15) -> str:
    try:
        return f"--- {path.name}:\n" + "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"--- {path.name}: (none)"


def _drain(folder: Path, timeout: float = 15.0) -> None:
    """Cancel this instance's jobs and wait until none is left, so no job step outlives slurmd."""
    pid = _pid(folder / "slurmctld.pid")
    if pid is None or not _alive(pid):
        return
    env = {**os.environ, **env_for(folder)}
    try:
        subprocess.run(
            ["scancel", "--user", pwd.getpwuid(os.getuid()).pw_name], env=env, capture_output=True, timeout=10
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=10)
            if out.returncode != 0 or not out.stdout.strip():
                return
            time.sleep(0.3)
    except (OSError, subprocess.TimeoutExpired):
        return


def stop(folder: str | os.PathLike, timeout: float = 15.0) -> list[int]:
    """Stop the daemons of this instance by the pids in its pid files; return the pids signalled."""
    folder = Path(folder).resolve()
    _drain(folder)
    stopped = []
    for name in ("slurmd", "slurmctld", "munged"):
        pid = _pid(folder / f"{name}.pid")
        if pid is None or not _alive(pid):
            continue
        os.kill(pid, signal.SIGTERM)
        stopped.append(pid)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_start = sub.add_parser("start", help="start the daemons; print the shell export for SLURM_CONF")
    p_start.add_argument("folder")
    p_start.add_argument("--cpus", type=int, default=None, help="the node CPUs (default: the host cores)")
    p_stop = sub.add_parser("stop", help="stop the daemons by the pids in FOLDER")
    p_stop.add_argument("folder")
    args = parser.parse_args(argv)
    if args.cmd == "start":
        try:
            env = start(args.folder, args.cpus)
        except SchedulerUnavailable as err:
            print(f"local_pbs: {err}", file=sys.stderr)
            return 2
        for key, value in env.items():
            print(f"export {key}={value}")
        return 0
    pids = stop(args.folder)
    print(f"stopped pids: {' '.join(map(str, pids)) or 'none'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
