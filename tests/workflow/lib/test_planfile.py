"""prism.workflow.planfile: the plan's rows while the DAG is built, as `prism isoflop plan` writes them."""

from __future__ import annotations

import pytest
import yaml

from prism.core.errors import PrismError
from prism.isoflop.design.plan import plan_runs
from prism.workflow.planfile import WorkflowPlan
from prism.workflow.study import Study

from .conftest import FakeEngine, wildcards

SMOKE_RUNS = {f"{b}-BASE-e2e-C{c}" for b in ("30k", "60k", "120k") for c in ("1e10", "2e10")}


def make_plan(config, engine, wait=None):
    return WorkflowPlan(Study(config), engine, wait or (lambda family: pytest.fail("waited for the plan job")),
                     lambda family, rows: f"plan {family}: {len(rows)} training jobs request")  # fmt: skip


def test_a_dry_run_plans_in_process_before_any_calibration(smoke_config):
    engine = FakeEngine(dryrun=True)
    plan = make_plan(smoke_config(), engine)
    rows = plan.rows("text_image")
    assert set(rows) == SMOKE_RUNS
    # The rows are those `prism isoflop plan` writes for the same arguments.
    study = Study(smoke_config())
    expected = plan_runs(
        "text_image", [1e10, 2e10], None, study.plan, backbones=["30k", "60k", "120k"], variants=["BASE"]
    )
    assert rows == {row.run_id: row for row in expected.runs}
    # Its summary and what its jobs request are said where Snakemake runs.
    said = [text for _, text in engine.logger.lines]
    assert any("data is not built yet" in t for t in said) and "plan text_image: 6 training jobs request" in said
    assert plan.run_metrics("text_image")[0].endswith("/metrics.json")


def test_the_plan_is_computed_once_while_its_inputs_stay(smoke_config):
    engine = FakeEngine(dryrun=True)
    plan = make_plan(smoke_config(), engine)
    assert plan.rows("text_image") is plan.rows("text_image")
    assert sum("training jobs request" in text for _, text in engine.logger.lines) == 1


def test_a_run_waits_for_the_plan_job_until_the_data_is_built(smoke_config, tmp_path):
    plan_file = tmp_path / "plan.yaml"
    row = {"run_id": "30k-BASE-e2e-C1e10", "family": "text_image", "backbone": "30k", "variant": "BASE",
           "regime": "e2e", "budget": 1e10, "global_batch": 8, "steps": 66}  # fmt: skip
    plan_file.write_text(yaml.safe_dump({"runs": [row]}))
    waited = []
    plan = make_plan(smoke_config(), FakeEngine(dryrun=False), lambda family: waited.append(family) or str(plan_file))
    assert list(plan.rows("text_image")) == ["30k-BASE-e2e-C1e10"] and waited == ["text_image"]
    assert plan.row(wildcards(family="text_image", run_id="30k-BASE-e2e-C1e10")).steps == 66
    with pytest.raises(ValueError, match=r"60k-BASE-e2e-C1e10.*plan\.yaml; planned: 30k-BASE-e2e-C1e10"):
        plan.row(wildcards(family="text_image", run_id="60k-BASE-e2e-C1e10"))


def test_a_bad_row_of_plan_yaml_is_refused_in_one_line_naming_the_file_run_and_key(smoke_config, tmp_path):
    """A hand-edited plan.yaml read back by the workflow: the row's own check, not a traceback later."""
    plan_file = tmp_path / "plan.yaml"
    row = {"run_id": "30k-BASE-e2e-C1e10", "family": "text_image", "backbone": "30k", "variant": "BASE",
           "regime": "e2e", "budget": 1e10, "global_batch": "eight", "steps": 66}  # fmt: skip
    plan_file.write_text(yaml.safe_dump({"runs": [row]}))
    plan = make_plan(smoke_config(), FakeEngine(dryrun=False), lambda family: str(plan_file))
    with pytest.raises(PrismError) as err:
        plan.rows("text_image")
    assert str(err.value) == (
        f"{plan_file}: runs[0] (30k-BASE-e2e-C1e10): global_batch must be a positive integer, got 'eight'"
    )


