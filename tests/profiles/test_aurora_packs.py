"""Packs through profiles/aurora on the local scheduler: one-device runs many to a node.

A study of 12 tiny runs on a one-node cluster of 4 device slots (cluster.ranks_per_node 4, CPU cores
as slots, cluster.pack) goes to the scheduler as at most ceil(12 / 4) training jobs plus one job of
its timed steps, counted from the scheduler's own record of the jobs it ran (jobcomp/filetxt,
tools/local_pbs.py), not from the workflow's logs. Each run records the slot it held; no two runs of
one job that overlapped in time held one slot. The packed runs train exactly as unpacked ones (the
same losses), and a pack stopped at its walltime resumes its unfinished runs when resubmitted, without
launching again the runs it had finished.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest
from local_pbs import completed_jobs
from workflow.wfhelpers import SMOKE, STUDY, kernel_builds, kernels_setup, make_workdir, planned_run_ids, snakemake

from prism.core.ids import format_budget, run_id
from prism.perf.reader import read_perf

from .test_aurora import PBS_ARGS, status_records

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SLOTS = 4
CLUSTER = {
    "account": "prismtest",
    "queue": "debug",
    "filesystems": "flare:home",
    "walltime": "00:40:00",
    # This host runs the tiny runs several times slower than the plan's estimate (start-up, evaluations,
    # other tests): the floor keeps the pack from its walltime here; the last test sets its own.
    "min_walltime": "00:30:00",
    "nodes": 1,
    "ranks_per_node": SLOTS,
    "pack": True,
    # The fused CPU kernels this session built, not a build of the study's own in its first job.
    "setup": [kernels_setup()],
}
# Five budgets of the smoke study's three sizes: 12 runs or more (the plan drops a run of too few steps).
BUDGETS = [1e10, 1.2e10, 1.5e10, 2e10, 2.5e10]


# The CPU kernels' build folder of this checkout's venv, where Snakemake runs too (the jobs' too: CLUSTER's setup).
KERNELS = {"TORCH_EXTENSIONS_DIR": kernel_builds()}


@pytest.fixture(scope="module")
def packed(scheduler, tmp_path_factory):
    workdir = make_workdir(tmp_path_factory.mktemp("pbs-pack"), {"cluster": CLUSTER, "budgets": BUDGETS})
    client_env = {k: v for k, v in scheduler.items() if k != "folder"} | KERNELS
    out = snakemake(workdir, *PBS_ARGS, "fit_text_image", extra_env=client_env, timeout=1800).stdout
    return workdir, client_env, scheduler["folder"], out


def step_seconds(runs_dir: Path, runs: str) -> float:
    """The median training step of the runs `runs` (a glob) in this study: this host's speed when they ran."""
    times = [
        row["step_time_s"]
        for path in runs_dir.glob(f"{runs}/perf.jsonl")
        for row in read_perf(path)[0]
        if row.get("step", 0) > 5 and "step_time_s" in row
    ]
    assert times, f"no perf rows of {runs} under {runs_dir}"
    return statistics.median(times)


def study_jobs(folder: str, workdir: Path) -> list[dict[str, str]]:
    """The jobs the scheduler ran for the study in `workdir` (its accounting, not the workflow's logs)."""
    return [job for job in completed_jobs(folder) if job.get("WorkDir") == str(workdir)]


def slot_records(workdir: Path) -> dict[str, list[dict]]:
    runs = workdir / STUDY / "runs"
    return {
        path.parent.name: [json.loads(line) for line in path.read_text().splitlines()]
        for path in runs.glob("*/slots.jsonl")
    }


def test_runs_go_many_to_a_job_each_on_its_own_slot(packed):
    workdir, _, folder, out = packed
    runs = planned_run_ids(workdir)
    assert len(runs) >= 12
    jobs = study_jobs(folder, workdir)
    # ceil(runs / slots) training packs at most, and one pack of the timed steps: every one a node, finished.
    assert 0 < len(jobs) <= math.ceil(len(runs) / SLOTS) + 1, jobs
    assert {(j["NodeCnt"], j["JobState"]) for j in jobs} == {("1", "COMPLETED")}
    assert f"{len(runs)} runs in 1 jobs on 1 nodes" in out
    records = slot_records(workdir)
    assert sorted(records) == sorted(runs)
    ids = {j["JobId"] for j in jobs}
    flat = [(run, r) for run, rs in records.items() for r in rs]
    for run, r in flat:
        assert r["job"] in ids and 0 <= r["slot"] < SLOTS and r["exit"] == 0, (run, r)
    for i, (run_a, a) in enumerate(flat):
        for run_b, b in flat[i + 1 :]:
            overlap = a["job"] == b["job"] and a["start"] < b["end"] and b["start"] < a["end"]
            assert not (overlap and a["slot"] == b["slot"]), (run_a, a, run_b, b)
    # Several runs really ran at once (the host's cores bound how many: two here).
    assert any(a["job"] == b["job"] and a["start"] < b["end"] and b["start"] < a["end"]
               for i, (_, a) in enumerate(flat) for _, b in flat[i + 1 :])  # fmt: skip
    # The timed steps held slots too, in their own pack.
    speeds = list((workdir / "scaling-study" / "calibration").glob("*.speed.json.slots.jsonl"))
    assert speeds and all(json.loads(p.read_text().splitlines()[0])["job"] in ids for p in speeds)
    assert (workdir / STUDY / "fit" / "e2e.json").is_file()


