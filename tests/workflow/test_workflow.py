"""The Snakemake DAG on a tiny study: outputs, incrementality, validation, safety, lint, report."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

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
        metrics = json.loads((study / "runs" / run_id / "metrics.json").read_text())
        # cosine runs warm up over half the plan's min_steps (10), as a wsd study's would
        assert metrics["schedule"] == "cosine" and metrics["warmup"] == 5


def test_the_smoke_study_ends_with_a_fit(tmp_path):
    """What the README gives as the installation check, as a user runs it: the repository's config.yaml
    with config/smoke.yaml merged over it, into a study folder of its own."""
    workdir = make_workdir(tmp_path / "smoke", tiny=False)
    study = tmp_path / "smoke-study"
    out = snakemake(
        workdir, "fit_text_image", "--configfile", "config/smoke.yaml", "--config", f"study_dir={study}"
    ).stdout
    fit = json.loads((study / "text_image" / "fit" / "e2e.json").read_text())
    assert fit["verdict"]["identifiable"] is False  # two budgets never determine an exponent
    assert sorted(p.name for p in (study / "text_image" / "plots" / "e2e").glob("*.png")) == [
        "approach3_fit.png",
        "isoflop_curves.png",
        "scaling_laws.png",
        "training_curves.png",
    ]
    assert "verdict: NOT identifiable" in out and "runs: 6 (6 ok)" in out


def test_jobs_start_their_commands_from_one_worker(tiny_study):
    served = (tiny_study.workdir / "scaling-study" / "logs" / "worker.log").read_text()
    for run_id in planned_run_ids(tiny_study.workdir):
        assert f"runs/{run_id} " in served  # its `prism train` ran in a child of the worker
    assert "prism isoflop fit" in served


def test_dry_fit_lists_one_train_job_per_planned_run(tiny_study):
    # Before the plan: calibrations and the plan, no training yet (the checkpoint decides).
    counts = job_counts(tiny_study.dry_plan)
    assert counts.get("calibrate") == 3 and counts.get("speed") == 3 and counts.get("plan") == 1
    assert "train" not in counts
    listed = train_run_ids(tiny_study.dry_fit)
    assert sorted(listed) == sorted(planned_run_ids(tiny_study.workdir))


def test_plan_dry_run_prints_the_same_runs(tiny_study):
    workdir = tiny_study.workdir
    plan_cmd = re.search(r"prism isoflop plan (.*?) --out ", tiny_study.dry_plan).group(1)  # its job block
    result = subprocess.run(
        f"{BIN}/prism isoflop plan {plan_cmd} --dry-run",
        shell=True,
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    printed = set(re.findall(r"^(\S+-C[0-9.]+e[0-9]+)\s", result.stdout, flags=re.M))
    assert printed == planned_run_ids(workdir)


def test_second_run_has_nothing_to_do(tiny_study):
    out = snakemake(tiny_study.workdir, "fit_text_image", "plot_text_image").stdout
    assert "Nothing to be done" in out


def test_new_budget_dry_run_lists_exactly_the_runs_the_plan_will_hold(tiny_study):
    """Once calibrated, the DAG computes the plan itself: the dry run lists the new budget's training
    jobs before the plan job has run, and the plan job then writes exactly those runs."""
    workdir = tiny_study.workdir
    before = planned_run_ids(workdir)
    budgets = "budgets=[1e10,2e10,4e10]"
    out = snakemake(workdir, "-n", "fit_text_image", "--config", budgets).stdout
    assert "<TBD>" not in out
    listed = train_run_ids(out)
    assert listed and all(r.endswith("-C4e10") for r in listed)
    counts = job_counts(out)
    assert counts.get("plan") == 1 and counts.get("calibrate") is None and counts.get("data") is None
    assert counts.get("collect") == 1 and counts.get("fit") == 1
    # Plan for real in a copy: plan.yaml holds exactly the old runs and the listed ones.
    copy = workdir.parent / (workdir.name + "-budget")
    shutil.copytree(workdir, copy, symlinks=True)
    snakemake(copy, "plan_text_image", "--config", budgets)
    after = planned_run_ids(copy)
    assert before < after and sorted(after - before) == sorted(listed)
    again = snakemake(copy, "-n", "fit_text_image", "--config", budgets).stdout
    assert sorted(train_run_ids(again)) == sorted(listed)


def test_plan_dry_run_shows_time_and_node_hours(tiny_study):
    workdir = tiny_study.workdir
    out = subprocess.run(
        [
            f"{BIN}/prism",
            "isoflop",
            "plan",
            "--family",
            "text_image",
            "--budgets",
            "1e10,2e10",
            "--calibration-dir",
            "scaling-study/calibration",
            "--backbones",
            "30k,60k,120k",
            "--variants",
            "BASE",
            "--global-batch",
            "8",
            "--min-steps",
            "10",
            "--window",
            "3",
            "--prior-k",
            "0.65",
            "--node-peak-flops",
            "5e15",
            "--mfu",
            "0.3",
            "--simulations",
            "20",
            "--dry-run",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "time here" in out and "node-h" in out
    assert re.search(
        r"time here \(one run after another\): [0-9.]+ (s|min|h) \[estimate of the training steps alone", out
    )
    assert "node-hours [estimate: assumed MFU 0.3 (plan.mfu, not measured) x the vendor's node peak 5e+15 FLOP/s" in out


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
    out = snakemake(tiny_study.workdir, "-n", "plot_text_image", "fit_text_image", "--configfile", "dpi.yaml").stdout
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


def test_end_of_run_summary_and_training_curves(tiny_study):
    # the tiny study's two budgets have no minimum inside their grids: Approach 2 says why it gives no a
    assert "verdict:" in tiny_study.fit and "Approach 2: no exponent: " in tiny_study.fit
    assert "figures: scaling-study/text_image/plots/e2e/" in tiny_study.fit
    assert "training_curves.png" in tiny_study.fit
    plots = tiny_study.workdir / "scaling-study" / "text_image" / "plots" / "e2e"
    assert (plots / "training_curves.png").stat().st_size > 1000


def test_the_terminal_shows_progress_errors_and_the_answer_not_job_blocks(tiny_study):
    """The profile's `quiet: [rules, host]`: a few lines per job, the plan's lines and the summary kept."""
    out = tiny_study.fit
    steps = [int(m.group(1)) for m in re.finditer(r"^\d+ of (\d+) steps \(\d+%\) done$", out, flags=re.M)]
    assert steps and re.search(r"^(\d+) of \1 steps \(100%\) done$", out, flags=re.M)
    assert "verdict:" in out and "figures: scaling-study/text_image/plots/e2e/" in out
    assert "plan text_image:" in tiny_study.plan  # the plan's summary line, printed where Snakemake runs
    for block in ("rule train:", "localrule collect:", "Shell command:", "Select jobs to execute", "SNAKEMAKE\n"):
        assert block not in out
    assert len(out.splitlines()) <= 3 * max(steps) + 45, out  # a job's block alone is 8-10 lines


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
        ({"colour": "blue"}, "unknown key colour"),
        ({"fit": {"bootstrap": "many"}}, 'fit.bootstrap = "many" is not allowed; allowed: integer, >= 0'),
        ({"train": {"threds": 2}}, "unknown key train.threds (did you mean train.threads?); the keys of train"),
        ({"budgets": "3e11"}, 'budgets = "3e11" is not allowed; allowed: list of budget'),
    ],
)
def test_bad_config_stops_before_running_in_one_line(tmp_path, override, needle):
    workdir = make_workdir(tmp_path / "bad", override)
    out = snakemake(workdir, "fit_text_image", check=False)
    assert out.returncode != 0
    lines = [line for line in out.stdout.splitlines() if line.startswith("config (config/config.yaml): ")]
    assert len(lines) == 1 and lines[0].removeprefix("config (config/config.yaml): ").startswith(needle), out.stdout
    assert len(out.stdout.splitlines()) <= 4 and "Traceback" not in out.stdout, out.stdout  # no schema dump
    assert not (workdir / "scaling-study").exists()


def test_a_config_value_typed_as_a_target_stops_in_one_line(tmp_path):
    """Hydra's style, `snakemake fit_F train.seed=1`, would otherwise end in "No rule to produce train.seed=1"."""
    workdir = make_workdir(tmp_path / "hydra")
    out = snakemake(workdir, "-n", "fit_text_image", "train.seed=1", check=False)
    assert out.returncode != 0 and "Traceback" not in out.stdout
    assert out.stdout.splitlines()[-1].startswith(
        """snakemake: train.seed=1 is not a target but a config value: give it after the targets as --config"""
        """ 'train={"seed": 1}'"""
    )


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


