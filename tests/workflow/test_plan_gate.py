"""A plan that cannot answer its question stops the workflow before anything trains; a pilot goes on."""

from __future__ import annotations

import shutil

import pytest

from .wfhelpers import job_counts, snakemake, train_run_ids

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

# The tiny study's budgets plus one: still an UNDETERMINED forecast (its grids are too narrow).
BUDGETS = "budgets=[1e10,2e10,4e10]"
STRICT = 'plan={"allow_undetermined": false}'


def _copy(tiny_study, name):
    copy = tiny_study.workdir.parent / f"{tiny_study.workdir.name}-{name}"
    shutil.copytree(tiny_study.workdir, copy, symlinks=True)
    return copy


def test_an_undetermined_plan_stops_the_workflow_before_training(tiny_study):
    copy = _copy(tiny_study, "strict")
    runs = copy / "scaling-study" / "text_image" / "runs"
    before = sorted(p.name for p in runs.iterdir())
    dry = snakemake(copy, "-n", "collect_text_image", "--config", BUDGETS, STRICT).stdout
    # The DAG does not take the computed plan: it waits for the plan job and lists no training job.
    assert train_run_ids(dry) == [] and job_counts(dry).get("plan") == 1
    assert any(line.startswith("plan text_image stops the study: forecast UNDETERMINED") for line in dry.splitlines())
    # What the budgets would cost is printed before the line that stops them.
    assert any(line.startswith("plan text_image: 9 runs on 3 of 3 budget(s)") for line in dry.splitlines())
    out = snakemake(copy, "collect_text_image", "--config", BUDGETS, STRICT, check=False)
    assert out.returncode != 0 and "Error in rule plan" in out.stdout
    reasons = [line for line in out.stdout.splitlines() if "stops the study" in line]
    assert reasons and all("\n" not in line for line in reasons)
    assert "forecast UNDETERMINED" in reasons[0] and "plan.allow_undetermined: true" in reasons[0]
    assert "rule train" not in out.stdout and "(Rule: train)" not in out.stdout
    assert sorted(p.name for p in runs.iterdir()) == before
    assert not (copy / "scaling-study" / "text_image" / "plan.yaml").exists()  # a failed plan leaves none


def test_a_pilot_goes_on_and_prints_the_plans_summary(tiny_study):
    copy = _copy(tiny_study, "pilot")
    dry = snakemake(copy, "-n", "collect_text_image", "--config", BUDGETS).stdout
    listed = train_run_ids(dry)
    assert listed and all(r.endswith("-C4e10") for r in listed)
    summary = [line for line in dry.splitlines() if line.startswith("plan text_image: ")]
    assert (
        summary[0].startswith("plan text_image: 9 runs on 3 of 3 budget(s)") and "forecast UNDETERMINED" in summary[0]
    )
    assert "trained anyway (plan.allow_undetermined)" in summary[0]
    assert "expected wall time" in summary[0] and "node-hours" not in summary[0]  # a laptop has none
    assert summary[1].startswith("plan text_image: 9 training jobs run on this machine, 2 at a time")
    out = snakemake(copy, "plan_text_image", "--config", BUDGETS).stdout
    assert "plan text_image: 9 runs on 3 of 3 budget(s)" in out  # the plan job's last line, on the terminal


def test_a_shards_folder_that_does_not_exist_is_refused_in_one_line(tiny_study):
    """config/aurora.yaml's placeholder: a dry run still shows the study and says so; a run stops at the data."""
    copy = _copy(tiny_study, "noshards")
    missing = str(copy / "no-such-shards")
    setting = f'data={{"shards": {{"text_image": "{missing}"}}}}'
    dry = snakemake(copy, "-n", "collect_text_image", "--config", setting).stdout
    assert f"config data.shards.text_image: {missing} is not a folder" in dry and "docs/own-data.md" in dry
    out = snakemake(copy, "collect_text_image", "--config", setting, check=False)
    assert out.returncode != 0 and "Error in rule data" in out.stdout
    assert f"prism data index: error: shards directory {missing} does not exist" in out.stdout
    assert "rule train" not in out.stdout and "(Rule: train)" not in out.stdout and "(Rule: plan)" not in out.stdout
