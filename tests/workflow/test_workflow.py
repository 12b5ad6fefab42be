"""The Snakemake DAG on a tiny study: outputs, incrementality, validation, safety, lint, report."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from .wfhelpers import BIN, job_counts, make_workdir, planned_run_ids, snakemake, train_run_ids

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def test_study_writes_fit_and_plots(tiny_study):
    study = tiny_study.workdir / "scaling-study" / "text_image"
    fit = json.loads((study / "fit" / "e2e.json").read_text())
    assert "approach2" in fit and "diagnostics" in fit
    assert (study / "fit" / "e2e.md").read_text().strip()
    pngs = sorted(p.name for p in (study / "plots" / "e2e").glob("*.png"))
    assert pngs, "no plots written"
    runs = planned_run_ids(tiny_study.workdir)
    for run_id in runs:
        assert (study / "runs" / run_id / "metrics.json").exists()


def test_dry_fit_lists_one_train_job_per_planned_run(tiny_study):
    # Before the plan: calibrations and the plan, no training yet (the checkpoint decides).
    counts = job_counts(tiny_study.dry_plan)
    assert counts.get("calibrate") == 3 and counts.get("plan") == 1
    assert "train" not in counts
    listed = train_run_ids(tiny_study.dry_fit)
    assert sorted(listed) == sorted(planned_run_ids(tiny_study.workdir))


def test_plan_dry_run_prints_the_same_runs(tiny_study):
    workdir = tiny_study.workdir
    plan_cmd = re.search(r"prism isoflop plan (.*?) --out ", tiny_study.plan).group(1)
    result = subprocess.run(
        f"{BIN}/prism isoflop plan {plan_cmd} --dry-run", shell=True, cwd=workdir,
        capture_output=True, text=True, check=True,
    )
    printed = set(re.findall(r"^(\S+-C[0-9.]+e[0-9]+)\s", result.stdout, flags=re.M))
    assert printed == planned_run_ids(workdir)


def test_second_run_has_nothing_to_do(tiny_study):
    out = snakemake(tiny_study.workdir, "fit_text_image", "plot_text_image").stdout
    assert "Nothing to be done" in out


def test_new_budget_trains_only_new_runs(tiny_study):
    workdir = tiny_study.workdir
    before = planned_run_ids(workdir)
    out = snakemake(workdir, "-n", "fit_text_image", "--config", "budgets=[1e10,2e10,4e10]").stdout
    # The plan reruns (its budgets changed); the DAG below it is known after it runs.
    assert job_counts(out).get("plan") == 1
    assert "train" not in job_counts(out)
    # Plan for real in a copy, then the dry run lists only the new budget's runs.
    copy = workdir.parent / (workdir.name + "-budget")
    shutil.copytree(workdir, copy, symlinks=True)
    snakemake(copy, "plan_text_image", "--config", "budgets=[1e10,2e10,4e10]")
    after = planned_run_ids(copy)
    assert before < after
    out = snakemake(copy, "-n", "fit_text_image", "--config", "budgets=[1e10,2e10,4e10]").stdout
    listed = train_run_ids(out)
    assert sorted(listed) == sorted(after - before)
    assert all(r.endswith("-C4e10") for r in listed)
    counts = job_counts(out)
    assert counts.get("calibrate") is None and counts.get("data") is None
    assert counts.get("collect") == 1 and counts.get("fit") == 1


def test_deleted_run_retrains_only_that_run(tiny_study):
    workdir = tiny_study.workdir
    copy = workdir.parent / (workdir.name + "-delete")
    shutil.copytree(workdir, copy, symlinks=True)
    victim = sorted(planned_run_ids(copy))[0]
    shutil.rmtree(copy / "scaling-study" / "text_image" / "runs" / victim)
    out = snakemake(copy, "-n", "fit_text_image").stdout
    assert train_run_ids(out) == [victim]
    assert set(job_counts(out)) == {"train", "collect", "fit", "plot", "fit_text_image"}


def test_plot_option_replots_only(tiny_study):
    (tiny_study.workdir / "dpi.yaml").write_text("plot:\n  dpi: 72\n")
    out = snakemake(tiny_study.workdir, "-n", "plot_text_image", "fit_text_image",
                    "--configfile", "dpi.yaml").stdout
    counts = job_counts(out)
    assert counts.get("plot") == 1
    assert set(counts) == {"plot", "plot_text_image", "fit_text_image"}, counts


def test_code_edit_does_not_retrain(tiny_study):
    # A rule's shell text changing (a code trigger) must not rerun finished jobs.
    copy = tiny_study.workdir.parent / (tiny_study.workdir.name + "-code")
    shutil.copytree(tiny_study.workdir, copy, symlinks=True)
    train_rule = copy / "rules" / "train.smk"
    train_rule.write_text(train_rule.read_text().replace('" --threads {threads}"', '" --threads {threads} "'))
    out = snakemake(copy, "-n", "fit_text_image").stdout
    assert "Nothing to be done" in out


def test_report_shows_plots_and_fit(tiny_study):
    snakemake(tiny_study.workdir, "--report", "report.html", "fit_text_image", "plot_text_image")
    html = (tiny_study.workdir / "report.html").read_text(errors="replace")
    assert "isoflop_curves" in html or ".png" in html
    assert "e2e.md" in html


def test_lint_is_clean_but_for_software_deployment(tmp_path):
    workdir = make_workdir(tmp_path / "lint")
    out = snakemake(workdir, "--lint", check=False).stdout
    findings = [line.strip() for line in out.splitlines() if line.strip().startswith("* ")]
    assert findings, "lint printed nothing (did it run?)"
    other = [f for f in findings if "conda environment or container" not in f]
    assert other == []


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"colour": "blue"}, "'colour' was unexpected"),
        ({"fit": {"bootstrap": "many"}}, "['fit']['bootstrap']"),
        ({"train": {"threds": 2}}, "'threds' was unexpected"),
        ({"budgets": "3e11"}, "['budgets']"),
    ],
)
def test_bad_config_stops_before_running(tmp_path, override, needle):
    workdir = make_workdir(tmp_path / "bad", override)
    out = snakemake(workdir, "fit_text_image", check=False)
    assert out.returncode != 0
    assert needle in out.stdout
    assert not (workdir / "scaling-study").exists()


@pytest.mark.parametrize(
    "override",
    [
        {"families": ["x; touch pwned"]},
        {"budgets": ["1e10", "2e10; touch pwned"]},
        {"backbones": ["30k", "$(touch pwned)"]},
        {"study_dir": "out; touch pwned"},
        {"cluster": {"account": "acct; touch pwned"}},
    ],
)
def test_shell_syntax_in_config_runs_nothing(tmp_path, override):
    workdir = make_workdir(tmp_path / "inject", override)
    for target in ("fit_text_image", "all"):
        out = snakemake(workdir, target, check=False)
        assert out.returncode != 0
    assert not list(workdir.rglob("pwned"))
    assert not (workdir / "scaling-study").exists()