def test_a_plan_that_cannot_answer_waits_for_the_plan_job(smoke_config):
    """Without allow_undetermined, two budgets never train: the DAG waits for the plan job, which fails."""
    engine = FakeEngine(dryrun=True)
    plan = make_plan(smoke_config(plan={"allow_undetermined": False}), engine, lambda family: "never")
    assert plan.computed_rows("text_image") is None
    assert any(level == "error" for level, _ in engine.logger.lines)


def test_the_calibrations_of_the_rule_sizes_are_inputs(smoke_config):
    config = smoke_config(backbones=[], plan={"sizes_per_budget": 3, "window": 0.4})
    plan = make_plan(config, FakeEngine())
    files = plan.input_files("text_image")
    assert files[0].endswith("/data/text_image")
    calibrations = [f for f in files if f.endswith("__BASE__e2e.json")]
    speeds = [f for f in files if f.endswith(".speed.json")]  # the smoke study measures throughput
    assert len(calibrations) >= 3 and len(speeds) == len(calibrations)


def test_the_dry_run_names_sizes_the_plan_dropped_from_a_budget(smoke_config, monkeypatch):
    import prism.workflow.planfile as workflow_plan

    real = workflow_plan.make_plan

    def with_a_drop(**kwargs):
        plan = real(**kwargs)
        reason = "66 steps x batch 8 spend 1.01e+10 FLOPs, +1.4% off the budget"
        plan["dropped"].append({"run_id": "90k-BASE-e2e-C1e10", "budget": 1e10, "backbone": "90k", "variant": "BASE",
                                "params": 9e4, "reason": reason})  # fmt: skip
        return plan

    monkeypatch.setattr(workflow_plan, "make_plan", with_a_drop)
    engine = FakeEngine(dryrun=True)
    make_plan(smoke_config(), engine).rows("text_image")
    said = [text for _, text in engine.logger.lines]
    summary = next(i for i, t in enumerate(said) if t.startswith("plan text_image: 6 runs"))
    assert said[summary + 1] == (
        "plan text_image: budget 1e10 drops 90k-BASE (66 steps x batch 8 spend 1.01e+10 FLOPs, +1.4% off the budget)"
    )


def test_the_sweeps_pricing_never_waits_for_the_plan_that_waits_for_the_sweep(smoke_config):
    """With tune.rule fitted a run's plan waits for the lr sweep, so the sweep's packs are priced from the rows
    computed here, as the dry run computes them: what it prints is what they are submitted with."""
    config = smoke_config(tune={"rule": "fitted"})
    running = make_plan(config, FakeEngine(dryrun=False))  # fails the test if it waits for the plan job
    assert running.rule_pending("text_image") and running.computed_rows("text_image") is None
    dry = make_plan(config, FakeEngine(dryrun=True))
    assert running.pricing_rows("text_image") == dry.rows("text_image")
    assert running.pricing_rows("text_image") is running.pricing_rows("text_image")  # computed once


@pytest.mark.parametrize("dryrun", [True, False])
def test_budgets_that_all_would_be_refused_stop_the_study_before_its_data_is_built(smoke_config, dryrun):
    """The data cannot make a refused budget plannable: the dry run exits non-zero, the run builds nothing."""
    config = smoke_config(budgets=[1e6, 2e6], backbones=[], plan={"sizes_per_budget": 3, "window": 0.4})
    plan = make_plan(config, FakeEngine(dryrun=dryrun), lambda family: pytest.fail("waited for the plan job"))
    with pytest.raises(SystemExit, match=r"plan text_image: no budget can be planned: budget 1e6: no size in its"):
        plan.rows("text_image")


@pytest.mark.parametrize("submits", [False, True])
def test_node_hours_are_said_only_where_jobs_go_to_a_cluster(smoke_config, submits):
    engine = FakeEngine(dryrun=True, submits=submits)
    make_plan(smoke_config(), engine).rows("text_image")
    summary = next(t for _, t in engine.logger.lines if t.startswith("plan text_image: 6 runs"))
    assert ("node-hours" in summary) == submits
