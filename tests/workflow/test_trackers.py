"""A tiny wsd study with `train.trackers`: TensorBoard and W&B hold every run's curve, one group per study."""

from __future__ import annotations

import json

import pytest

from .wfhelpers import make_workdir, planned_run_ids, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

TRAIN = {"device": "cpu", "threads": 1, "schedule": "wsd", "trackers": ["tensorboard", "wandb"]}


@pytest.fixture(scope="module")
def tracked_study(tmp_path_factory):
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    workdir = make_workdir(tmp_path_factory.mktemp("tracked") / "study", {"train": TRAIN})
    snakemake(workdir, "collect_text_image", timeout=1800)
    return workdir


def test_every_run_logs_its_whole_curve_once(tracked_study, tensorboard_scalars, wandb_runs):
    study = tracked_study / "scaling-study"
    group = "scaling-study-text_image-e2e"
    root = study / "tracking" / "tensorboard" / group
    names = sorted(p.name for p in root.iterdir())
    run_ids = sorted(planned_run_ids(tracked_study))
    trajectories = sorted({r.rsplit("-C", 1)[0] + "-B8" for r in run_ids})
    assert names == sorted(run_ids + trajectories)  # one TensorBoard run per cooldown branch and per trajectory
    wb = {}
    for run in wandb_runs(study / "tracking"):
        assert (run["group"], run["project"]) == (group, "prism")
        wb.setdefault(run["name"], []).extend(run["history"])
    assert sorted(wb) == names
    for run_id in run_ids:
        rundir = study / "text_image" / "runs" / run_id
        started = json.loads((rundir / "metrics.json").read_text())["started_from"]
        start = int(started.rsplit("@", 1)[1])
        perf = [json.loads(line) for line in (rundir / "perf.jsonl").read_text().splitlines()]
        traj = tensorboard_scalars(root / (run_id.rsplit("-C", 1)[0] + "-B8"))["train/loss"]
        own = tensorboard_scalars(root / run_id)["train/loss"]
        assert min(s for s, _ in own) > start  # the branch continues its trajectory after the branch point
        # the trajectory up to the branch point, then the branch: the run's whole perf history, each step once
        curve = [(s, v) for s, v in traj if s <= start] + own
        assert [s for s, _ in curve] == [r["step"] for r in perf]
        assert [v for _, v in curve] == pytest.approx([r["loss"] for r in perf], rel=1e-6)
        wb_own = [(row["_step"], row["train/loss"]) for row in wb[run_id] if "train/loss" in row]
        assert [s for s, _ in wb_own] == [s for s, _ in own]


def test_turning_trackers_off_retrains_nothing(tracked_study):
    out = snakemake(tracked_study, "-n", "collect_text_image", "--config", 'train={"trackers": []}').stdout
    assert "wsd_branch" not in out and "wsd_segment" not in out, out[-3000:]
