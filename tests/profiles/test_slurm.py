"""The workflow through profiles/slurm (Snakemake's own Slurm executor) against the real local Slurm, natively.

The documented command, `snakemake --profile profiles/slurm fit_text_image --configfile CONFIG`, on the tiny
study: every scheduler job goes through `sbatch` and is tracked with `squeue` (the profile's status command:
the local Slurm keeps no accounting database, as many sites do not), never through the Torque wrapper, whose
`qsub`, `qstat` and `qdel` are shadowed by stand-ins that record any call and fail. Its jobs are counted from
Slurm's own record of every job that ended (jobcomp/filetxt), not from the workflow's logs.

Then a Ctrl-C while the study's next jobs wait in the queue: Snakemake stops and its jobs are cancelled
(`scancel`), Slurm's record says so; and a run longer than its time limit, stopped by Slurm (TIMEOUT) with a
checkpoint, resubmitted by the profile and resumed to its end.

The job's environment is the submitting shell's (the executor's `sbatch --export=ALL`): the venv first on
PATH, two threads at most, the fused CPU kernels this session built. One stand-in more: the executor's job
step (snakemake-executor-plugin-slurm-jobstep) drops every SLURM_ variable but the job's id before its
`srun`, SLURM_CONF among them, so that srun looks for the site's /etc/slurm/slurm.conf, which a cluster has
and this private instance has not: an `srun` first on PATH gives it this instance's config and runs the real one.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from workflow.wfhelpers import (
    SLURM_PLUGINS,
    SMOKE,
    SNAKEMAKE,
    STUDY,
    env,
    planned_run_ids,
    snakemake,
)

from prism.core.ids import format_budget, run_id

from .slurmstudy import study_in
from .test_aurora import MORE_BUDGETS, block_the_node, ctrl_c, queue
from .test_aurora_packs import step_seconds

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import local_pbs  # noqa: E402

if not (SLURM_PLUGINS / "snakemake_executor_plugin_slurm").is_dir():
    pytest.skip(f"no Slurm executor plugin in {SLURM_PLUGINS} (make setup)", allow_module_level=True)

# The study's `cluster:` section: no account (the local Slurm has no accounts to check one against), the
# partition named like Aurora's debug queue; a walltime each job asks as its time limit.
CLUSTER = {"account": "", "queue": "debug", "walltime": "00:30:00", "min_walltime": "00:02:00", "nodes": 1}
# The other tests' flags (the documented command's test runs it as typed): status rounds as soon as a job can
# end (the executor's first check waits 40 s by default, and each round without a finished job waits 10 s
# longer, up to 180 s); `--quiet=host`: the job blocks, which map Snakemake's job ids to runs.
FAST = ("--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "5", "--cores", "2", "--quiet=host")


@pytest.fixture(scope="module")
def slurm_study(slurm_scheduler, tmp_path_factory, shape_shards):
    root = tmp_path_factory.mktemp("slurm-study")
    # A set-up line of the study's, as a site's `module load` would be: each job that runs it says which.
    setup = [f'echo "$SLURM_JOB_ID" >> {root / "setup.log"}']
    study = study_in(root, slurm_scheduler, shape_shards, {"cluster": {**CLUSTER, "setup": setup}})
    return {**study, "setup_log": root / "setup.log"}


SLURM_ARGS = ("--profile", "profiles/slurm", "--configfile", "config/tiny-slurm.yaml", *FAST)


def slurm_jobs_of(workdir: Path, rule: str, names: list[str]) -> dict[str, str]:
    """{Slurm job id: the name among `names` its wildcards hold} from the executor's own log folders
    (logs/slurm/rule_RULE/WILDCARDS/JOBID.log): which job ran what, read as a user would find it."""
    out = {}
    for log in (workdir / "logs" / "slurm" / f"rule_{rule}").glob("*/*.log"):
        (name,) = [n for n in names if n in log.parent.name] or [log.parent.name]
        out[log.stem] = name
    return out


def test_the_documented_command_runs_the_study_to_its_fit_through_sbatch(slurm_study):
    """`snakemake --profile profiles/slurm fit_text_image --configfile ...` as docs/guide.md gives it, no flag
    of the test's own: the profile's status rounds, latency wait, cores and quiet settings as shipped."""
    workdir = slurm_study["workdir"]
    out = snakemake(
        workdir,
        *("--profile", "profiles/slurm", "fit_text_image", "--configfile", "config/tiny-slurm.yaml"),
        timeout=900,
        extra_env=slurm_study["env"],
    ).stdout
    assert (workdir / "scaling-study" / "text_image" / "fit" / "e2e.json").is_file()
    assert not (slurm_study["shims"] / "calls.log").exists(), (slurm_study["shims"] / "calls.log").read_text()

    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", out)
    speeds = list((workdir / "scaling-study" / "calibration").glob("*.speed.json"))
    runs = planned_run_ids(workdir)
    # Only the training runs and the timed steps are scheduler jobs; everything else ran where Snakemake ran.
    assert len(submitted) == len(runs) + len(speeds) and len(speeds) > 0, out[-3000:]
    trained = slurm_jobs_of(workdir, "train", sorted(runs))
    assert sorted(trained.values()) == sorted(runs) and set(trained) <= set(submitted), trained

    # Slurm's own record: every job of this study ended COMPLETED, one a submission, none other.
    ours = [j for j in local_pbs.completed_jobs(slurm_study["folder"]) if j.get("WorkDir") == str(workdir)]
    assert sorted(j["JobId"] for j in ours) == sorted(submitted), ours
    # The study's set-up lines ran first in every Slurm job, once, and nowhere else.
    assert sorted(slurm_study["setup_log"].read_text().split()) == sorted(submitted)
    assert {j["JobState"] for j in ours} == {"COMPLETED"}, ours
    assert {j["Partition"] for j in ours} == {"debug"}

    # Each training job's time limit is its plan walltime: its estimate x the factor, whole minutes, >= the floor.
    rows = {
        r["run_id"]: r
        for r in yaml.safe_load((workdir / "scaling-study" / "text_image" / "plan.yaml").read_text())["runs"]
    }
    limits = {j["JobId"]: j["TimeLimit"] for j in ours}
    for jobid, run in trained.items():
        minutes = min(30, max(2, math.ceil(rows[run]["hours_here"] * 3600 * 2 / 60)))
        assert limits[jobid] == str(minutes), (run, limits[jobid])


def test_a_packed_study_is_refused_before_a_job_is_submitted(slurm_study):
    """cluster.pack under the Slurm executor: the executor would run a pack's jobs one after another in its
    allocation, its devices idle, so the workflow stops with the reason and the fix, and Slurm gets no job."""
    workdir = slurm_study["workdir"]
    before = {j["JobId"] for j in local_pbs.completed_jobs(slurm_study["folder"])}
    done = subprocess.run(
        [SNAKEMAKE, *SLURM_ARGS, "fit_text_image", "--config", MORE_BUDGETS,
         'cluster={"pack": true, "ranks_per_node": 2}'],
        cwd=workdir, env={**env(), **slurm_study["env"]}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "runs the jobs of a group one after another" in out, out[-3000:]
    assert "set cluster.pack: false" in out and "has been submitted with SLURM jobid" not in out
    assert queue(slurm_study["env"]) == []
    assert {j["JobId"] for j in local_pbs.completed_jobs(slurm_study["folder"])} == before


def test_ctrl_c_cancels_the_queued_jobs(slurm_study):
    """More budgets for the study of the test before, its jobs held in the queue by a job that holds the node:
    Ctrl-C to Snakemake's process group (a terminal's) stops it, and each of its jobs ends CANCELLED."""
    workdir, client_env = slurm_study["workdir"], slurm_study["env"]
    before = {j["JobId"] for j in local_pbs.completed_jobs(slurm_study["folder"])}
    blocker = block_the_node(client_env)
    log = open(workdir / "sigint.log", "w")
    proc = subprocess.Popen(
        [SNAKEMAKE, *SLURM_ARGS, "collect_text_image", "--config", MORE_BUDGETS],
        cwd=workdir,
        env={**env(), **client_env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        waiting = wait_until_submitted(proc, workdir / "sigint.log", client_env, blocker)
        assert ctrl_c(proc, workdir / "sigint.log") != 0
        assert [line for line in queue(client_env) if line.split()[0] != blocker] == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        # Whatever this test left queued would run in the next one's study.
        left = [line.split()[0] for line in queue(client_env)]
        subprocess.run(["scancel", *left], env={**env(), **client_env}, check=False)
    ids = {line.split()[0] for line in waiting}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ended = {j["JobId"]: j for j in local_pbs.completed_jobs(slurm_study["folder"]) if j["JobId"] not in before}
        if ids <= set(ended):
            break
        time.sleep(0.5)
    assert {ended[i]["JobState"] for i in ids} == {"CANCELLED"}, ended
    assert not (slurm_study["shims"] / "calls.log").exists()


def wait_until_submitted(proc: subprocess.Popen, log: Path, client_env: dict, blocker: str) -> list[str]:
    """Until Snakemake has submitted every job it will and each waits in the queue: 3 or more, and no new
    `sbatch` for 3 s, as a user who saw the "submitted" lines would press it. (A Ctrl-C reaches a running
    `sbatch` too, one process group: once, on a slow host, a Ctrl-C pressed when 3 of a round's 6 jobs were
    queued left all six queued.) The pending jobs' queue lines."""
    deadline, waiting, stable_since = time.monotonic() + 240, [], time.monotonic()
    while time.monotonic() < deadline:
        text = log.read_text()
        assert proc.poll() is None, text[-3000:]
        submitted = set(re.findall(r"has been submitted with SLURM jobid (\d+)", text))
        now = [line for line in queue(client_env, "PD") if line.split()[0] != blocker]
        if now != waiting or {line.split()[0] for line in now} != submitted:
            waiting, stable_since = now, time.monotonic()
        elif len(waiting) >= 3 and time.monotonic() - stable_since >= 3:
            return waiting
        time.sleep(0.5)
    pytest.fail(f"never saw 3 or more submitted jobs all waiting, unchanged for 3 s; last: {waiting}")


