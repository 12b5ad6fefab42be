"""`prism cluster check`: each finding in one line, a failing site named before anything is submitted."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import yaml

from prism.cli import main as prism
from prism.launch.sitecheck import check_batch_ranks, check_scheduler, check_shards, load_study_config, merged

REPO = Path(__file__).resolve().parents[2]


def write_shards(folder, n=2):
    folder.mkdir(parents=True)
    for i in range(n):
        with tarfile.open(folder / f"{i:05d}.tar", "w") as tar:
            info = tarfile.TarInfo("0.txt")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))


def site_config(tmp_path, **sections):
    config = yaml.safe_load((REPO / "config" / "aurora.yaml").read_text())
    for key, value in sections.items():
        config[key] = merged(config.get(key) or {}, value)
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_shipped_aurora_config_names_what_to_fill_in():
    config = load_study_config(REPO / "config" / "aurora.yaml", REPO / "config" / "config.yaml")
    assert not check_scheduler(config).ok and "cluster.account" in check_scheduler(config).detail
    (shards,) = check_shards(config)
    assert not shards.ok and "data.shards.text_image is the placeholder" in shards.detail
    assert check_batch_ranks(config).ok  # the shipped batch divides among a job's 12 ranks


def test_a_batch_the_ranks_cannot_split_fails_the_check():
    config = {"train": {"launcher": "aurora"}, "plan": {"global_batch": 256}, "cluster": {"nodes": 1}}
    found = check_batch_ranks(config)
    assert not found.ok and "256 = 21 x 12 + 4" in found.detail


def test_shards_that_are_missing_empty_or_present(tmp_path):
    write_shards(tmp_path / "good")
    (tmp_path / "empty").mkdir()
    config = {"data": {"shards": {"text_image": str(tmp_path / "good"), "text_ts": str(tmp_path / "empty")}}}
    by_family = {c.name: c for c in check_shards(config)}
    assert by_family["shards text_image"].ok and "2 readable shards" in by_family["shards text_image"].detail
    assert not by_family["shards text_ts"].ok and "no .tar shards" in by_family["shards text_ts"].detail
    config["data"]["shards"]["text_ts"] = str(tmp_path / "nowhere")
    assert "is no folder here" in check_shards(config)[1].detail


@pytest.mark.slow
def test_a_ready_site_passes_with_two_gloo_ranks(tmp_path, monkeypatch, capsys):
    """On this CPU: two real processes initialise gloo and all-reduce, as a job's ranks would."""
    write_shards(tmp_path / "shards")
    path = site_config(
        tmp_path,
        cluster={"account": "myproject", "queue": "debug"},
        data={"shards": {"text_image": str(tmp_path / "shards")}},
        train={"device": "cpu"},
    )
    monkeypatch.chdir(tmp_path)
    default = str(REPO / "config" / "config.yaml")
    assert prism(["cluster", "check", "--configfile", str(path), "--default-config", default]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "ok   collectives: gloo initialised on 2 ranks" in out
    assert "ok   config: valid against" in out

    bad = site_config(tmp_path, cluster={"account": "FILL_IN_PROJECT"}, plan={"global_batch": 256})
    assert prism(["cluster", "check", "--configfile", str(bad), "--default-config", default, "--device", "xpu"]) == 1
    out = capsys.readouterr().out
    assert "FAIL scheduler: cluster.account not filled in" in out
    assert "FAIL batch: plan.global_batch 256 does not divide among the 12 ranks" in out
    assert "FAIL torch: torch" in out and "sees no xpu device" in out and "skip collectives" in out
