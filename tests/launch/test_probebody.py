"""A probe body always ends inside its limits and says what it did: checkpointed, stopped, killed, hung, finished.

Each body here is a real process tree as the aurora body's: `bash body.sh` whose child (the stand-in
for `mpiexec`) writes perf rows and, at SIGTERM, checkpoints, exits without a checkpoint, or ignores
it; the probe signals the launcher and SIGKILLs the group after the grace.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from prism.launch.probe import Probe, body_warning, job_until, run_bodies
from prism.launch.probebody import JOB_STOPPED, Limits, body_limit_s, drive_body

# The launcher's behaviour at SIGTERM: "checkpoint" (the trainer's line, exit 143), "exit" (no checkpoint),
# "ignore" (a launcher that neither forwards nor exits); before its first step it may "hang" or "fail".
LAUNCHER = """
import json, signal, sys, time
mode, perf = sys.argv[1], sys.argv[2]
step = 0
def on_term(signum, frame):
    if mode == "checkpoint":
        print(f"stopped (SIGTERM during step {step}): checkpoint at step {step}", flush=True)
        sys.exit(143)
    sys.exit(143)
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "ignore" else on_term)
if mode == "fail":
    sys.exit(3)
while True:
    if mode != "hang":
        step += 1
        with open(perf, "a") as f:
            f.write(json.dumps({"step": step, "samples_per_s": 10.0, "world_size": 1}) + "\\n")
    time.sleep(0.1)
"""
LIMITS = {"seconds": 1.0, "start_s": 3.0, "grace_s": 2.0, "kill_s": 2.0}


def body(tmp_path: Path, mode: str) -> tuple[list[str], Path, Path]:
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    perf = tmp_path / "perf.jsonl"
    script = tmp_path / "body.sh"
    # Not the last command, so bash stays the launcher's parent, as the aurora body's bash is mpiexec's.
    script.write_text(
        f"{sys.executable} {tmp_path / 'launcher.py'} {mode} {perf}\nstatus=$?\necho body done\nexit $status\n"
    )
    return ["bash", str(script)], perf, tmp_path / "probe.log"


def no_process_left(log: Path) -> bool:
    """No process of the body's tree still runs (its launcher's command line names this folder)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(log.parent / "launcher.py") in text:
            return False
    return True


@pytest.mark.parametrize(
    ("mode", "outcome", "sigkill"),
    [("checkpoint", "checkpointed", False), ("exit", "stopped", False), ("ignore", "killed", True),
     ("hang", "hung", False), ("fail", "finished", False)],
)  # fmt: skip
def test_every_body_ends_inside_its_limits_and_says_how(tmp_path, mode, outcome, sigkill):
    argv, perf, log = body(tmp_path, mode)
    t0 = time.monotonic()
    did = drive_body(argv, perf, log, Limits(until=float("inf"), **LIMITS))
    took = time.monotonic() - t0
    assert did["outcome"] == outcome and did["sigkill"] is sigkill, did
    # Launch, start limit or steps, grace, kill: never longer, whatever the launcher does with SIGTERM.
    assert took < LIMITS["start_s"] + LIMITS["seconds"] + LIMITS["grace_s"] + LIMITS["kill_s"] + 1.0, took
    assert no_process_left(log)
    if outcome == "checkpointed":
        assert did["checkpoint_step"] >= 1 and did["exit_status"] == 143 and did["rows"]
    if outcome == "killed":
        assert did["checkpoint_step"] is None and did["checkpoint_s"] >= LIMITS["grace_s"]
    if outcome == "hung":
        assert did["first_step_s"] is None and did["rows"] == []
    if outcome == "finished":
        assert did["exit_status"] == 3 and did["first_step_s"] is None


def test_a_body_never_runs_past_the_jobs_deadline(tmp_path):
    argv, perf, log = body(tmp_path, "ignore")
    t0 = time.monotonic()
    did = drive_body(argv, perf, log, Limits(seconds=60.0, until=t0 + 3.0, start_s=60.0, grace_s=1.0, kill_s=1.0))
    assert time.monotonic() - t0 < 3.5 and did["outcome"] == "killed", did


