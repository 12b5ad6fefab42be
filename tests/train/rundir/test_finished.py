"""What a finished study cannot reuse, found from its run directories before anything trains."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from prism.train.rundir.finished import study_conflict


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
