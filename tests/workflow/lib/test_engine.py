"""prism.workflow.engine: Snakemake's objects, seen through what the workflow asks of them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from snakemake.exceptions import IncompleteCheckpointException

from prism.workflow.engine import FORCED_ENV, Engine, pending_or


def fake_workflow(**settings):
    rules = {}
    return SimpleNamespace(
        dryrun=False, remote_exec=False, subprocess_exec=False, scheduler=None,
        dag_settings=SimpleNamespace(**settings) if settings else None,
        dag=SimpleNamespace(forcerules=set()), get_rule=lambda name: rules.setdefault(name, f"rule {name}"),
    )  # fmt: skip


def test_forced_targets_are_recorded_for_cluster_jobs(monkeypatch):
    monkeypatch.delenv(FORCED_ENV, raising=False)
    engine = Engine(fake_workflow(forceall=False, forcerun={"train", "a/metrics.json"}))
    assert engine.forced_targets() == {"train", "a/metrics.json"}
    # A cluster job's Snakemake, without the flags, reads them from the environment it inherited.
    assert Engine(fake_workflow()).forced_targets() == {"train", "a/metrics.json"}
    monkeypatch.delenv(FORCED_ENV)
    assert Engine(fake_workflow()).forced_targets() == set()


def test_force_rule_forces_every_job_of_the_rule():
    workflow = fake_workflow()
    Engine(workflow).force_rule("wsd_segment")
    assert workflow.dag.forcerules == {"rule wsd_segment"}


def test_a_line_is_said_once_and_never_in_a_job(monkeypatch):
    said = []
    engine = Engine(fake_workflow())
    engine.logger = SimpleNamespace(error=said.append, warning=said.append)
    engine.say_once("x")
    engine.say_once("x")
    assert said == ["x"]
    job = Engine(SimpleNamespace(**{**vars(fake_workflow()), "remote_exec": True}))
    job.logger = engine.logger
    job.say_once("y")
    assert said == ["x"]


def test_pending_or_stands_in_only_while_the_plan_job_has_not_run():
    def pending():
        raise IncompleteCheckpointException("plan", "study/text_image/plan.yaml")  # checkpoints.plan.get's

    assert pending_or(7, pending) == 7
    assert pending_or(7, lambda: 3) == 3

    def bug():
        return {}["family"]

    with pytest.raises(KeyError, match="family"):  # a real error is not taken for the plan's absence
        pending_or(7, bug)


@pytest.mark.parametrize(
    ("local_exec", "dryrun", "use_threads", "submits"),
    [(False, False, True, True), (True, False, False, False), (True, True, False, False), (True, True, True, True)],
)
def test_a_cluster_profile_submits_even_in_its_dry_run(local_exec, dryrun, use_threads, submits):
    """The dry run of `--profile profiles/aurora` runs Snakemake's dry-run executor, yet its plan speaks in
    node-hours: Snakemake forces use_threads on for the cluster executor the call names."""
    workflow = fake_workflow()
    workflow.local_exec, workflow.dryrun = local_exec, dryrun
    workflow.execution_settings = SimpleNamespace(use_threads=use_threads)
    assert Engine(workflow).submits is submits


def test_a_pack_is_refused_where_the_executor_runs_a_groups_jobs_one_after_another():
    """Snakemake's Slurm executor runs a group's jobs in turn in its allocation: a pack there would hold its
    devices idle, so its group function stops the workflow before any job is submitted; the PBS profile's
    executor (cluster-generic), a local run and a dry run go on."""
    for name in ("cluster-generic", "local", "dryrun"):
        workflow = SimpleNamespace(**vars(fake_workflow()), executor_plugin=SimpleNamespace(name=name))
        Engine(workflow).check_groups_run_at_once()
    Engine(fake_workflow()).check_groups_run_at_once()  # the Snakefile being read: no executor yet
    workflow = SimpleNamespace(**vars(fake_workflow()), executor_plugin=SimpleNamespace(name="slurm"))
    with pytest.raises(SystemExit, match=r"cluster.pack: Snakemake's Slurm executor .* set cluster.pack: false"):
        Engine(workflow).check_groups_run_at_once()


def test_a_job_of_the_slurm_executor_knows_it_from_the_snakemake_that_submitted_it(monkeypatch):
    """The job's shell runs in a Snakemake of the local executor that the job step starts with srun: the
    submitting Snakemake's mark in the environment (inherited through sbatch and srun) says Slurm."""
    from prism.workflow.engine import SLURM_ENV

    monkeypatch.delenv(SLURM_ENV, raising=False)
    local = SimpleNamespace(**vars(fake_workflow()), executor_plugin=SimpleNamespace(name="local"))
    assert not Engine(local).runs_under_slurm()
    submitting = SimpleNamespace(**vars(fake_workflow()), executor_plugin=SimpleNamespace(name="slurm"))
    assert Engine(submitting).runs_under_slurm()
    assert Engine(local).runs_under_slurm()  # the job's Snakemake, in the environment it inherited
