"""cluster.pack: the training jobs' packs (Snakemake groups), their shared resources, queues and refusals."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from snakemake.exceptions import IncompleteCheckpointException

from prism.core.ids import run_id
from prism.isoflop.design.tuning import lr_label
from prism.workflow import resources
from prism.workflow.jobs import make_schedule
from prism.workflow.planfile import WorkflowPlan
from prism.workflow.probe import probe_file
from prism.workflow.study import Study
from prism.workflow.tune import TuneStage

from .conftest import FakeEngine, wildcards

PACKED = {"pack": True, "ranks_per_node": 4, "min_walltime": "00:10:00"}


class GroupingEngine(FakeEngine):
    def __init__(self) -> None:
        super().__init__(dryrun=True)
        self.parents: dict[str, str] = {}

    def group_parent(self, group: str, parent: str) -> None:
        self.parents[group] = parent


def schedule_of(config, engine=None, wait=None):
    engine = engine or GroupingEngine()
    study = Study(config)
    holder = {}
    plan = WorkflowPlan(study, engine, wait or (lambda family: pytest.fail("waited")),
                     lambda family, rows: holder["schedule"].requested(family, rows))  # fmt: skip
    holder["schedule"] = make_schedule(study, plan, engine)
    return holder["schedule"]


def evaluated(resources: dict, wc) -> dict:
    return {k: v(wc) if callable(v) else v for k, v in resources.items()}


def test_one_device_runs_share_a_pack_each_pinned_with_the_same_node_queue_and_walltime(smoke_config):
    schedule = schedule_of(smoke_config(cluster=PACKED))
    rows = schedule.plan.rows("text_image")
    group = schedule.group()
    names = {group(wildcards(family="text_image", run_id=r)) for r in rows}
    assert names == {"text_image-pack0"} and schedule.engine.parents == {"text_image-pack0": "prism_pack"}
    jobs = [
        evaluated(schedule.resources(retrain=lambda w: "0"), wildcards(family="text_image", run_id=r)) for r in rows
    ]
    shared = {(j["nodes"], j["walltime"], j["queue"], j["pin"], j["strategy"]) for j in jobs}
    # no estimate here (the smoke plan has no speed): the pack asks for the cap, cluster.walltime
    assert shared == {("1", "00:30:00", "debug", "python -m prism.cli.slots --slots 4 --device cpu -- ", "none")}
    assert {j["procs_per_node"] for j in jobs} == {1}
    line = schedule.requested("text_image", rows)
    assert line.startswith("plan text_image: 6 runs in 1 jobs on 1 nodes (up to 4 one-device runs a node")


def test_while_the_plan_job_has_not_run_a_packed_job_is_ungrouped_at_the_cap_and_a_real_error_is_raised(
    smoke_config,
):
    """Before its data is built the plan is a checkpoint: Snakemake evaluates the jobs again after it."""

    def pending(family):
        raise IncompleteCheckpointException("plan", f"study/{family}/plan.yaml")

    engine = GroupingEngine()
    engine.dryrun = False  # a real run, the data not built: the rows wait for the plan job
    schedule = schedule_of(smoke_config(cluster=PACKED), engine, pending)
    wc = wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    job = evaluated(schedule.resources(retrain=lambda w: "0"), wc)
    assert schedule.group()(wc) is None and engine.parents == {}
    assert (job["nodes"], job["procs_per_node"], job["walltime"], job["queue"]) == ("1", 1, "00:30:00", "debug")

    def broken(family):
        raise KeyError("runs")  # a bug, not the plan's absence

    schedule = schedule_of(smoke_config(cluster=PACKED), engine, broken)
    with pytest.raises(KeyError, match="runs"):
        schedule.group()(wc)
    with pytest.raises(KeyError, match="runs"):
        evaluated(schedule.resources(retrain=lambda w: "0"), wc)


def sweep_job(tune: TuneStage) -> SimpleNamespace:
    """The wildcards of the lr sweep's run at its widest width and highest lr."""
    row, lr, steps = tune.runs("text_image")[-1]
    run = run_id(row["backbone"], row["variant"], row["regime"], row["budget"])
    return wildcards(family="text_image", run_id=run, lr=lr_label(lr)[2:], steps=str(steps))


