"""The PBS side of `prism cluster check`: the queue's limits, the filesystems, the DAOS variables.

A job that breaks a queue's limits is refused at submission, or vanishes after routing (prod
starts at 256 nodes); a job that requests a filesystem that is down does not start, and one that
writes to a filesystem it did not request may find it gone; a DAOS study without DAOS_POOL and
DAOS_CONT fails in every job, after its queue wait. Each is cheap to see on a login node:
`qstat -Qf QUEUE` shows the queue's limits, `qstat -Bf` the server's valid filesystems. Where
qstat is missing or says nothing of a limit (a Torque-style wrapper), the check says so and passes.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from prism.launch.walltime import walltime_seconds


@dataclass(frozen=True)
class Check:
    """One check's verdict: what was looked at, and what was found (with the fix when it failed)."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


Runner = Callable[[list[str]], "str | None"]
DAOS_VARIABLES = ("DAOS_POOL", "DAOS_CONT")
DAOS_FILESYSTEMS = ("daos_user_fs", "daos_user")
# Where a path lies, by prefix: Aurora's Lustre (flare) and home.
MOUNTS = (("/lus/flare", "flare"), ("/lustre/flare", "flare"))


def qstat(args: list[str]) -> str | None:
    """`qstat ARGS`' output, or None where qstat is missing or fails."""
    try:
        out = subprocess.run(["qstat", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def attributes(text: str) -> dict[str, str]:
    """`key = value` lines of `qstat -f`-style output (a tab-indented line continues the value before)."""
    out: dict[str, str] = {}
    last = None
    for line in text.splitlines():
        if line.startswith("\t") and last:
            out[last] += line.strip()
            continue
        key, sep, value = line.strip().partition(" = ")
        if sep:
            last = key.strip()
            out[last] = value.strip()
    return out


def job_nodes(cluster: Mapping) -> list[int]:
    return sorted({int(cluster.get("nodes", 1)), *(int(n) for n in (cluster.get("nodes_by_backbone") or {}).values())})


def queue_problems(cluster: Mapping, limits: dict[str, str]) -> list[str]:
    """What the study's jobs would break of the queue's limits (nodes, walltime), each in words."""
    queue, problems = cluster.get("queue"), []
    nodes = job_nodes(cluster)
    low, high = limits.get("resources_min.nodect"), limits.get("resources_max.nodect")
    if low and min(nodes) < int(low):
        problems.append(f"a {min(nodes)}-node job is below queue {queue}'s resources_min.nodect {low}")
    if high and max(nodes) > int(high):
        problems.append(f"a {max(nodes)}-node job is above queue {queue}'s resources_max.nodect {high}")
    most, least = limits.get("resources_max.walltime"), limits.get("resources_min.walltime")
    if most and walltime_seconds(cluster.get("walltime", "00:00:00")) > walltime_seconds(most):
        problems.append(f"cluster.walltime {cluster['walltime']} is above queue {queue}'s limit {most}")
    if least and walltime_seconds(cluster.get("min_walltime", "00:00:00")) < walltime_seconds(least):
        problems.append(f"cluster.min_walltime {cluster['min_walltime']} is below queue {queue}'s {least}")
    return problems


def check_queue(cluster: Mapping, run: Runner = qstat) -> Check:
    queue = str(cluster.get("queue") or "")
    text = run(["-Qf", queue]) if queue else None
    if not text:
        return Check("queue", True, f"queue {queue}'s limits not checked (no `qstat -Qf {queue}` answer here)")
    problems = queue_problems(cluster, attributes(text))
    if problems:
        return Check("queue", False, "; ".join(problems) + ": choose another queue (cluster.queue) or node count")
    return Check("queue", True, f"the jobs ({', '.join(map(str, job_nodes(cluster)))} node(s)) fit queue {queue}")


def filesystem_of(path: str | Path, home: str | None = None) -> str | None:
    """The PBS filesystem name a path lies on (flare, home), or None where not known."""
    real = os.path.realpath(path)
    for prefix, name in MOUNTS:
        if real == prefix or real.startswith(prefix + "/"):
            return name
    home = os.path.realpath(home or os.path.expanduser("~"))
    return "home" if real == home or real.startswith(home + "/") else None


def check_filesystems(config: Mapping, run: Runner = qstat, home: str | None = None) -> Check:
    """The requested filesystems are valid names, and the study folder (every cache) lies on one."""
    requested = str((config.get("cluster") or {}).get("filesystems") or "").split(":")
    text = run(["-Bf"])
    valid = attributes(text or "").get("resources_available.valid_filesystems")
    unknown = [fs for fs in requested if valid and fs not in valid.split(",")]
    if unknown:
        return Check("filesystems", False, f"{', '.join(unknown)} not in qstat -Bf's valid_filesystems ({valid})")
    study = str(config.get("study_dir") or "scaling-study")
    where = filesystem_of(study, home)
    if where and where not in requested:
        return Check(
            "filesystems",
            False,
            f"study_dir {study} (every job's output and caches) lies on {where}, which cluster.filesystems "
            f"({':'.join(requested)}) does not request: add it, or clone into the project folder on flare",
        )
    said = "valid" if valid else "not checked against qstat -Bf"
    return Check("filesystems", True, f"{':'.join(requested)} ({said}); study_dir on {where or 'a folder here'}")


def check_daos(config: Mapping, environ: Mapping[str, str] | None = None) -> Check:
    """storage daos: the DAOS variables set, passed to the jobs, and DAOS requested; else DAOS not requested."""
    environ = os.environ if environ is None else environ
    cluster = config.get("cluster") or {}
    requested = str(cluster.get("filesystems") or "").split(":")
    daos_fs = [fs for fs in requested if fs in DAOS_FILESYSTEMS]
    if (config.get("train") or {}).get("storage") != "daos":
        if daos_fs:
            return Check("daos", False, f"storage is not daos but every job requests {daos_fs[0]}: drop it")
        return Check("daos", True, "not used (train.storage is not daos)")
    unset = [name for name in DAOS_VARIABLES if not environ.get(name)]
    unpassed = [name for name in DAOS_VARIABLES if name not in (cluster.get("env") or [])]
    if unset or unpassed or not daos_fs:
        why = [f"export {' '.join(unset)} in this shell"] * bool(unset)
        why += [f"add {', '.join(unpassed)} to cluster.env (qsub -v)"] * bool(unpassed)
        why += ["add daos_user_fs to cluster.filesystems"] * (not daos_fs)
        return Check("daos", False, "storage daos: " + "; ".join(why))
    return Check("daos", True, f"container {environ['DAOS_POOL']}:{environ['DAOS_CONT']}, passed with qsub -v")
