"""A packed study through profiles/slurm-packs against the real local Slurm, natively (sbatch, squeue, scancel).

The documented command, `snakemake --profile profiles/slurm-packs fit_text_image --configfile CONFIG`, as typed:
the profile's cores, status rounds and latency wait as shipped. The study's one-device runs go to Slurm as at
most ceil(runs / slots) training jobs plus one job of its timed steps, counted from Slurm's own record of the jobs
it ran (jobcomp/filetxt), not from the workflow's logs; each pack held its node whole (`--exclusive`) and filled
its slots: as many runs at once as the node has devices, no two on one slot. The Torque wrapper's commands are
stand-ins that fail, so nothing went through them.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from local_pbs import completed_jobs
from workflow.wfhelpers import planned_run_ids, snakemake

from prism.cli import main as prism

from .conftest import local_scheduler
from .slurmstudy import study_in
from .test_aurora_packs import slot_records

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

# The node's device slots: profiles/slurm-packs' `cores` as shipped (a pack's runs at once), CPU cores here.
SLOTS = 4
CLUSTER = {
    "account": "",
    "queue": "debug",
    "walltime": "00:30:00",
    "min_walltime": "00:05:00",
    "nodes": 1,
    "ranks_per_node": SLOTS,
    "pack": True,
}


@pytest.fixture(scope="module")
def packs_scheduler(tmp_path_factory):
    """A Slurm instance of this module's own (2 CPUs, this host's), so that its study runs beside the others'."""
    yield from local_scheduler(tmp_path_factory, "slurm-packs")


@pytest.fixture(scope="module")
def packed(packs_scheduler, tmp_path_factory, shape_shards):
    study = study_in(tmp_path_factory.mktemp("slurm-packs"), packs_scheduler, shape_shards, {"cluster": CLUSTER})
    command = ("--profile", "profiles/slurm-packs", "fit_text_image", "--configfile", "config/tiny-slurm.yaml")
    out = snakemake(study["workdir"], *command, timeout=1500, extra_env=study["env"]).stdout
    return {**study, "out": out}


def most_at_once(records: list[dict]) -> int:
    """The most of `records` (a job's slot claims: start, end) that held their slots at one moment."""
    return max(sum(1 for b in records if b["start"] <= a["start"] < b["end"]) for a in records)


def test_the_documented_command_runs_each_pack_as_one_slurm_job_filling_its_slots(packed):
    workdir = packed["workdir"]
    assert (workdir / "scaling-study" / "text_image" / "fit" / "e2e.json").is_file()
    assert not (packed["shims"] / "calls.log").exists(), (packed["shims"] / "calls.log").read_text()

    runs = planned_run_ids(workdir)
    jobs = [j for j in completed_jobs(packed["folder"]) if j.get("WorkDir") == str(workdir)]
    # ceil(runs / slots) training packs at most, and one pack of the timed steps: each a node of its own, done.
    assert len(runs) > SLOTS and 0 < len(jobs) <= math.ceil(len(runs) / SLOTS) + 1, (runs, jobs)
    assert {(j["NodeCnt"], j["JobState"], j["Partition"]) for j in jobs} == {("1", "COMPLETED", "debug")}, jobs
    assert f"{len(runs)} runs in " in packed["out"]

    # Every run held a slot in one of those jobs; none shared one with a run beside it; a pack filled its node.
    records = slot_records(workdir)
    assert sorted(records) == sorted(runs)
    ids = {j["JobId"] for j in jobs}
    by_job: dict[str, list[dict]] = {}
    for run, claims in records.items():
        for claim in claims:
            assert claim["job"] in ids and 0 <= claim["slot"] < SLOTS and claim["exit"] == 0, (run, claim)
            by_job.setdefault(claim["job"], []).append(claim)
    for claims in by_job.values():
        for i, a in enumerate(claims):
            for b in claims[i + 1 :]:
                assert not (a["slot"] == b["slot"] and a["start"] < b["end"] and b["start"] < a["end"]), (a, b)
    assert max(most_at_once(claims) for claims in by_job.values()) == SLOTS, by_job


def test_the_site_check_reads_the_profile_as_slurms_and_compares_its_cores_with_the_slots(
    packs_scheduler, tmp_path, monkeypatch, capsys
):
    """`prism cluster check --profile profiles/slurm-packs`: Slurm's checks (its partitions from scontrol, no PBS
    one), and the profile's check, which fails a node of other slots than the profile's cores, saying the fix."""
    monkeypatch.setenv("SLURM_CONF", packs_scheduler["SLURM_CONF"])
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    profile = str(REPO / "profiles" / "slurm-packs")
    for slots, ok in ((SLOTS, True), (8, False)):
        config = tmp_path / f"study-{slots}.yaml"
        cluster = {**CLUSTER, "ranks_per_node": slots}
        config.write_text(yaml.safe_dump({"cluster": cluster, "study_dir": str(tmp_path / "study")}))
        default = str(REPO / "config" / "config.yaml")
        prism(["cluster", "check", "--configfile", str(config), "--default-config", default, "--profile", profile])
        out = capsys.readouterr().out
        assert "ok   partition debug: UP" in out and "qstat" not in out, out
        if ok:
            assert f"ok   profile {profile}: --cores {SLOTS} ({SLOTS} runs of a pack at once" in out, out
        else:
            assert f"FAIL profile {profile}: cores {SLOTS} runs {SLOTS} of a pack's runs at once, not the node's 8" in (
                out
            ), out