@pytest.mark.parametrize("cluster", [PACKED, {}], ids=["packed", "one-job-a-run"])
def test_a_run_of_the_lr_sweep_is_never_looked_up_among_the_grids_packs_or_estimates(smoke_config, cluster):
    """tune_run takes a training job's resources with the sweep's own packs and no estimate: its run id is a
    grid run's id at the smallest budget, so a look-up in the grid's packs or plan rows would be wrong."""
    schedule = schedule_of(smoke_config(cluster=cluster))
    tune = TuneStage(schedule.study, schedule.plan, schedule)
    schedule.pack_of = lambda w: pytest.fail("looked up among the grid's packs")
    schedule.estimate_s = lambda w: pytest.fail("looked up among the plan's estimates")
    job = evaluated(tune.run_resources(), sweep_job(tune))
    cap = schedule.study.cluster["walltime"]
    if cluster:
        assert tune.group()(sweep_job(tune)) == "text_image-tune0"
        assert (job["nodes"], job["procs_per_node"], job["pin"], job["strategy"]) == (
            "1", 1, "python -m prism.cli.slots --slots 4 --device cpu -- ", "none")  # fmt: skip
        assert job["walltime"] == resources.walltime_text(resources.pack_request(
            schedule.study.cluster, tune.pack_of(sweep_job(tune)), 0.0)[1])  # fmt: skip
    else:
        assert tune.group() is None and job["walltime"] == cap and job["pin"] == ""


def test_the_lr_sweep_of_a_cluster_study_waits_for_the_speed_jobs_and_the_probe(smoke_config):
    """Its packs are priced from them (a pack priced at an assumed speed could be killed at its walltime)."""
    aurora = smoke_config(cluster=PACKED, train={"launcher": "aurora", "device": "cpu"})
    schedule = schedule_of(aurora)
    tune = TuneStage(schedule.study, schedule.plan, schedule)
    inputs = tune.run_inputs(sweep_job(tune))
    assert inputs["speed"].endswith(".speed.json") and inputs["probe"].endswith("probe/text_image.json")
    local = schedule_of(smoke_config())
    assert set(TuneStage(local.study, local.plan, local).run_inputs(sweep_job(tune))) == {"data", "calibration"}


def test_a_wsd_trajectorys_segments_and_branches_are_one_pack(smoke_config):
    schedule = schedule_of(smoke_config(cluster=PACKED, train={"schedule": "wsd"}))
    rows = schedule.plan.rows("text_image")
    packs = schedule.packs_by_job("text_image")
    for t in schedule.trajectories(rows):
        keys = [f"{t.traj_id}/to-{s.end:08d}" for s in t.segments] + [b.run_id for b in t.branches]
        assert len({id(packs[k]) for k in keys}) == 1
    segment = wildcards(family="text_image", traj=t.traj_id, end=f"{t.segments[0].end:08d}")
    assert schedule.group()(segment) == packs[keys[0]].name


def test_without_pack_nothing_is_grouped_or_pinned(smoke_config):
    schedule = schedule_of(smoke_config())
    job = evaluated(
        schedule.resources(retrain=lambda w: "0"), wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    )
    assert schedule.group() is None and job["pin"] == "" and job["nodes"] == 1 and job["queue"] == "debug"


def test_a_pack_no_queue_holds_is_refused_at_plan_time_naming_the_queue_and_the_limit(smoke_config):
    queues = {"tiny": {"max_nodes": 1, "max_walltime": "00:05:00"}}
    schedule = schedule_of(smoke_config(cluster={**PACKED, "queue": "tiny", "queues": queues}))
    with pytest.raises(SystemExit) as stop:
        schedule.requested("text_image", schedule.plan.rows("text_image"))
    assert str(stop.value) == (
        "plan text_image: no queue of cluster.queues holds a job of 1 node(s) for 00:30:00: queue tiny allows at "
        "most 00:05:00 of walltime, the job asks 00:30:00 (set cluster.walltime or cluster.nodes_by_backbone "
        "within a queue's limits)"
    )


