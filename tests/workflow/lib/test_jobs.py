"""prism.workflow.jobs: the jobs each schedule implies, their inputs, flags and estimates."""

from __future__ import annotations

import inspect
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from snakemake.exceptions import IncompleteCheckpointException

from prism.train.identity import run_hash
from prism.train.rundir.layout import kept_checkpoint, kept_origin
from prism.workflow.jobs import CosineSchedule, JobInputs, WsdSchedule, make_schedule, recorded_start
from prism.workflow.planfile import WorkflowPlan
from prism.workflow.study import Study

from .conftest import FakeEngine, wildcards


def schedule_of(config, engine=None, wait=None):
    engine = engine or FakeEngine(dryrun=True)
    study = Study(config)
    holder = {}
    plan = WorkflowPlan(study, engine, wait or (lambda family: pytest.fail("waited")), lambda f, rows: "")
    holder["schedule"] = make_schedule(study, plan, engine, ancient=lambda path: ("ancient", path))
    return holder["schedule"]


def flags(text: str) -> dict[str, str]:
    words = shlex.split(text)
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}


def test_the_schedule_is_the_configs(smoke_config):
    cosine = schedule_of(smoke_config())
    wsd = schedule_of(smoke_config(train={"schedule": "wsd"}))
    assert isinstance(cosine, CosineSchedule) and cosine.rules_file == "rules/train.smk" and cosine.run_rule == "train"
    assert isinstance(wsd, WsdSchedule) and wsd.rules_file == "rules/wsd.smk" and wsd.run_rule == "wsd_branch"


def test_a_cosine_run_trains_its_plan_row_with_the_studys_warmup(smoke_config):
    schedule = schedule_of(smoke_config())
    wc = wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    inputs = schedule.train_inputs(wc)
    assert inputs["calibration"].endswith("/calibration/text_image__30k__BASE__e2e.json")
    args = flags(schedule.train_args(wc, SimpleNamespace(**inputs)))
    assert args["--warmup"] == "5" and args["--out"] == schedule.study.run_dir("text_image", wc.run_id)
    assert "--cooldown-fraction" not in args  # a cosine run has none
    assert schedule.priority(wc) == schedule.plan.row(wc).steps > 0
    assert schedule.run_body(wc).endswith("/runs/30k-BASE-e2e-C1e10/launch.sh")
    assert len(schedule.training_jobs(schedule.plan.rows("text_image"))) == 6


def test_priority_and_estimate_wait_for_nothing_while_the_plan_is_pending(smoke_config):
    def pending(family):
        raise IncompleteCheckpointException(None, f"scaling-study/{family}/plan.yaml")

    schedule = schedule_of(smoke_config(), FakeEngine(dryrun=False), pending)
    wc = wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    assert schedule.priority(wc) == 0 and schedule.job_estimate_s(wc) is None
    assert schedule.walltime(wc) == schedule.study.cluster["walltime"]  # no estimate: the cap


def test_a_real_error_reading_the_plan_is_not_taken_for_a_pending_plan(smoke_config):
    def broken(family):
        raise KeyError("runs")

    schedule = schedule_of(smoke_config(), FakeEngine(dryrun=False), broken)
    wc = wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    with pytest.raises(KeyError):
        schedule.priority(wc)


def test_retraining_forces_the_training_rules_and_sets_the_flag(smoke_config):
    wc = wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    schedule = schedule_of(smoke_config())
    assert schedule.run_retrain(wc) == "0"
    engine = FakeEngine(forced={schedule.study.run_metrics("text_image", wc.run_id)})
    assert schedule_of(smoke_config(), engine).run_retrain(wc) == "1"  # its output forced: that run only
    assert schedule_of(smoke_config(), FakeEngine(forced={"wsd_branch"})).retraining()  # any training rule
    engine = FakeEngine()
    retrain = schedule_of(smoke_config(retrain=True), engine)
    retrain.train_inputs(wc)
    assert engine.forced_rules == ["train"] and retrain.run_retrain(wc) == "1"


def test_a_training_jobs_resources(smoke_config):
    schedule = schedule_of(smoke_config(train={"trackers": "tensorboard"}))
    res = schedule.resources(retrain=schedule.run_retrain)
    wc = wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    assert res["nodes"](wc) == 1 and res["launcher"] == "local" and res["procs_per_node"] == 1
    assert "--trackers tensorboard" in res["track"](wc)
    assert res["runtime"](wc) >= 10


def test_kept_checkpoints_are_spelt_once():
    assert kept_checkpoint("s/to-00000040", 40) == "s/to-00000040/final/keep/step-00000040.pt"
    assert kept_origin(kept_checkpoint("s/to-00000040", 40)) == ("s/to-00000040", 40)


def wsd_first_trajectory(schedule):
    trajs = schedule.family_trajectories("text_image")
    return next(t for t in trajs.values() if len(t.points) > 1)


def test_wsd_segments_chain_from_point_to_point(smoke_config):
    schedule = schedule_of(smoke_config(train={"schedule": "wsd"}))
    t = wsd_first_trajectory(schedule)
    first, second = t.points[0], t.points[1]
    wc = wildcards(family="text_image", traj=t.traj_id, end=f"{first:08d}")
    assert "start" not in schedule.segment_inputs(wc)
    wc2 = wildcards(family="text_image", traj=t.traj_id, end=f"{second:08d}")
    start = schedule.point_file("text_image", t.traj_id, first)
    assert schedule.segment_inputs(wc2)["start"] == ("ancient", start)  # no rerun when it is remade
    args = flags(
        schedule.segment_args(wc2, SimpleNamespace(data="d", calibration="c", start=start, keys=lambda: ["start"]))
    )
    assert args["--max-steps"] == str(second) and args["--init-step"] == str(first)
    assert args["--init-from"] == schedule.segment_dir("text_image", t.traj_id, first)
    assert args["--cooldown-fraction"] == "0.0" and args["--checkpoint-at"] == str(second)
    # Every segment and every branch is one job.
    rows = schedule.plan.rows("text_image")
    trajs = schedule.trajectories(rows)
    assert len(schedule.training_jobs(rows)) == sum(len(t.segments) + len(t.branches) for t in trajs)


