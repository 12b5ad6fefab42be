"""Finished runs through the workflow: a byte-identical data rebuild retrains nothing; --forcerun retrains."""

from __future__ import annotations

import shutil

import pytest

from .wfhelpers import planned_run_ids, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def _copy(tiny_study, suffix: str):
    workdir = tiny_study.workdir
    copy = workdir.parent / (workdir.name + suffix)
    shutil.copytree(workdir, copy, symlinks=True)
    return copy


def test_a_byte_identical_data_rebuild_retrains_nothing_and_forcerun_train_retrains(tiny_study):
    copy = _copy(tiny_study, "-rebuild")
    runs = copy / "scaling-study" / "text_image" / "runs"
    logs = copy / "scaling-study" / "logs" / "train" / "text_image"
    ids = sorted(planned_run_ids(copy))
    perf = {run_id: (runs / run_id / "perf.jsonl").read_bytes() for run_id in ids}
    snakemake(copy, "--forcerun", "data", "fit_text_image")
    for run_id in ids:  # Snakemake reran every train job; each one restored its record
        log = (logs / f"{run_id}.log").read_text()
        assert "restored" in log and "step 1/" not in log, log
        # Put back before the job body was launched: the body, which would find the run finished, never ran.
        assert "the run is finished, nothing to do" not in log, log
        assert (runs / run_id / "perf.jsonl").read_bytes() == perf[run_id]
        assert (runs / run_id / "metrics.json").is_file()
    victim = ids[0]
    forced = f"scaling-study/text_image/runs/{victim}/metrics.json"
    # `--quiet host`: the job blocks (the profile leaves them out), whose resources show retrain=1
    out = snakemake(copy, "--forcerun", forced, "fit_text_image", "--quiet", "host").stdout
    assert "retrain=1" in out
    log = (logs / f"{victim}.log").read_text()
    assert "--retrain: training the finished run again" in log and "step 1/" in log


def test_retrain_true_retrains_every_cosine_run_and_the_figures_stay_the_same(tiny_study):
    copy = _copy(tiny_study, "-retrain")
    study = copy / "scaling-study" / "text_image"
    ids = sorted(planned_run_ids(copy))
    before = {run_id: (study / "runs" / run_id / "metrics.json").stat().st_mtime_ns for run_id in ids}
    figures = {p: p.read_bytes() for p in sorted((study / "plots").rglob("*.png"))}
    out = snakemake(copy, "fit_text_image", "--config", "retrain=true", "--quiet", "host").stdout  # job blocks
    assert "retrain=1" in out and "retrain=0" not in out
    for run_id in ids:
        log = (copy / "scaling-study" / "logs" / "train" / "text_image" / f"{run_id}.log").read_text()
        assert "--retrain: training the finished run again" in log and " steps x " in log, log
        assert (study / "runs" / run_id / "metrics.json").stat().st_mtime_ns > before[run_id]
    assert figures and {p: p.read_bytes() for p in figures} == figures
    assert "Nothing to be done" in snakemake(copy, "-n", "fit_text_image").stdout
