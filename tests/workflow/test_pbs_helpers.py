"""The profile's status and sidecar commands are deaf to the terminal's Ctrl-C; Snakemake handles it.

A Ctrl-C reaches every process of the terminal's foreground group: a status command that died by it
would kill cluster-generic's status thread (docs/cluster.md, "Ctrl-C"), a sidecar that died by it would
leave the jobs submitted afterwards uncancelled. Each command here runs as the executor runs it (by
its shebang, in a group of its own as the terminal's), with stand-ins for `qstat` and `qdel` on PATH,
and SIGINT goes to its whole group, again and again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "aurora"


def stand_ins(tmp_path: Path) -> dict[str, str]:
    """`qstat` that answers after a second (a status check in progress), `qdel` that records its ids."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "qstat").write_text("#!/bin/sh\nsleep 1\necho '    job_state = R'\n")
    (bindir / "qdel").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "qdel.args"}\n')
    for tool in ("qstat", "qdel"):
        (bindir / tool).chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def interrupt_group(proc: subprocess.Popen, seconds: float, every: float = 0.05) -> None:
    """Ctrl-C to `proc`'s group every `every` seconds for `seconds` (from just after its start), or until it ends."""
    time.sleep(0.02)
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(every)


def test_the_status_command_answers_through_ctrl_c(tmp_path):
    env = stand_ins(tmp_path)
    proc = subprocess.Popen(
        [str(PROFILE / "pbs_status.py"), "42.pbs", "--status-dir", str(tmp_path / "status")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    interrupt_group(proc, 3.0)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out == "running\n", (proc.returncode, out, err)


def test_the_sidecar_outlives_ctrl_c_and_cancels_at_the_executors_end(tmp_path):
    env = stand_ins(tmp_path)
    proc = subprocess.Popen(
        [str(PROFILE / "pbs_sidecar.py")], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    registry = Path(proc.stdout.readline().strip())
    registry.write_text("7.pbs\n8.pbs\n")
    (tmp_path / "logs" / "pbs" / "status" / "8").write_text("0\n")  # 8 has finished
    interrupt_group(proc, 1.0)
    assert proc.poll() is None and not (tmp_path / "qdel.args").exists()  # Ctrl-C: still there, nothing cancelled
    proc.terminate()  # the executor's end (after a Ctrl-C that Snakemake heard, too)
    assert proc.wait(timeout=30) == 0
    assert (tmp_path / "qdel.args").read_text().split() == ["7.pbs"] and not registry.exists()


def test_the_slurm_sidecar_cancels_the_unfinished_jobs_with_scancel(tmp_path):
    """profiles/slurm-packs' sidecar: the same, with Slurm's `scancel` and that profile's status folder."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "scancel").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scancel.args"}\n')
    (bindir / "scancel").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    sidecar = REPO / "profiles" / "slurm-packs" / "slurm_sidecar.py"
    proc = subprocess.Popen([str(sidecar)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    registry = Path(proc.stdout.readline().strip())
    assert registry.parent == tmp_path / "logs" / "slurm"
    registry.write_text("41\n42\n")
    (tmp_path / "logs" / "slurm" / "status" / "42").write_text("0\n")  # 42 has finished
    interrupt_group(proc, 0.5)
    assert proc.poll() is None
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert (tmp_path / "scancel.args").read_text().split() == ["41"] and not registry.exists()