def test_report_renders_in_chromium_with_every_figure_and_the_fit_table(tiny_study):
    """`snakemake --report` opened in headless Chromium: no JavaScript error, every figure of the
    plot folder decodes in the page, and the fit page carries its tables."""
    from .browser import chromium, render

    if not chromium():
        pytest.skip("chromium is not installed (tools/install-system-deps.sh installs it as root)")
    workdir = tiny_study.workdir
    snakemake(workdir, "--report", "report.html", "fit_text_image")
    seen, shot = render(workdir / "report.html", workdir)
    assert seen["errors"] == []
    figures = {Path(r["path"]).name: r for r in seen["results"] if r["mime"] == "image/png"}
    pngs = {p.name for p in (workdir / "scaling-study" / "text_image" / "plots" / "e2e").glob("*.png")}
    assert "training_curves.png" in pngs and set(figures) == pngs
    for name, r in figures.items():
        assert r["shown"] and r["width"] > 100 and r["height"] > 100, (name, r)
    pages = [r for r in seen["results"] if r["mime"] == "text/html"]
    assert pages and pages[0]["shown"] and pages[0]["tables"] >= 2
    assert shot.is_file() and shot.stat().st_size > 10_000


def test_scaling_study_readme_maps_every_output(tiny_study):
    """scaling-study/README.md (kept in git; the outputs are ignored) names every file kind a study makes."""
    from .wfhelpers import REPO

    readme = (REPO / "scaling-study" / "README.md").read_text()
    study = tiny_study.workdir / "scaling-study"
    family = study / "text_image"
    made = {p.name for p in study.iterdir()} | {p.name for p in family.iterdir()}
    mapped = {
        "data": "`data/F/`",
        "calibration": "`calibration/F__B__V__R.json`",
        "logs": "`logs/RULE/",
        "text_image": "`F/",
        "plan.yaml": "`F/plan.yaml`",
        "plan.csv": "`F/plan.csv`",
        "runs": "`F/runs/RUN_ID/`",
        "runs.csv": "`F/runs.csv`",
        "fit": "`F/fit/R.json`",
        "plots": "`F/plots/R/*.png`",
    }
    assert made <= set(mapped), made - set(mapped)
    for name in made:
        assert mapped[name] in readme, name
    assert ".speed.json" in readme
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert "scaling-study/*" in ignored and "!scaling-study/README.md" in ignored
