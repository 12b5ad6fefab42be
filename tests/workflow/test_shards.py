"""The tiny study on shards the test writes itself (webdataset's TarWriter, generated shapes), not on a build."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from prism.core.fingerprint import file_digest
from prism.train.rundir.runfiles import resolved_of

from .wfhelpers import job_counts, make_workdir, planned_run_ids, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


@dataclass
class ShardStudy:
    workdir: Path
    shards: Path
    fit: str


@pytest.fixture(scope="module")
def shard_study(tmp_path_factory, shape_shards) -> ShardStudy:
    root = tmp_path_factory.mktemp("own_shards")
    shards = root / "shards"
    shape_shards(shards, 2000, per_shard=500)
    workdir = make_workdir(root / "study", {"data": {"shards": {"text_image": str(shards)}}})
    # `--quiet=host`: the job blocks with their shell commands (the profile leaves them out).
    fit = snakemake(workdir, "fit_text_image", "--quiet=host", timeout=1800).stdout
    return ShardStudy(workdir, shards, fit)


def test_study_trains_and_fits_on_indexed_shards(shard_study):
    study = shard_study.workdir / "scaling-study"
    data = study / "data" / "text_image"
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["kind"] == "index" and manifest["shards_dir"] == str(shard_study.shards)
    assert not list(data.glob("*.tar"))  # the shards were read where they lie
    assert "prism data index" in shard_study.fit
    assert "from " + str(shard_study.shards) in (study / "logs" / "data" / "text_image.log").read_text()
    assert (study / "text_image" / "fit" / "e2e.json").is_file()
    digest = file_digest(data / "manifest.json")
    plan = yaml.safe_load((study / "text_image" / "plan.yaml").read_text())
    train_samples = manifest["splits"]["train"]["samples"]
    for row in plan["runs"]:
        # The plan's epochs come from the index's training split.
        assert row["epochs"] == pytest.approx(row["tokens"] / (train_samples * row["tokens_per_sample"]), rel=1e-3)
        run = resolved_of(study / "text_image" / "runs" / row["run_id"] / "config.yaml")
        assert run["inputs"]["data_manifest"] == digest  # which index the run trained on
    rows = (study / "text_image" / "runs.csv").read_text().splitlines()
    assert len(rows) == 1 + len(planned_run_ids(shard_study.workdir)) and ",stale," not in "".join(rows)


def test_a_new_shard_reindexes_and_retrains(shard_study, shape_shards):
    assert "Nothing to be done" in snakemake(shard_study.workdir, "fit_text_image").stdout
    shape_shards(shard_study.shards, 500, per_shard=500, start=2000)
    dry = snakemake(shard_study.workdir, "-n", "fit_text_image").stdout
    counts = job_counts(dry)
    assert counts.get("data") == 1 and counts.get("train") == len(planned_run_ids(shard_study.workdir)), dry[-3000:]


def test_the_data_job_runs_first_and_says_what_broken_shards_lost(tmp_path, shape_shards):
    """An empty shards folder stops the study before any calibration; broken shards are said on the terminal."""
    shards = tmp_path / "shards"
    shards.mkdir()
    workdir = make_workdir(tmp_path / "study", {"data": {"shards": {"text_image": str(shards)}}})
    out = snakemake(workdir, "plan_text_image", check=False)
    assert out.returncode != 0 and f"{shards} holds no .tar shards" in out.stdout
    assert not list((workdir / "scaling-study").glob("calibration/*.json")), out.stdout[-3000:]
    shape_shards(shards, 300, per_shard=100)
    (shards / "00001.tar").write_bytes((shards / "00001.tar").read_bytes()[:700])
    (shards / "00002.tar").write_bytes(b"")
    setting = 'data={"max_bad_fraction": 0.5}'
    done = snakemake(workdir, "scaling-study/data/text_image", "--config", setting).stdout
    for name in ("00001.tar", "00002.tar"):
        assert f"warning: shard {shards / name} is cut short" in done, done[-3000:]
