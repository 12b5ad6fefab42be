"""The tiny study on shards the test writes itself, through profiles/aurora on the local scheduler."""

from __future__ import annotations

import json
import re

import pytest
from workflow.wfhelpers import make_workdir, planned_run_ids, snakemake

from .test_cluster import CLUSTER as SETUP
from .test_cluster import PBS_ARGS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# A fixed walltime: this test is about the shards, not about walltimes from the plan.
CLUSTER = {"account": "prismtest", "queue": "debug", "filesystems": "flare:home", "walltime": "00:10:00", "nodes": 1,
           "setup": SETUP["setup"]}  # fmt: skip


def test_study_on_own_shards_through_the_cluster_profile(scheduler, tmp_path_factory, shape_shards):
    root = tmp_path_factory.mktemp("pbs-shards")
    shards = root / "shards"
    shape_shards(shards, 2000, per_shard=500)
    workdir = make_workdir(root / "study", {"cluster": CLUSTER, "data": {"shards": {"text_image": str(shards)}}})
    client_env = {k: v for k, v in scheduler.items() if k != "folder"}
    out = snakemake(workdir, *PBS_ARGS, "fit_text_image", timeout=1500, extra_env=client_env).stdout
    ids = re.findall(r"Submitted job \d+ with external jobid '([^']+)'", out)
    speeds = list((workdir / "scaling-study" / "calibration").glob("*.speed.json"))
    assert len(ids) == len(planned_run_ids(workdir)) + len(speeds) > len(speeds)  # training and timing jobs: qsub
    assert "localrule data" in out and "prism data index" in out  # the index runs where Snakemake runs
    study = workdir / "scaling-study"
    assert json.loads((study / "data" / "text_image" / "manifest.json").read_text())["shards_dir"] == str(shards)
    assert (study / "text_image" / "fit" / "e2e.json").is_file()