def test_a_sigterm_to_the_probe_stops_the_body_and_the_rest_is_said_not_run(tmp_path, monkeypatch):
    """The scheduler's walltime SIGTERMs the probe: the running body is stopped (it checkpoints), the
    next is not started, and both say so."""
    runs = []

    def stand_in_body(run, ppn, storage, limits):
        """The launcher above in place of the aurora body (which needs a study's data); the job's deadline kept."""
        argv, perf, log = body(tmp_path / run, "checkpoint")
        runs.append(run)
        return drive_body(argv, perf, log, Limits(seconds=30.0, until=limits.until, start_s=30.0, grace_s=2.0))

    monkeypatch.setattr("prism.launch.probe.run_body", stand_in_body)
    monkeypatch.setattr(Probe, "run", lambda self, mode: mode)
    for mode in ("none", "static"):
        (tmp_path / mode).mkdir()
    probe = Probe("f", "b", "e2e", "d", "c", 8, "cpu", "none", 1, "local", 30.0, str(tmp_path))
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        t0 = time.monotonic()
        bodies = run_bodies(probe, [("eager", "none"), ("compiled", "static")])
    finally:
        timer.cancel()
        JOB_STOPPED.clear()
    assert time.monotonic() - t0 < 5.0 and runs == ["none"]
    assert bodies["eager"]["outcome"] == "checkpointed" and bodies["eager"]["job_stopped"] is True
    assert bodies["compiled"] == {"outcome": "not run", "why": "the probe's job was stopped (SIGTERM)"}
    assert "compiled not run: the probe's job was stopped" in body_warning(bodies)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the probe's handler is gone again


def test_the_job_deadline_counts_from_the_jobs_start(monkeypatch):
    monkeypatch.setenv("PRISM_JOB_START", "1000.0")
    until = job_until(600.0, now=1100.0)
    # 500 s of walltime left, less the record's margin.
    assert until - time.monotonic() == pytest.approx(500.0 - 60.0, abs=0.5)
    assert job_until(None) == float("inf")
    assert body_limit_s(120.0) == 600.0 + 120.0 + 60.0 + 10.0


def test_a_hung_body_is_said_in_the_record(tmp_path):
    hung = {"outcome": "hung", "sigkill": True, "limits": {"start_s": 600.0}, "log": "x/probe.log"}
    said = body_warning({"eager": hung, "compiled": {"outcome": "finished", "exit_status": 1}})
    assert said == "eager hung: no first step in 600 s, ended by SIGKILL (see x/probe.log); " + (
        "compiled ended before it was stopped, exit status 1"
    )
    assert json.dumps(said)


# A launcher that forwards SIGTERM to its rank, as mpiexec does; named mpiexec, so the probe finds it.
MPIEXEC = """#!/bin/bash
trap 'kill -TERM "$rank"; wait "$rank"; exit $?' TERM
"$@" &
rank=$!
wait "$rank"
"""


def test_a_packs_body_is_stopped_at_its_mpiexec_under_the_slot_wrapper(tmp_path, monkeypatch):
    """A pack's run is `slots wrapper -> bash body.sh -> mpiexec -> rank`: SIGTERM to the wrapper's own child
    (the shell, which dies without passing it on) would leave the rank to SIGKILL, uncheckpointed."""
    monkeypatch.setenv("PRISM_SLOT_DIR", str(tmp_path / "slots"))
    argv, perf, log = body(tmp_path, "checkpoint")
    (tmp_path / "mpiexec").write_text(MPIEXEC)
    (tmp_path / "mpiexec").chmod(0o755)
    script = Path(argv[1])
    script.write_text(f"{tmp_path / 'mpiexec'} " + script.read_text())
    wrapped = [sys.executable, "-m", "prism.cli.slots", "--slots", "2", "--device", "cpu", "--", *argv]
    did = drive_body(wrapped, perf, log, Limits(until=float("inf"), **LIMITS))
    assert did["outcome"] == "checkpointed" and not did["sigkill"], did
    claim = json.loads((tmp_path / "slots.jsonl").read_text())
    assert claim["slot"] in (0, 1) and claim["exit"] == 143, claim
    assert no_process_left(log)