def run_under_a_minute(study: dict, seconds: float, runs: str) -> tuple[str, str, str, list[dict]]:
    """A run of the largest size sized to `seconds` of steps at the speed of the 120k runs `runs` (a glob),
    under a 1-minute limit, retried up to 6 times: (run id, its metrics' path, Snakemake's output, the Slurm
    jobs it took). The largest size: its slower steps make fewer of them, and its loss stays above where a tiny
    loss's noise reads as a spike (the collapse check stops a run then: these shards are easy)."""
    workdir = study["workdir"]
    before = {j["JobId"] for j in local_pbs.completed_jobs(study["folder"])}
    runs_dir = workdir / STUDY / "runs"
    fps = json.loads(next(runs_dir.glob("120k-*/metrics.json")).read_text())["flops_per_sample"]
    budget = float(f"{seconds / step_seconds(runs_dir, runs) * SMOKE['plan']['global_batch'] * fps:.1e}")
    run = run_id("120k", "BASE", "e2e", budget)
    target = str(STUDY / "runs" / run / "metrics.json")
    out = snakemake(
        workdir,
        *SLURM_ARGS,
        target,
        "--config",
        f"budgets=[{format_budget(budget)}]",
        f'plan={{"prior_k": {6.5e4 / budget ** SMOKE["plan"]["prior_a"]:.6g}, "max_epochs": 1e6}}',
        # An lr far below the tiny study's, for the same reason: this run only has to run long.
        'tune={"rule": "given", "lr_c": 1e-05, "lr_p": 1.0, "lr_q": 0.0}',
        'cluster={"walltime": "00:01:00", "min_walltime": "00:01:00", "walltime_factor": 1}',
        "--retries",
        "6",
        extra_env=study["env"],
        timeout=900,
    ).stdout
    jobs = [j for j in local_pbs.completed_jobs(study["folder"]) if j["JobId"] not in before]
    return run, target, out, jobs


