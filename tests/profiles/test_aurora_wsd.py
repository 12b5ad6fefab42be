"""A wsd study through profiles/aurora: every stable segment and every branch is one scheduler job.

Its data are 2,000 samples of shards the test writes (data.shards: indexed, not built), enough for the
tiny study's runs, whose jobs each load the split they train on."""

from __future__ import annotations

import re

import pytest
from workflow.wfhelpers import make_workdir, planned_run_ids, snakemake

from .test_aurora import CLUSTER, PBS_ARGS, status_records, submitted

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_segments_and_branches_are_scheduler_jobs(scheduler, tmp_path_factory, shape_shards):
    root = tmp_path_factory.mktemp("pbs-wsd")
    shape_shards(root / "shards", 2000, per_shard=500)
    workdir = make_workdir(
        root / "study",
        {
            "cluster": CLUSTER,
            "train": {"device": "cpu", "threads": 1, "schedule": "wsd"},
            "data": {"shards": {"text_image": str(root / "shards")}},
        },
    )
    client_env = {k: v for k, v in scheduler.items() if k != "folder"}
    out = snakemake(workdir, *PBS_ARGS, "collect_text_image", extra_env=client_env, timeout=1800).stdout
    ids = submitted(out)
    runs = planned_run_ids(workdir)
    segments = set(re.findall(r"stable/[^/\s]+/to-\d{8}/final/keep/step-\d{8}\.pt", out))
    speeds = list((workdir / "scaling-study" / "calibration").glob("*.speed.json"))
    # one job per branch (run), one per segment and one per size's timed steps; nothing else leaves the login node
    assert len(ids) == len(runs) + len(segments) + len(speeds) and segments and speeds
    assert "localrule wsd_" not in out and "localcheckpoint plan" in out
    records = status_records(workdir)
    assert {i: records.get(i) for i in ids} == {i: "0" for i in ids}
    for run_id in runs:
        assert (workdir / "scaling-study" / "text_image" / "runs" / run_id / "metrics.json").exists()