def test_a_started_segment_keeps_the_start_it_recorded(smoke_config):
    schedule = schedule_of(smoke_config(train={"schedule": "wsd"}))
    t = wsd_first_trajectory(schedule)
    second = t.points[1]
    rundir = Path(schedule.segment_dir("text_image", t.traj_id, second))
    rundir.mkdir(parents=True)
    (rundir / "config.yaml").write_text(yaml.safe_dump({"init_from": "elsewhere", "init_step": 3}))
    assert recorded_start(str(rundir)) == (True, kept_checkpoint("elsewhere", 3))
    wc = wildcards(family="text_image", traj=t.traj_id, end=f"{second:08d}")
    assert schedule.segment_inputs(wc)["start"] == ("ancient", kept_checkpoint("elsewhere", 3))


def test_a_wsd_branch_starts_at_its_cooldown_and_a_lost_point_is_said(smoke_config):
    engine = FakeEngine()
    schedule = schedule_of(smoke_config(train={"schedule": "wsd"}), engine)
    t = wsd_first_trajectory(schedule)
    branch = t.branches[0]
    wc = wildcards(family="text_image", run_id=branch.run_id)
    inputs = schedule.branch_inputs(wc)
    assert inputs["start"] == ("ancient", schedule.point_file("text_image", t.traj_id, branch.start))
    args = flags(schedule.branch_args(wc, SimpleNamespace(data="d", calibration="c", start=inputs["start"][1])))
    assert args["--init-step"] == str(branch.start) and args["--warmup"] == str(t.warmup)
    # Every job after a point finished, the point itself gone: nothing reruns it, so it is said.
    study = schedule.study
    after = [study.run_metrics("text_image", b.run_id) for b in t.branches if b.start == t.points[0]]
    after.append(f"{schedule.segment_dir('text_image', t.traj_id, t.points[1])}/metrics.json")
    for path in after:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("{}")
    lost = schedule.point_file("text_image", t.traj_id, t.points[0])
    assert lost in schedule.lost_points("text_image")
    schedule.study_metrics("text_image")
    assert any(line.startswith(f"{lost} is gone") for line in engine.said)


def test_a_training_jobs_identity_is_a_trigger_snakemake_compares_and_is_its_runs(smoke_config):
    """Snakemake compares only the params that read no job input: the identity reads the wildcards alone,
    and is the hash of the very run whose flags the job passes."""
    cosine = schedule_of(smoke_config())
    wc = wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    param = cosine.identity_param(cosine.train_run, cosine.train_inputs)
    assert list(inspect.signature(param).parameters) == ["wildcards"]
    run = cosine.train_run(wc, SimpleNamespace(**cosine.train_inputs(wc)))
    assert param(wc) == run_hash(run)
    assert flags(cosine.train_args(wc, SimpleNamespace(**cosine.train_inputs(wc))))["--out"] == run.out
    # A setting of the study's runs changes it; where they run does not.
    seeded = schedule_of(smoke_config(train={"seed": 1}))
    assert seeded.identity_param(seeded.train_run, seeded.train_inputs)(wc) != param(wc)
    moved = schedule_of(smoke_config(train={"device": "cuda", "threads": 4}))
    assert moved.identity_param(moved.train_run, moved.train_inputs)(wc) == param(wc)


def test_a_wsd_jobs_identity_holds_where_it_starts(smoke_config):
    config = smoke_config(train={"schedule": "wsd"})
    schedule = schedule_of(config)
    schedule.ancient = str  # Snakemake's ancient() is the path, flagged
    t = wsd_first_trajectory(schedule)
    branch = wildcards(family="text_image", run_id=t.branches[0].run_id)
    identity = schedule.identity_param(schedule.branch_run, schedule.branch_inputs)(branch)
    assert identity == run_hash(schedule.branch_run(branch, JobInputs(schedule.branch_inputs(branch))))
    second = wildcards(family="text_image", traj=t.traj_id, end=f"{t.points[1]:08d}")
    segment = schedule.identity_param(schedule.segment_run, schedule.segment_inputs)
    run = schedule.segment_run(second, JobInputs(schedule.segment_inputs(second)))
    assert segment(second) == run_hash(run) and run.init_step == t.points[0]


def test_a_training_jobs_slurm_names_come_from_the_cluster_section(smoke_config):
    """The names profiles/slurm's executor reads: the partition is the job's queue, the account and memory the
    study's, the time limit (runtime) its walltime's minutes."""
    cluster = {"account": "proj", "queue": "gpu", "mem_mb": 32000}
    schedule = schedule_of(smoke_config(cluster=cluster))
    res = schedule.resources(retrain=schedule.run_retrain)
    wc = wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")
    assert (res["slurm_partition"], res["slurm_account"], res["mem_mb"]) == ("gpu", "proj", 32000)
    assert "gpu" not in res  # a cpu study asks no GPU
    assert res["runtime"](wc) == -(-resources_seconds(res["walltime"](wc)) // 60)


def resources_seconds(walltime: str) -> int:
    from prism.launch.walltime import walltime_seconds

    return walltime_seconds(walltime)
