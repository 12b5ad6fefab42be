"""Operator faults on a finished tiny wsd study: each ends with the study as an undisturbed run leaves
it, or with a refusal in one line before anything is deleted or trained (docs/runs.md, "Faults tried").

Every test changes its own copy of the session's `wsd_study`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .wfhelpers import STUDY, TINY_BUDGETS, copy_of, job_counts, snakemake, trajectories

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def study_files(workdir: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file of the study folder: what a refusal must leave as it was."""
    root = workdir / "scaling-study"
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def ran(output: str) -> set[str]:
    """The rules of the jobs a Snakemake call ran (or would run)."""
    return set(job_counts(output))


def test_a_budget_removed_so_that_nothing_can_be_fitted_is_refused_and_the_fit_is_kept(wsd_study):
    copy = copy_of(wsd_study, "onebudget")
    before = study_files(copy)
    result = snakemake(copy, "fit_text_image", "--config", f"budgets=[{TINY_BUDGETS[-1]}]", check=False)
    assert result.returncode != 0
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"config budgets: the plan of text_image has 1 budget(s) ({TINY_BUDGETS[-1]}); ")
    assert "the fit needs at least 2" in last and "kept" in last, result.stdout[-2000:]
    assert not ran(result.stdout)
    assert study_files(copy) == before  # nothing deleted, nothing trained, not even the runs table rewritten
    assert "Nothing to be done" in snakemake(copy, "-n", "fit_text_image").stdout


def test_a_deleted_figure_is_made_again_alone_bit_identical_and_the_report_has_every_figure(wsd_study):
    copy = copy_of(wsd_study, "figure")
    plots = copy / STUDY / "plots" / "e2e"
    before = {p.name: p.read_bytes() for p in plots.iterdir()}
    assert {"isoflop_curves.png", "scaling_laws.png", "approach3_fit.png", "training_curves.png"} < set(before)
    (plots / "scaling_laws.png").unlink()
    out = snakemake(copy, "fit_text_image").stdout
    assert ran(out) == {"plot", "fit_text_image"}
    assert {p.name: p.read_bytes() for p in plots.iterdir()} == before
    snakemake(copy, "--report", "report.html", "fit_text_image")
    html = (copy / "report.html").read_text(errors="replace")
    assert all(name in html for name in before if name.endswith(".png"))
    # A figure missing when the report is made is named, not left out.
    (plots / "approach3_fit.png").unlink()
    result = snakemake(copy, "--report", "report2.html", "fit_text_image", check=False)
    assert result.returncode != 0 and "approach3_fit.png" in result.stdout.strip().splitlines()[-1]


def test_a_deleted_point_file_is_said_in_one_line_and_put_back_without_training_when_named(wsd_study):
    copy = copy_of(wsd_study, "point")
    t = max(trajectories(copy).values(), key=lambda t: len(t.points))
    first = t.points[0]  # a branch and the next segment start from it, both finished
    point = Path(STUDY, "stable", t.traj_id, f"to-{first:08d}", "final", "keep", f"step-{first:08d}.pt")
    (copy / point).unlink()
    out = snakemake(copy, "-n", "fit_text_image").stdout
    assert "Nothing to be done" in out
    assert f"{point} is gone: the runs after it are finished, so nothing needs it now; `snakemake {point}`" in out
    out = snakemake(copy, str(point)).stdout
    assert ran(out) == {"wsd_segment"}
    log = (copy / "scaling-study" / "logs" / "wsd" / "text_image" / t.traj_id / f"to-{first:08d}.log").read_text()
    assert "put back from final/" in log and "step 1/" not in log
    assert (copy / point).read_bytes() == (wsd_study / point).read_bytes()
    out = snakemake(copy, "-n", "fit_text_image").stdout
    assert "Nothing to be done" in out and "is gone" not in out
