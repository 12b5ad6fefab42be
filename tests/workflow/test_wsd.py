"""A wsd study through the real workflow: stable segments and cooldown branches as jobs.

One tiny study is trained once (the session fixture `wsd_study`); the other tests work on copies of it
and mostly look at what `snakemake -n` would run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from .wfhelpers import (
    LOCAL_PROFILE,
    SNAKEMAKE,
    STUDY,
    WSD_TRAIN,
    copy_of,
    env,
    job_counts,
    make_workdir,
    planned_run_ids,
    rule_outputs,
    snakemake,
    trajectories,
)

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def segment_ends(output: str) -> list[tuple[str, int]]:
    """(trajectory, end step) of every wsd_segment job a (dry) run lists."""
    found = []
    for out in rule_outputs(output, "wsd_segment"):
        m = re.search(r"stable/([^/]+)/to-(\d{8})/final/keep/", out)
        found.append((m.group(1), int(m.group(2))))
    return sorted(found)


def branch_ids(output: str) -> list[str]:
    return sorted(re.search(r"runs/([^/]+)/metrics\.json", o).group(1) for o in rule_outputs(output, "wsd_branch"))


def replanned(wsd_study: Path, name: str, budgets: str):
    """A copy of the study planned for other budgets: (copy, trajectories before, after, the dry run's output)."""
    copy = copy_of(wsd_study, name)
    before = trajectories(copy)
    snakemake(copy, "plan_text_image", "--config", budgets)
    out = snakemake(copy, "-n", "fit_text_image", "--config", budgets).stdout
    return copy, before, trajectories(copy), out


def training_pids(session: int, rundir: Path) -> list[int]:
    """The `prism train` processes of this test's Snakemake session that train `rundir`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            if os.getsid(int(entry.name)) != session:
                continue
        except (OSError, ProcessLookupError):
            continue
        words = [w.decode(errors="replace") for w in cmd]
        if "train" in words and "--dry-run" not in words and any(str(rundir.name) in w for w in words):
            found.append(int(entry.name))
    return found


def test_wsd_study_fits_with_branches_like_cosine_runs(wsd_study):
    study = wsd_study / STUDY
    fit = json.loads((study / "fit" / "e2e.json").read_text())
    assert "approach2" in fit and "diagnostics" in fit
    rows = {r["run_id"]: r for r in yaml.safe_load((study / "plan.yaml").read_text())["runs"]}
    trajs = trajectories(wsd_study)
    assert len(trajs) == 3 and all(len(t.branches) == 2 for t in trajs.values())
    for t in trajs.values():
        for point in t.points:  # every branch point trained once, in its own segment
            assert (
                study / "stable" / t.traj_id / f"to-{point:08d}" / "final" / "keep" / f"step-{point:08d}.pt"
            ).is_file()
        for b in t.branches:
            metrics = json.loads((study / "runs" / b.run_id / "metrics.json").read_text())
            # the whole model's FLOPs (prefix + cooldown), as the plan's cosine run of that budget
            assert metrics["status"] == "ok" and metrics["steps"] == b.steps
            assert metrics["flops"] == pytest.approx(rows[b.run_id]["flops"])
            assert metrics["schedule"] == "wsd"
            assert metrics["started_from"] == f"{STUDY}/stable/{t.traj_id}/to-{b.start:08d}@{b.start}"
            steps = [json.loads(line)["step"] for line in (study / "runs" / b.run_id / "eval.jsonl").open()]
            assert steps[0] == 0 and b.start in steps and steps[-1] == b.steps  # the whole curve
    runs_csv = (study / "runs.csv").read_text()
    assert all(run_id in runs_csv for run_id in rows)


def test_wsd_second_run_has_nothing_to_do(wsd_study):
    assert "Nothing to be done" in snakemake(wsd_study, "fit_text_image").stdout


def test_larger_budget_extends_each_trajectory_from_its_last_point(wsd_study):
    copy, before, after, out = replanned(wsd_study, "larger", "budgets=[1e10,2e10,4e10]")
    new_runs = planned_run_ids(copy) - {b.run_id for t in before.values() for b in t.branches}
    assert new_runs and all(r.endswith("-C4e10") for r in new_runs)
    assert branch_ids(out) == sorted(new_runs)
    expected = sorted(
        (t.traj_id, p)
        for t in after.values()
        for p in t.points
        if t.traj_id not in before or p not in before[t.traj_id].points
    )
    assert segment_ends(out) == expected
    for traj, end in expected:  # an extension starts from the trajectory's last point, not from scratch
        if traj in before:
            last = before[traj].points[-1]
            assert end > last
            assert f"stable/{traj}/to-{last:08d}/final/keep/step-{last:08d}.pt" in out
    assert set(job_counts(out)) <= {"wsd_segment", "wsd_branch", "collect", "fit", "plot", "fit_text_image"}


def test_smaller_budget_adds_its_point_and_branch_and_retrains_nothing_after_it(wsd_study):
    copy, before, after, out = replanned(wsd_study, "smaller", "budgets=[1e10,1.5e10,2e10]")
    assert branch_ids(out) == sorted(r for r in planned_run_ids(copy) if r.endswith("-C1.5e10"))
    # one new segment per trajectory: from the point before the new one to the new one ...
    new_points = sorted((t.traj_id, p) for t in after.values() for p in t.points if p not in before[t.traj_id].points)
    assert segment_ends(out) == new_points and 0 < len(new_points) <= len(branch_ids(out))
    # ... and the later segment (to the 2e10 point) is not retrained, though a point now precedes it
    for traj, point in new_points:
        assert before[traj].points[0] < point < before[traj].points[-1]
        assert f"to-{before[traj].points[-1]:08d}" not in " ".join(rule_outputs(out, "wsd_segment"))


def test_killed_segment_resumes_from_its_checkpoint(wsd_study):
    copy = copy_of(wsd_study, "kill")
    t = max(trajectories(copy).values(), key=lambda t: t.stable_steps)
    end = t.points[-1]
    segdir = copy / STUDY / "stable" / t.traj_id / f"to-{end:08d}"
    target = str(Path(STUDY, "stable", t.traj_id, f"to-{end:08d}", "final", "keep", f"step-{end:08d}.pt"))
    shutil.rmtree(segdir)
    # worker=false: the training process is the job's own, as on a node (the worker's children
    # stop on their own when their job is killed: tests/workflow/lib/test_worker.py).
    proc = subprocess.Popen(
        [SNAKEMAKE, *LOCAL_PROFILE, target, "--config", "worker=false"],
        cwd=copy,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 600
        while time.time() < deadline and not list((segdir / "checkpoints").glob("step-*.pt")):
            assert proc.poll() is None, "the segment ended before its first checkpoint"
            time.sleep(0.02)  # the tiny segment trains for about a second: look often
        assert list((segdir / "checkpoints").glob("step-*.pt")), "no checkpoint within 10 minutes"
        # Kill the training process (as a node failure would), not Snakemake: the job fails.
        for pid in training_pids(proc.pid, segdir):
            os.kill(pid, signal.SIGKILL)
        assert proc.wait(timeout=300) != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not list((segdir / "final").glob("keep/step-*.pt"))
    snakemake(copy, target)
    log = (copy / "scaling-study" / "logs" / "wsd" / "text_image" / t.traj_id / f"to-{end:08d}.log").read_text()
    assert "resuming from" in log
    assert (copy / target).is_file()
    # the point equals the one the uninterrupted segment wrote (same weights bit for bit)
    import torch

    a = torch.load(copy / target, map_location="cpu", weights_only=False)["model"]
    b = torch.load(wsd_study / target, map_location="cpu", weights_only=False)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def segment_logs(workdir: Path) -> dict[str, str]:
    logs = workdir / "scaling-study" / "logs" / "wsd" / "text_image"
    return {str(p.relative_to(logs)): p.read_text() for p in sorted(logs.glob("*/*.log"))}


def test_a_byte_identical_data_rebuild_keeps_every_segment_and_branch(wsd_study):
    copy = copy_of(wsd_study, "rebuild")
    out = snakemake(copy, "--forcerun", "data", "fit_text_image").stdout
    assert job_counts(out)["wsd_segment"] == sum(len(t.points) for t in trajectories(copy).values())
    # Snakemake deleted every segment's output (its kept checkpoint) before rerunning it: each one put
    # its checkpoint back from final/ (the same file), none trained a step.
    for name, log in segment_logs(copy).items():
        assert "put back from final/" in log and "step 1/" not in log and "starting from" not in log, (name, log)
    assert "Nothing to be done" in snakemake(copy, "-n", "fit_text_image").stdout


def test_a_segment_whose_kept_checkpoint_is_gone_trains_again_to_the_same_weights(wsd_study):
    import torch

    copy = copy_of(wsd_study, "lostpoint")
    t = max(trajectories(copy).values(), key=lambda t: len(t.points))
    end = t.points[-1]
    target = Path(STUDY, "stable", t.traj_id, f"to-{end:08d}", "final", "keep", f"step-{end:08d}.pt")
    # Damaged on disk: the kept checkpoint and final/'s checkpoint of that step (one file where the
    # study was written, two in this copy); then deleted, as the unreadable checkpoint's message says.
    for path in (copy / target, copy / target.parent.parent / target.name):
        path.write_bytes(b"damaged")
    (copy / target).unlink()
    snakemake(copy, str(target))
    log = segment_logs(copy)[f"{t.traj_id}/to-{end:08d}.log"]
    assert "training again from its start" in log and "starting from" in log
    a = torch.load(copy / target, map_location="cpu", weights_only=False)["model"]
    b = torch.load(wsd_study / target, map_location="cpu", weights_only=False)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert "Nothing to be done" in snakemake(copy, "-n", "fit_text_image").stdout


def test_retrain_true_retrains_every_segment_and_branch_and_the_figures_stay_the_same(wsd_study):
    copy = copy_of(wsd_study, "retrain")
    study = copy / STUDY
    metrics = sorted(study.glob("runs/*/metrics.json")) + sorted(study.glob("stable/*/*/metrics.json"))
    before = {p: p.stat().st_mtime_ns for p in metrics}
    figures = {p: p.read_bytes() for p in sorted((study / "plots").rglob("*.png"))}
    out = snakemake(copy, "fit_text_image", "--config", "retrain=true", "--quiet", "host").stdout  # job blocks
    n_segments = sum(len(t.points) for t in trajectories(copy).values())
    assert job_counts(out)["wsd_segment"] == n_segments and job_counts(out)["wsd_branch"] == len(planned_run_ids(copy))
    assert "retrain=0" not in out
    logs = list(segment_logs(copy).values()) + [
        p.read_text() for p in (copy / "scaling-study" / "logs" / "train" / "text_image").glob("*.log")
    ]
    assert len(logs) == len(metrics)
    assert all("--retrain: training the finished run again" in log and "restored" not in log for log in logs)
    assert all(p.stat().st_mtime_ns > before[p] for p in metrics)  # trained again, every one
    assert figures and {p: p.read_bytes() for p in figures} == figures  # bit-identical
    assert "Nothing to be done" in snakemake(copy, "-n", "fit_text_image").stdout


@pytest.mark.parametrize(
    "train, setting",
    [({"schedule": "cosine"}, "train.schedule"), ({"cooldown_fraction": 0.3}, "train.cooldown_fraction")],
)
def test_settings_a_finished_wsd_study_cannot_reuse_are_refused_before_anything_trains(wsd_study, train, setting):
    copy = copy_of(wsd_study, "refuse-" + setting.split(".")[1])
    before = sorted(p.relative_to(copy) for p in (copy / "scaling-study").rglob("*"))
    result = snakemake(copy, "fit_text_image", "--config", "train=" + json.dumps({**WSD_TRAIN, **train}), check=False)
    assert result.returncode != 0
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"config {setting} is ") and "--config study_dir=" in last, result.stdout[-2000:]
    assert not any(f"{kind} {rule}" in result.stdout for kind in ("rule", "Rule:") for rule in ("wsd_segment", "train"))
    assert sorted(p.relative_to(copy) for p in (copy / "scaling-study").rglob("*")) == before


def test_a_deleted_plan_or_runs_table_is_made_again_and_nothing_retrains(wsd_study):
    copy = copy_of(wsd_study, "records")
    for name in ("plan.yaml", "runs.csv"):
        (copy / STUDY / name).unlink()
    out = snakemake(copy, "fit_text_image").stdout
    assert (copy / STUDY / "plan.yaml").is_file() and (copy / STUDY / "runs.csv").is_file()
    assert {"plan", "collect"} <= set(job_counts(out)) and not {"wsd_segment", "wsd_branch"} & set(job_counts(out))
    assert (copy / STUDY / "runs.csv").read_text() == (wsd_study / STUDY / "runs.csv").read_text()
    assert "Nothing to be done" in snakemake(copy, "-n", "fit_text_image").stdout


def test_agreement_compares_with_another_study(wsd_study):
    copy = copy_of(wsd_study, "agree")
    shutil.copytree(copy / "scaling-study", copy / "other-study")  # stands in for the cosine study
    out = snakemake(copy, "agreement_text_image", "--config", "compare_with=other-study").stdout
    assert set(job_counts(out)) == {"agreement", "agreement_text_image"}  # nothing retrained
    md = (copy / STUDY / "agreement" / "e2e.md").read_text()
    n = len(planned_run_ids(copy))
    assert "# cosine vs wsd" in md and "+0.00%" in md and f"{n} of {n} within 1%" in md
    assert "as wsd trajectories with branches" in md


def test_agreement_needs_a_cosine_study(tmp_path):
    workdir = make_workdir(tmp_path / "agree", {"train": WSD_TRAIN})
    out = snakemake(workdir, "-n", "agreement_text_image", check=False).stdout
    assert "compare_with" in out


def test_lint_of_the_wsd_rules_is_clean_but_for_software_deployment(tmp_path):
    workdir = make_workdir(tmp_path / "lint", {"train": WSD_TRAIN})
    out = snakemake(workdir, "--lint", check=False).stdout
    findings = [line.strip() for line in out.splitlines() if line.strip().startswith("* ")]
    assert findings and "Lints for rule wsd_segment" in out
    assert [f for f in findings if "conda environment or container" not in f] == []
