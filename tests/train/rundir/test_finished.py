"""What a finished run or study cannot reuse, found from its run directories before anything trains."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from prism.core.errors import PrismError
from prism.train import lr_schedule
from prism.train.config import RunConfig
from prism.train.identity import run_identity
from prism.train.rundir.finished import check_identity, keep, record_path, restore, study_conflict
from prism.train.rundir.resume import changed_identity


def run_dir(study: Path, run_id: str, schedule: str, cooldown: float, finished: bool = True) -> Path:
    out = study / "text_image" / "runs" / run_id
    out.mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump({"schedule": schedule, "cooldown_fraction": cooldown}))
    if finished:
        (out / "metrics.json").write_text(json.dumps({"status": "ok"}))
    return out


def test_a_finished_study_refuses_another_schedule_or_wsd_cooldown_naming_setting_run_and_fix(tmp_path):
    run = run_dir(tmp_path, "30k-BASE-e2e-C1e10", "wsd", 0.2)
    assert study_conflict(tmp_path, ["text_image"], "wsd", 0.2) is None
    line = study_conflict(tmp_path, ["text_image"], "cosine", 0.2)
    assert line.startswith("config train.schedule is 'cosine'") and str(run) in line and "'wsd' run" in line
    assert "--config study_dir=" in line and "\n" not in line
    line = study_conflict(tmp_path, ["text_image"], "wsd", 0.3)
    assert line.startswith("config train.cooldown_fraction is 0.3") and "finished with 0.2" in line


def test_unfinished_runs_and_the_cooldown_of_cosine_runs_constrain_nothing(tmp_path):
    run_dir(tmp_path, "30k-BASE-e2e-C1e10", "cosine", 0.2)
    run_dir(tmp_path, "60k-BASE-e2e-C1e10", "wsd", 0.2, finished=False)  # started, never finished
    assert study_conflict(tmp_path, ["text_image"], "cosine", 0.5) is None
    assert study_conflict(tmp_path / "elsewhere", ["text_image"], "wsd", 0.2) is None


# --- a finished run under another identity (a library default changed since) -----------------------


def finished_run(tmp_path: Path):
    """A run directory as `prism train` leaves a finished run: config.yaml with its identity, final/finished.json."""
    out = tmp_path / "run"
    config = RunConfig(
        family="text_image", backbone="n16e3", variant="BASE", regime="e2e", budget=1.5e11, data="d", out=str(out)
    )
    (out / "final").mkdir(parents=True)
    config.to_yaml(out / "config.yaml", resolved={"identity": run_identity(config)})
    inputs = {"data_manifest": "m", "calibration": "c"}
    metrics = {"status": "ok", "run_id": config.run_id, "steps": 30}
    keep(out, config, inputs, metrics)
    return config, inputs, metrics


def test_a_finished_run_under_another_lr_rule_is_trained_again_not_restored(tmp_path, monkeypatch, capsys):
    config, inputs, metrics = finished_run(tmp_path)
    assert restore(config.out_dir, config, inputs) == metrics  # unchanged: restored
    (config.out_dir / "metrics.json").unlink()
    monkeypatch.setattr(lr_schedule, "BASE_LR", 4e-3)
    assert restore(config.out_dir, config, inputs) is None
    said = capsys.readouterr().err
    assert "finished under other values (lr: 0.016 -> 0.02" in said and "training again" in said
    assert changed_identity(config, config.out_dir) == [f"identity (lr: 0.016 -> {run_identity(config)['lr']!r})"]


def test_a_finished_run_under_another_default_is_refused_naming_retrain(tmp_path, monkeypatch):
    config, inputs, metrics = finished_run(tmp_path)
    restore(config.out_dir, config, inputs)  # metrics.json back
    check_identity(config.out_dir, config)  # the same values: nothing to say
    monkeypatch.setattr(lr_schedule, "WARMUP_FRACTION", 0.1)
    with pytest.raises(PrismError, match=r"warmup_fraction: 0.05 -> 0.1.*--retrain"):
        check_identity(config.out_dir, config)


def test_a_cosmetic_change_restores_the_finished_run(tmp_path):
    config, inputs, metrics = finished_run(tmp_path)
    moved = dataclasses.replace(config, threads=3, device="cpu", log_every=1, trackers="tensorboard")
    assert restore(moved.out_dir, moved, inputs) == metrics
    assert changed_identity(moved, moved.out_dir) == []


def test_a_record_from_before_identities_is_restored_and_takes_this_runs(tmp_path):
    config, inputs, metrics = finished_run(tmp_path)
    record = json.loads(record_path(config.out_dir).read_text())
    del record["identity"]
    record_path(config.out_dir).write_text(json.dumps(record))
    assert restore(config.out_dir, config, inputs) == metrics
    assert json.loads(record_path(config.out_dir).read_text())["identity"] == run_identity(config)