def test_a_run_stopped_at_its_time_limit_resumes_when_resubmitted(slurm_study):
    """About 90 s of steps under a 1-minute limit: Slurm stops the job (TIMEOUT; SIGTERM, and the run writes a
    checkpoint), the profile's retries resubmit it, and the run resumes from its checkpoint to its end. The
    host's speed varies (fourfold within one suite): a run it finished inside the limit proves nothing, and one
    is tried again, sized at the speed of the first."""
    workdir = slurm_study["workdir"]
    run, target, out, jobs = run_under_a_minute(slurm_study, 90, "120k-*")
    if f"[{run}] stopped (SIGTERM" not in out:
        run, target, out, jobs = run_under_a_minute(slurm_study, 90, run)
    assert len(jobs) >= 2 and jobs[0]["JobState"] == "TIMEOUT" and jobs[-1]["JobState"] == "COMPLETED", jobs
    assert {j["TimeLimit"] for j in jobs} == {"1"}
    metrics = json.loads((workdir / target).read_text())
    assert metrics["status"] == "ok" and metrics["steps"] == metrics["planned_steps"]
    log = (workdir / "scaling-study" / "logs" / "train" / "text_image" / f"{run}.log").read_text()
    assert f"[{run}] stopped (SIGTERM" in out and f"[{run}] resuming from" in out + log, out[-3000:]


def test_a_two_rank_run_of_the_slurm_launcher_starts_its_ranks_with_srun(
    slurm_scheduler, tmp_path_factory, shape_shards
):
    """train.launcher slurm, 2 ranks a node (gloo on this CPU): the job asks Slurm for a task a rank, and its body
    (prism.launch.slurm) starts them with srun, each with its place from Slurm's variables, to the run's end."""
    overrides = {
        "cluster": {**CLUSTER, "ranks_per_node": 2},
        "train": {"launcher": "slurm", "strategy": "ddp", "device": "cpu"},
        "calibrate": {"measure_throughput": False},  # no timed steps: the one training job alone
    }
    study = study_in(tmp_path_factory.mktemp("slurm-ranks"), slurm_scheduler, shape_shards, overrides)
    workdir, run = study["workdir"], "30k-BASE-e2e-C1e10"
    metrics = f"scaling-study/text_image/runs/{run}/metrics.json"
    out = snakemake(workdir, *SLURM_ARGS, metrics, timeout=600, extra_env=study["env"]).stdout
    assert (workdir / metrics).is_file()
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", out)
    assert len(submitted) == 1, out[-6000:]
    (job,) = submitted
    (record,) = [j for j in local_pbs.completed_jobs(study["folder"]) if j["JobId"] == job]
    assert record["JobState"] == "COMPLETED" and record["ProcCnt"] == "2", record
    body = (workdir / "scaling-study" / "text_image" / "runs" / run / "launch.sh").read_text()
    assert "srun --nodes=1 --ntasks=2 --ntasks-per-node=2" in body
    log = (workdir / "scaling-study" / "logs" / "train" / "text_image" / f"{run}.log").read_text()
    host = record["NodeList"]
    assert f"prism: 2 ranks on 1 node(s) meet at {host}:" in log and "ddp world=2" in log, log[-2000:]
    assert not (study["shims"] / "calls.log").exists()
