"""Branching runs: a wsd cooldown started from another run's kept checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prism.train.rundir.runfiles import read_jsonl
from prism.train.timing import PHASES

pytestmark = pytest.mark.slow

# Explicit warm-up: the default (5% of the steps) differs between runs of different lengths.
WSD = ["--schedule", "wsd", "--warmup", "5", "--log-every", "1", "--eval-every", "1000", "--checkpoint-every", "1000"]


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def test_a_cooldown_branch_continues_exactly_as_an_uninterrupted_wsd_run(train, tmp_path):
    """60 steps of wsd cool down from step 48; a 100-step trajectory keeps its checkpoint there."""
    whole, stable, branch = tmp_path / "whole", tmp_path / "stable", tmp_path / "branch"
    assert train(whole, *WSD, "--max-steps", "60").returncode == 0
    res = train(stable, *WSD, "--max-steps", "100", "--checkpoint-at", "48")
    assert res.returncode == 0, res.stderr
    assert (stable / "final" / "keep" / "step-00000048.pt").is_file()
    res = train(branch, *WSD, "--max-steps", "60", "--init-from", str(stable), "--init-step", "48")
    assert res.returncode == 0, res.stderr
    a, b = metrics(whole), metrics(branch)
    assert b["started_from"] == f"{stable}@48" and b["resumed_from"] is None
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-6) and b["loss_se"] == pytest.approx(a["loss_se"], rel=1e-6)
    assert (b["steps"], b["flops"], b["samples"]) == (a["steps"], a["flops"], a["samples"])
    # Each job's time record counts what it trained itself: the branch only its 12 cooldown steps.
    ta, tb = a["time"], b["time"]
    assert ta["steps"] == 60 and ta["trained_flops"] == pytest.approx(a["flops"])
    assert tb["steps"] == 12 and tb["trained_flops"] == pytest.approx(a["flops"] * 12 / 60)
    for t in (ta, tb):
        assert t["step_s"] > 0 and t["setup_s"] > 0 and t["eval_s"] > 0 and t["ended_at"] > t["started_at"]
        assert sum(t[f"{phase}_s"] for phase in PHASES) + t["other_s"] == pytest.approx(t["wall_s"])
    whole_rows, branch_rows = read_jsonl(whole / "perf.jsonl"), read_jsonl(branch / "perf.jsonl")
    assert [r["step"] for r in branch_rows] == list(range(1, 61))  # the trajectory's rows, then its own
    for mine, theirs in zip(branch_rows, whole_rows):
        assert (mine["loss"], mine["lr"]) == (pytest.approx(theirs["loss"], rel=1e-6), pytest.approx(theirs["lr"]))


def test_init_from_refuses_another_trajectory(train, tmp_path):
    stable = tmp_path / "stable"
    assert train(stable, *WSD, "--max-steps", "20", "--checkpoint-at", "10").returncode == 0
    res = train(
        tmp_path / "other", *WSD, "--max-steps", "30", "--seed", "1", "--init-from", str(stable), "--init-step", "10"
    )
    assert res.returncode != 0 and "another trajectory" in res.stderr and "seed" in res.stderr
    res = train(tmp_path / "missing", *WSD, "--max-steps", "30", "--init-from", str(stable), "--init-step", "7")
    assert res.returncode != 0 and "no checkpoint at step 7" in res.stderr
