"""The workflow through profiles/aurora against a real local scheduler (Slurm + Torque qsub).

The tests run in order on one study: a full run, an interrupted one, a failing one, and the
rerun that finishes it. Its data are shards the study writes itself (data.shards), which the data
rule indexes where Snakemake runs and the jobs read where they lie. A job stopped at its walltime
and resumed is test_aurora_packs.py's last test (the pack is how a cluster study's one-device runs
go out).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from workflow.wfhelpers import BIN, SNAKEMAKE, STUDY, env, kernels_setup, make_workdir, planned_run_ids, snakemake

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CLUSTER = {
    "account": "prismtest",
    "queue": "debug",
    "filesystems": "flare:home",
    # Each job requests its estimate x the factor: the first test sets the factor from the plan's
    # estimates (seconds here, by the host's load), so that they spread over 1 minute - 2 hours.
    "walltime": "02:00:00",
    "min_walltime": "00:01:00",
    "nodes": 1,
    # No qsub -V: the Torque-style qsub passes only the -v list then, as PBS Pro does; each job sets
    # itself up (a login shell, these lines: the venv; two threads at most, as the tests' own shell; the
    # fused CPU kernels this session built).
    "setup": [f"source {BIN}/activate", "export OMP_NUM_THREADS=2", kernels_setup()],
}
MORE_BUDGETS = "budgets=[1e10,2e10,3e10,4e10]"
# `--quiet=host`: the job blocks (the profile leaves them out), which map Snakemake's job ids to runs.
# One word: `--quiet` takes a list, and as two words it would take the target after it too.
PBS_ARGS = (
    "--profile",
    "profiles/aurora",
    "--seconds-between-status-checks",
    "1",
    "--latency-wait",
    "5",
    "--quiet=host",
)


@pytest.fixture(scope="module")
def study(scheduler, tmp_path_factory, shape_shards):
    root = tmp_path_factory.mktemp("pbs-study")
    shape_shards(root / "shards", 2000, per_shard=500)
    workdir = make_workdir(
        root / "study", {"cluster": CLUSTER, "data": {"shards": {"text_image": str(root / "shards")}}}
    )
    client_env = {k: v for k, v in scheduler.items() if k != "folder"}
    return workdir, client_env


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    """The output of the study's Snakemake runs that a later test reads, by name (the first test's)."""
    return {}


def pbs(study, *args, check=True, timeout=600):
    workdir, client_env = study
    return snakemake(workdir, *PBS_ARGS, *args, check=check, timeout=timeout, extra_env=client_env)


def submitted(output: str) -> list[str]:
    return re.findall(r"Submitted job \d+ with external jobid '([^']+)'", output)


def queue(client_env, states="PD,R,CG") -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-t", states, "-o", "%i %t %j"],
        env={**env(), **client_env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


def status_records(workdir: Path) -> dict[str, str]:
    folder = workdir / "logs" / "pbs" / "status"
    return {p.name: p.read_text().strip() for p in folder.iterdir() if not p.name.startswith(".")}


def submitted_runs(output: str) -> dict[str, str]:
    """{external job id: run id} of the train jobs a Snakemake run submitted."""
    jobids, run_of = dict(re.findall(r"Submitted job (\d+) with external jobid '([^']+)'", output)), {}
    for block in output.split("rule train:")[1:]:
        jobid = re.search(r"^\s+jobid: (\d+)$", block, flags=re.M).group(1)
        run_of[jobid] = re.search(r"runs/([^/]+)/metrics\.json", block).group(1)
    return {external: run_of[jobid] for jobid, external in jobids.items() if jobid in run_of}


def requested_walltime(client_env, job_id: str) -> str:
    info = subprocess.run(
        ["qstat", "-f", job_id], env={**env(), **client_env}, capture_output=True, text=True, check=True
    ).stdout
    return re.search(r"Resource_List\.walltime = (\S+)", info).group(1)


def ctrl_c(proc: subprocess.Popen, log: Path, presses: int = 24, patience: float = 5) -> int:
    """Ctrl-C on `proc`'s process group, again while it shows no sign of stopping, as a user would; its exit code.

    Snakemake can miss an interrupt: its log handler drops a KeyboardInterrupt raised while it writes a
    line, and its asyncio loops take SIGINT over while they run. The profile's sidecar has qdel'd the jobs
    by then, but Snakemake resubmits them (the profile's `retries`) until an interrupt lands. Once it says
    it is stopping ("Terminating processes"), it is left to finish: another Ctrl-C would cut its clean-up
    short (and leave its lock for the next test).
    """
    for _ in range(presses):
        os.killpg(proc.pid, signal.SIGINT)
        try:
            return proc.wait(timeout=patience)
        except subprocess.TimeoutExpired:
            if "Terminating processes on user request" in log.read_text():
                return proc.wait(timeout=120)
    raise AssertionError(f"snakemake still running after {presses} Ctrl-C, {patience:.0f} s apart")


def test_every_training_job_goes_through_qsub(study, outputs):
    workdir, client_env = study
    planned = outputs["plan"] = pbs(study, "plan_text_image").stdout
    # The timed steps are jobs too: each times a training run's steps where the runs train.
    speeds = list((workdir / "scaling-study" / "calibration").glob("*.speed.json"))
    assert len(submitted(planned)) == len(speeds) > 0 and "localrule speed" not in planned
    rows = {
        r["run_id"]: r
        for r in yaml.safe_load((workdir / "scaling-study" / "text_image" / "plan.yaml").read_text())["runs"]
    }
    # The longest run asks for an hour: the others for less, in proportion (a budget's runs take twice the other's).
    factor = 3600 / max(r["hours_here"] * 3600 for r in rows.values())
    out = pbs(study, "fit_text_image", "--config", f'cluster={{"walltime_factor": {factor!r}}}').stdout
    runs = planned_run_ids(workdir)
    ids = submitted(out)
    assert len(ids) == len(runs) > 0
    # Then only training jobs are submitted (the speed jobs ran before the plan); the rest runs where Snakemake runs.
    assert "localrule train" not in out and "localcheckpoint plan" in planned and "localrule data" in planned
    records = status_records(workdir)
    assert {i: records.get(i) for i in ids} == {i: "0" for i in ids}
    info = subprocess.run(["qstat", "-f", ids[0]], env={**env(), **client_env}, capture_output=True, text=True).stdout
    assert "prism.train" in info
    assert (workdir / "scaling-study" / "text_image" / "fit" / "e2e.json").exists()
    # Each job asked the scheduler for its own plan estimate x the factor, whole minutes, >= the floor.
    asked = {run: requested_walltime(client_env, job) for job, run in submitted_runs(out).items()}
    assert sorted(asked) == sorted(rows)
    for run, walltime in asked.items():
        minutes = min(120, max(1, math.ceil(rows[run]["hours_here"] * 3600 * factor / 60)))
        assert walltime == f"{minutes // 60:02d}:{minutes % 60:02d}:00", (run, rows[run]["hours_here"], walltime)
    assert len(set(asked.values())) > 1  # the estimates, not one fixed walltime


def test_the_study_on_its_own_shards_indexes_them_where_snakemake_runs(study, outputs):
    """The study of the test before, on the shards the fixture wrote: the index ran on the login node (a
    local rule), the manifest points at the shards where they lie, and the jobs trained on them to the fit."""
    workdir, _ = study
    planned = outputs["plan"]
    assert "localrule data" in planned and "prism data index" in planned
    data = workdir / "scaling-study" / "data" / "text_image"
    assert json.loads((data / "manifest.json").read_text())["shards_dir"] == str(workdir.parent / "shards")
    assert (workdir / "scaling-study" / "text_image" / "fit" / "e2e.json").is_file()


def block_the_node(client_env) -> str:
    """A job holding the whole node: the study's jobs stay queued until the interrupt, however fast this host
    runs them (on an idle host the study used to finish before its queue was seen). Its id."""
    return (
        subprocess.run(
            ["sbatch", "--parsable", "--exclusive", "--job-name", "blocker", "--output=/dev/null", "--wrap=sleep 600"],
            env={**env(), **client_env},
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )


def start_study(workdir: Path, client_env: dict) -> tuple[subprocess.Popen, object]:
    """The study in its own process group, as a terminal's foreground job: Ctrl-C reaches Snakemake and the
    profile's helpers (sidecar, status commands) alike. (the process, its log file)"""
    log = open(workdir / "sigint.log", "w")
    proc = subprocess.Popen(
        [SNAKEMAKE, *PBS_ARGS, "collect_text_image", "--config", MORE_BUDGETS],
        cwd=workdir,
        env={**env(), **client_env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc, log


def wait_for_queued_jobs(proc: subprocess.Popen, workdir: Path, client_env: dict) -> None:
    """Until several jobs are in the scheduler and at least one is still waiting (status rounds running)."""
    deadline, seen = time.monotonic() + 120, []
    while time.monotonic() < deadline:
        seen = queue(client_env)
        if len(seen) >= 3 and any(" PD " in line for line in seen):
            return
        assert proc.poll() is None, (workdir / "sigint.log").read_text()[-3000:]
        time.sleep(0.2)
    pytest.fail(f"never saw 3 jobs with one queued; last: {seen}")


def helpers_of(proc: subprocess.Popen) -> list[int]:
    """The profile's helper processes under Snakemake now: its sidecar and any status command running."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
            group = os.getpgid(int(cmdline.parent.name))
        except (OSError, ValueError):
            continue
        # Once Python runs them (their shebang's `env` has set SIGINT ignored by then): the few microseconds
        # before `env` does are the one window left (docs/cluster.md, "Stopping a study").
        helper = "pbs_sidecar.py" in text or "pbs_status.py" in text
        if group == proc.pid and helper and not text.startswith(("/usr/bin/env", "sh\0", "/bin/sh")):
            found.append(int(cmdline.parent.name))
    return found


def stop_and_check_the_queue(proc, log, blocker: str, client_env: dict) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()
    subprocess.run(["scancel", blocker], env={**env(), **client_env}, check=False)
    deadline = time.monotonic() + 30
    while queue(client_env) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert queue(client_env) == []


def test_sigint_cancels_queued_jobs(study):
    """Ctrl-C to the whole group while status rounds run: Snakemake stops and no job is left queued."""
    workdir, client_env = study
    blocker = block_the_node(client_env)
    proc, log = start_study(workdir, client_env)
    try:
        wait_for_queued_jobs(proc, workdir, client_env)
        assert ctrl_c(proc, workdir / "sigint.log") != 0
    finally:
        stop_and_check_the_queue(proc, log, blocker, client_env)


def test_sigint_to_the_helpers_alone_leaves_the_study_running_and_cancellable(study):
    """A Ctrl-C that reaches only the profile's sidecar and status commands (Snakemake's own may be lost:
    docs/cluster.md, "Ctrl-C"): they go on, Snakemake keeps hearing its jobs, and its later stop leaves
    no job queued."""
    workdir, client_env = study
    blocker = block_the_node(client_env)
    proc, log = start_study(workdir, client_env)
    try:
        wait_for_queued_jobs(proc, workdir, client_env)
        deadline, signalled = time.monotonic() + 8, set()
        while time.monotonic() < deadline:  # status rounds every second: several status commands are hit
            for pid in helpers_of(proc):
                try:
                    os.kill(pid, signal.SIGINT)
                    signalled.add(pid)
                except ProcessLookupError:
                    continue
            time.sleep(0.05)
        assert len(signalled) >= 2, signalled  # the sidecar and at least one status command
        text = (workdir / "sigint.log").read_text()
        assert proc.poll() is None and "UnboundLocalError" not in text, text[-3000:]
        assert "Cluster sidecar process has terminated" not in text, text[-3000:]
        assert ctrl_c(proc, workdir / "sigint.log") != 0
    finally:
        stop_and_check_the_queue(proc, log, blocker, client_env)


def test_failing_job_is_failed_and_stops_the_workflow(study):
    workdir, _ = study
    before = status_records(workdir)
    out = pbs(
        study,
        "collect_text_image",
        "--config",
        MORE_BUDGETS,
        "--retries",
        "0",
        "--set-resources",
        "train:device='cuda'",
        check=False,
    )
    assert out.returncode != 0
    assert "Error in rule train" in out.stdout
    new = {k: v for k, v in status_records(workdir).items() if k not in before}
    assert new and all(v != "0" for v in new.values())
    assert not (workdir / "scaling-study" / "text_image" / "runs" / "30k-BASE-e2e-C4e10" / "metrics.json").exists()


def test_rerun_resubmits_only_what_is_missing(study):
    workdir, _ = study
    runs_dir = workdir / STUDY / "runs"
    done = {p.parent.name: p.stat().st_mtime_ns for p in runs_dir.glob("*/metrics.json")}
    # collect, not fit: the point is what gets resubmitted, not whether 4 tiny budgets fit.
    out = pbs(study, "collect_text_image", "--config", MORE_BUDGETS).stdout
    planned = planned_run_ids(workdir)
    assert len(submitted(out)) == len(planned - set(done))
    assert {
        p.parent.name: p.stat().st_mtime_ns for p in runs_dir.glob("*/metrics.json") if p.parent.name in done
    } == done
    assert all((runs_dir / r / "metrics.json").exists() for r in planned)
