"""RunMetrics: the metrics.json record train writes and collect reads."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from prism.core.run_metrics import RunMetrics

NAMES = dict(
    run_id="30k-BASE-e2e-C1e12", family="text_image", backbone="30k", variant="BASE", regime="e2e", budget=1e12
)


def test_round_trip_through_json_text():
    m = RunMetrics(
        status="ok", loss=1.25, loss_se=0.01, epochs=2.5, warnings=["loss spike at step 40"], steps=100, **NAMES
    )
    back = RunMetrics.from_json(json.loads(json.dumps(m.to_json())))
    assert back == m


def test_ok_runs_have_no_failure_keys_and_collapsed_ones_do():
    assert "reason" not in RunMetrics(status="ok", **NAMES).to_json()
    data = RunMetrics(
        status="collapsed", reason="non-finite training loss (nan)", step=30, initial_eval_loss=math.nan, **NAMES
    ).to_json()
    assert data["reason"].startswith("non-finite") and data["step"] == 30
    assert data["initial_eval_loss"] == "nan"  # JSON has no NaN
    assert math.isnan(RunMetrics.from_json(data).initial_eval_loss)


def test_an_older_metrics_file_reads_with_loss_from_final_eval_loss():
    old = {"status": "ok", **NAMES, "final_eval_loss": 1.5, "steps": 10, "a_key_from_elsewhere": 1}
    m = RunMetrics.from_json(old)
    assert m.loss == 1.5 and m.loss_se is None and m.warnings == [] and m.epochs is None


def test_reading_it_needs_no_torch():
    code = "import sys, prism.core.run_metrics; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
