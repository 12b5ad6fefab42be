"""The job-environment side of `prism cluster check`: what Aurora's own pages warn of, before a submission.

Each of these fails a study late and quietly: the debug queue's one job a user (an open `qsub -I -q
debug` session counts) holds the probe's jobs back; a long `TMPDIR` breaks the Unix sockets of
processes started by `mpiexec` ("AF_UNIX path too long"); an unversioned `module load frameworks`
takes whatever default ALCF ships that month, against which the venv was not built; and the cluster
profile's helpers run with the Python Snakemake runs with, which must be a Python 3.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from prism.launch.sitepbs import Check, qstat

Runner = Callable[[list[str]], "str | None"]
# sun_path holds 108 bytes; Python's multiprocessing and torch add about 40 below TMPDIR.
SOCKET_PATH_MAX = 107
SOCKET_SUFFIX = 40
FRAMEWORKS = re.compile(r"^\s*module\s+(?:load|add)\s+(.*)$")
VERSION = re.compile(r"frameworks[/_-](?:aurora_frameworks-)?(\d{4}\.\d+(?:\.\d+)?)")
LIVE_STATES = {"Q", "R", "H", "E", "W", "T", "B"}


def user_jobs(text: str) -> list[tuple[str, str, str]]:
    """(job id, state, queue) of every job in `qstat -u USER`'s table (PBS Pro and Torque-style alike)."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 6 and re.match(r"^\d+", words[0]):
            out.append((words[0].split(".")[0], words[-2], words[-1]))
    return out


def check_debug_queue(probe_queue: str = "debug", environ: Mapping[str, str] | None = None, run: Runner = qstat):
    """The probe's queue allows one job a user: say which job of this user holds it (this session's too)."""
    environ = os.environ if environ is None else environ
    user = environ.get("USER") or environ.get("LOGNAME") or ""
    text = run(["-u", user]) if user else None
    if text is None:
        return Check("debug queue", True, f"not checked (no `qstat -u {user or 'USER'}` answer here)")
    here = str(environ.get("PBS_JOBID", "")).split(".")[0]
    held = [job for job, state, queue in user_jobs(text) if queue == probe_queue and state in LIVE_STATES]
    others = [job for job in held if job != here]
    if others:
        return Check(
            "debug queue",
            False,
            f"you hold {probe_queue} job(s) {', '.join(others)}: {probe_queue} allows 1 job running or queued a "
            f"user, so the probe's jobs would wait behind it: end it (qdel, or exit its `qsub -I`) first",
        )
    if here and here in held:
        return Check(
            "debug queue",
            True,
            f"this session is {probe_queue} job {here}: exit it before submitting the probe ({probe_queue} "
            "allows 1 job a user, an interactive one included)",
        )
    return Check("debug queue", True, f"no {probe_queue} job of yours: the probe's jobs can start")


def check_tmpdir(environ: Mapping[str, str] | None = None, jobscript: str | Path = "profiles/aurora/jobscript.sh"):
    """Every job sets a short node-local TMPDIR (the profile's job script), and this shell's is short too."""
    environ = os.environ if environ is None else environ
    script = Path(jobscript)
    if script.is_file() and "export TMPDIR=" not in script.read_text():
        return Check("TMPDIR", False, f"{script} sets no TMPDIR: a job's mpiexec'd ranks inherit a long one")
    tmp = environ.get("TMPDIR")
    if tmp and len(tmp) + SOCKET_SUFFIX > SOCKET_PATH_MAX:
        return Check(
            "TMPDIR",
            False,
            f"TMPDIR {tmp} is {len(tmp)} characters: Unix sockets under it pass the {SOCKET_PATH_MAX + 1}-byte "
            'limit ("AF_UNIX path too long"): export TMPDIR=/tmp',
        )
    if tmp and not os.access(tmp, os.W_OK):
        return Check("TMPDIR", False, f"TMPDIR {tmp} is not writable: export TMPDIR=/tmp")
    return Check("TMPDIR", True, f"{tmp or 'unset'} here; every job sets its own under /tmp ({script.name})")


def venv_base(prefix: str | Path = sys.prefix) -> str:
    """Where the venv's Python came from (pyvenv.cfg's `home`/`command`/`executable`), or '' without one."""
    cfg = Path(prefix) / "pyvenv.cfg"
    if not cfg.is_file():
        return ""
    lines = cfg.read_text(errors="replace").splitlines()
    return " ".join(line.split("=", 1)[1].strip() for line in lines if "=" in line)


def check_frameworks(config: Mapping, environ: Mapping[str, str] | None = None, base: str | None = None) -> Check:
    """`module load frameworks` pinned to a version in cluster.setup, the one loaded here and the venv's."""
    environ = os.environ if environ is None else environ
    lines = [str(line) for line in (config.get("cluster") or {}).get("setup") or []]
    modules = [m.group(1).split() for line in lines if (m := FRAMEWORKS.match(line))]
    named = [word for words in modules for word in words if word.split("/")[0] == "frameworks"]
    if not named:
        return Check("frameworks", True, "cluster.setup loads no frameworks module")
    if any("/" not in word for word in named):
        loaded = VERSION.findall(environ.get("LOADEDMODULES", ""))
        pin = f"`module load frameworks/{loaded[0]}`" if loaded else "`module load frameworks/VERSION`"
        return Check(
            "frameworks",
            False,
            f"cluster.setup loads `frameworks` without a version: ALCF changes the default, and the venv is "
            f"built against one: pin the one you built it with, {pin} (`module avail frameworks` lists them)",
        )
    wanted = named[0].split("/", 1)[1]
    seen = {
        "loaded here": VERSION.findall(environ.get("LOADEDMODULES", "")),
        "the venv's Python": VERSION.findall(venv_base() if base is None else base),
    }
    wrong = [f"{where} {', '.join(found)}" for where, found in seen.items() if found and wanted not in found]
    if wrong:
        return Check("frameworks", False, f"cluster.setup loads frameworks/{wanted}, but {'; '.join(wrong)}")
    known = [where for where, found in seen.items() if found]
    return Check("frameworks", True, f"frameworks/{wanted}" + (f" (as {' and '.join(known)})" if known else ""))


def check_helpers_python(executable: str = sys.executable) -> Check:
    """The profile's helpers run with the Python that runs Snakemake (first on PATH in the workflow)."""
    bindir = Path(executable).parent
    python3 = bindir / "python3"
    if not python3.exists():
        return Check("helpers' python", False, f"{bindir} has no python3: run Snakemake from the study's venv")
    return Check(
        "helpers' python",
        True,
        f"{python3} (Python {sys.version_info.major}.{sys.version_info.minor}), first on PATH for the helpers",
    )