def test_unpacked_jobs_go_to_the_queue_their_size_fits(smoke_config):
    queues = {"small": {"max_nodes": 1}, "big": {"min_nodes": 2}}
    config = smoke_config(cluster={"queue": "small", "queues": queues, "nodes_by_backbone": {"120k": 2}})
    schedule = schedule_of(config)
    res = schedule.resources(retrain=lambda w: "0")
    assert res["queue"](wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")) == "small"
    assert res["queue"](wildcards(family="text_image", run_id="120k-BASE-e2e-C1e10")) == "big"


def test_a_run_longer_than_its_packs_share_spreads_over_devices_of_its_pack(smoke_config, monkeypatch):
    """cluster.pack_spread: the longest run takes two of the pack's devices (one two-rank run pinned to both,
    its batch and micro-batch unchanged), so the pack's walltime is its load, not that one run."""
    spread = {**PACKED, "pack_spread": 2, "pack_efficiency": 0.9}
    schedule = schedule_of(smoke_config(cluster=spread, train={"strategy": "fsdp", "launcher": "aurora"}))
    units = schedule.units

    def timed(rows, startup_s=0.0):  # the smoke plan has no speed: give the runs estimates, one 6x the others
        return [replace(u, seconds=600.0 if u.key == max(rows) else 100.0) for u in units(rows, startup_s)]

    monkeypatch.setattr(schedule, "units", timed)
    rows = schedule.plan.rows("text_image")
    longest = max(rows)
    jobs = {r: evaluated(schedule.resources(retrain=lambda w: "0"), wildcards(family="text_image", run_id=r))
            for r in rows}  # fmt: skip
    # A job's ranks are the devices it claims (PRISM_SLOT_DEVICES); every text resource is the pack's, as
    # Snakemake requires of a group: one pin, one strategy (a one-rank body trains unwrapped).
    assert jobs[longest]["procs_per_node"] == 2 and min(j["procs_per_node"] for j in jobs.values()) == 1
    [(nodes, _, queue, pin, strategy)] = {(j["nodes"], j["walltime"], j["queue"], j["pin"], j["strategy"])
                                          for j in jobs.values()}  # fmt: skip
    assert (nodes, queue, pin, strategy) == (
        "1",
        "debug",
        "python -m prism.cli.slots --slots 4 --device cpu -- ",
        "fsdp",
    )
    line = schedule.requested("text_image", rows)
    assert f"1 spread over devices of their pack: {longest.split('-')[0]} x2" in line and "0.9^log2(k)" in line
    # Without a sharding strategy, or with a one-process launcher, nothing spreads.
    assert not schedule_of(smoke_config(cluster=spread, train={"launcher": "aurora"})).spreading
    assert not schedule_of(smoke_config(cluster=spread, train={"strategy": "fsdp"})).spreading


@pytest.mark.parametrize("efficiency,spreads", [(0.95, True), (0.4, False)])
def test_a_spread_run_is_priced_by_the_probes_measured_speed(smoke_config, monkeypatch, efficiency, spreads):
    """Once the probe has run its spread body, its measured speed per doubling replaces the assumed
    cluster.pack_efficiency: measured fast, the longest run spreads and the plan says what measured it;
    measured slower on 2 devices than on 1 (0.4 a doubling: 0.8x), nothing spreads."""
    spread = {**PACKED, "pack_spread": 2, "pack_efficiency": 0.9}
    schedule = schedule_of(smoke_config(cluster=spread, train={"strategy": "fsdp", "launcher": "aurora"}))
    record = Path(probe_file(schedule.study, "text_image"))
    record.parent.mkdir(parents=True, exist_ok=True)
    measured = {"backbone": "120k", "devices": 2, "speedup": 2 * efficiency, "efficiency": efficiency}
    record.write_text(json.dumps({"startup_s": None, "backbone": "120k", "eager": {}, "spread": measured}))
    units = schedule.units

    def timed(rows, startup_s=0.0):
        return [replace(u, seconds=600.0 if u.key == max(rows) else 100.0) for u in units(rows, startup_s)]

    monkeypatch.setattr(schedule, "units", timed)
    rows = schedule.plan.rows("text_image")
    packs = {id(p): p for p in schedule.packs_by_job("text_image", rows).values()}.values()
    assert any(u.devices == 2 for p in packs for u in p.units) is spreads
    line = schedule.requested("text_image", rows)
    if spreads:
        assert f"k x {efficiency:g}^log2(k) one's speed, measured by the probe: 120k on 2 devices ran 1.90x" in line
    else:
        assert "spread over devices" not in line