def test_packed_runs_train_as_unpacked_ones(packed):
    """The same runs trained without packing (one process each, here) reach the same losses."""
    workdir, _, _, _ = packed
    plain = workdir.parent / "unpacked"
    make_workdir(plain, {"cluster": {**CLUSTER, "pack": False}, "budgets": BUDGETS})
    for part in ("data", "calibration"):
        shutil.copytree(workdir / "scaling-study" / part, plain / "scaling-study" / part)
    smallest = sorted(planned_run_ids(workdir))[:2]
    targets = [str(STUDY / "runs" / run / "metrics.json") for run in smallest]
    snakemake(plain, "--cores", "2", *targets, timeout=900, extra_env=KERNELS)
    for run in smallest:
        packed_metrics = json.loads((workdir / STUDY / "runs" / run / "metrics.json").read_text())
        plain_metrics = json.loads((plain / STUDY / "runs" / run / "metrics.json").read_text())
        assert packed_metrics["loss"] == plain_metrics["loss"], run
        assert not (plain / STUDY / "runs" / run / "slots.jsonl").exists()


def pack_under_a_minute(packed, seconds: float, runs: str) -> tuple[list[str], str, list[dict]]:
    """A pack of two runs, each sized to `seconds` of steps at the speed of the 30k runs `runs` (a glob), under a
    1-minute walltime, retried up to 12 times: (the runs' metrics paths, Snakemake's output, the scheduler jobs)."""
    workdir, client_env, folder, _ = packed
    before = {j["JobId"] for j in study_jobs(folder, workdir)}
    runs_dir = workdir / STUDY / "runs"
    fps = json.loads(next(runs_dir.glob("30k-*/metrics.json")).read_text())["flops_per_sample"]
    budget = float(f"{seconds / step_seconds(runs_dir, runs) * SMOKE['plan']['global_batch'] * fps:.1e}")
    targets = [str(STUDY / "runs" / run_id(b, "BASE", "e2e", budget) / "metrics.json") for b in ("30k", "60k")]
    # The grid centred between 30k and 60k at this budget (as test_aurora.py's walltime test).
    prior_k = 6.5e4 / budget ** SMOKE["plan"]["prior_a"]
    out = snakemake(
        workdir,
        *PBS_ARGS,
        *targets,
        "--config",
        f"budgets=[{format_budget(budget)}]",
        f'plan={{"prior_k": {prior_k:.6g}, "max_epochs": 50}}',
        'cluster={"walltime": "00:01:00", "min_walltime": "00:01:00", "walltime_factor": 1}',
        "--retries",
        "12",
        extra_env=client_env,
        timeout=2400,
    ).stdout
    return targets, out, [j for j in study_jobs(folder, workdir) if j["JobId"] not in before]


def test_a_pack_stopped_at_its_walltime_resumes_its_runs(packed):
    """About 4 minutes of steps for each of two runs (as test_aurora.py's walltime test), at the speed of the
    study's 30k runs. That speed varies (fourfold within one suite: the study's runs shared the cores with
    a whole pack and the other tests): a pack finished inside the walltime proves nothing, and one is tried
    again, sized at the speed of its own 30k run."""
    workdir = packed[0]
    targets, out, jobs = pack_under_a_minute(packed, 240, "30k-*")
    if "stopped (SIGTERM" not in out:
        targets, out, jobs = pack_under_a_minute(packed, 240, Path(targets[0]).parent.name)
    # One pack of both runs, stopped at its walltime at least once and resubmitted until it finished (the
    # last one's body recorded exit status 0; the scheduler may still have stopped it while it exited).
    assert len(jobs) >= 2 and jobs[0]["JobState"] == "TIMEOUT", jobs
    assert status_records(workdir).get(jobs[-1]["JobId"]) == "0"
    assert re.search(r"plan text_image: \d+ runs in \d+ jobs on \d+ nodes", out)
    resumed = []
    for target in targets:
        run = Path(target).parent.name
        metrics = json.loads((workdir / target).read_text())
        assert metrics["status"] == "ok" and metrics["steps"] == metrics["planned_steps"]
        records = [
            json.loads(line) for line in (workdir / STUDY / "runs" / run / "slots.jsonl").read_text().splitlines()
        ]
        log = (workdir / "scaling-study" / "logs" / "train" / "text_image" / f"{run}.log").read_text()
        # A retried pack reruns every run of it (its Snakemake forces them): one finished in an earlier attempt
        # is put back before its body is launched, so it never holds a slot again. Its last body exited 0, or
        # finished and was stopped by the walltime as it exited (143): the next attempt then put it back.
        exits = [r["exit"] for r in records]
        assert 0 not in exits[:-1], records
        assert exits[-1] == 0 or "finished earlier on the same inputs" in log, (records, log[-2000:])
        # Stopped at the walltime with a checkpoint (the failed attempt's log, which the profile shows), then
        # resumed from it, in a later attempt (shown too when that one was stopped again) or the last one.
        if f"[{run}] stopped (SIGTERM" in out:
            assert f"[{run}] resuming from" in out + log and any(r["exit"] != 0 for r in records)
            resumed.append(run)
    # The host's speed varies: at least one of the two outlived the first walltime (both, as a rule).
    assert resumed, out[-3000:]
