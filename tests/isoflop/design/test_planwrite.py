"""`prism isoflop plan`: its text, its files, and when it stops (prism/isoflop/design/planwrite.py)."""

from __future__ import annotations

import json
import re

import yaml

from ..conftest import plan_cli, write_calibration


def test_cli_writes_plan_yaml_and_csv(ladder, tmp_path, capsys):
    out = tmp_path / "text_image" / "plan.yaml"
    rc = plan_cli(ladder, "1e12,1e13", scaling_study_dir=tmp_path, simulations=50, allow_undetermined=True, out=out)
    assert rc == 0
    plan = yaml.safe_load(out.read_text())
    assert {"family", "regime", "budgets", "runs", "dropped", "forecast"} <= set(plan)
    assert set(plan["runs"][0]) >= {
        "run_id",
        "family",
        "backbone",
        "variant",
        "regime",
        "budget",
        "params",
        "params_total",
        "flops_per_sample",
        "global_batch",
        "samples",
        "steps",
        "tokens",
        "hours_here",
        "node_hours",
    }
    lines = (out.with_suffix(".csv")).read_text().splitlines()
    assert lines[0].startswith("run_id,") and len(lines) == len(plan["runs"]) + 1
    assert "Identifiability forecast" in capsys.readouterr().out


def test_dry_run_writes_nothing_and_forecasts_small_n_spread(tmp_path, capsys):
    """One backbone, the projector ladder only: N moves by < 0.1 decade; the forecast says so."""
    cal = tmp_path / "cal"
    for variant, n in {"BASE": 1.00e5, "W2X": 1.05e5, "W4X": 1.15e5, "D2X": 1.08e5, "D4X": 1.12e5}.items():
        write_calibration(cal, "text_image", "120k", variant, "e2e", n)
    out = tmp_path / "plan.yaml"
    rc = plan_cli(
        cal,
        "1e12,3e12",
        scaling_study_dir=tmp_path,
        dry_run=True,
        out=out,
        prior_k=0.1,
        window=1.0,
        simulations=100,
    )
    text = capsys.readouterr().out
    assert rc == 0 and not out.exists() and not out.with_suffix(".csv").exists()
    assert "UNDETERMINED" in text and "N spread 0.06 decades at 1e12" in text and "add a larger backbone" in text
    assert "120k-BASE-e2e-C1e12" in text


def _determining_prior(study):
    """prior.json of a previous round whose surface makes the ladder's 1e11-1e13 grid DETERMINED."""
    from dataclasses import asdict

    from prism.isoflop.design.forecast import prior_surface

    study.mkdir(exist_ok=True)
    fit = {
        "diagnostics": {"identifiable": True},
        "approach3": {"converged": True, "a": 0.5, "k": 0.3, **asdict(prior_surface(0.5, 0.3))},
    }
    (study / "prior.json").write_text(json.dumps(fit))


def _plan_cli(ladder, tmp_path, budgets, *extra):
    out = tmp_path / "study" / "plan.yaml"
    rc = plan_cli(ladder, budgets, *extra, scaling_study_dir=tmp_path / "study", simulations=50, noise=0.012, out=out)
    return rc, out


def test_an_undetermined_plan_stops_with_one_line_and_writes_nothing(ladder, tmp_path, capsys):
    """Two budgets never determine an exponent: the plan fails, its last line says why and the fix."""
    rc, out = _plan_cli(ladder, tmp_path, "1e12,1e13")
    captured = capsys.readouterr()
    assert rc != 0 and not out.exists() and not out.with_suffix(".csv").exists()
    assert "Identifiability forecast" in captured.out  # the whole plan is still in the log
    line = captured.err.strip()
    assert "\n" not in line and "forecast UNDETERMINED" in line and "add budgets" in line
    assert "plan.allow_undetermined: true" in line
    # A pilot goes on: the plan is written and its last line is the summary.
    rc, out = _plan_cli(ladder, tmp_path, "1e12,1e13", "--allow-undetermined")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert rc == 0 and out.exists()
    assert re.fullmatch(
        r"plan text_image: \d+ runs on 2 of 2 budget\(s\), \S+ FLOPs, time in runs here [0-9.]+ (s|min|h) "
        r"\(one after another\), "
        r"forecast UNDETERMINED .*; trained anyway \(plan.allow_undetermined\)",
        last,
    )


def test_a_refused_budget_stops_the_plan_naming_the_budget_and_the_fix(ladder, tmp_path, capsys):
    _determining_prior(tmp_path / "study")
    rc, out = _plan_cli(ladder, tmp_path, "1e11,1e12,1e13")
    assert rc == 0 and "forecast DETERMINED" in capsys.readouterr().out.strip().splitlines()[-1]
    # 1e20 wants an N far above the ladder's largest: refused, and the plan with it.
    out.unlink()
    rc, out = _plan_cli(ladder, tmp_path, "1e11,1e12,1e13,1e20")
    line = capsys.readouterr().err.strip()
    assert rc != 0 and not out.exists()
    assert "\n" not in line and "REFUSED budget 1e20" in line and "add a larger backbone" in line


def test_a_dry_run_says_it_would_stop_and_exits_0(ladder, tmp_path, capsys):
    rc, out = _plan_cli(ladder, tmp_path, "1e12,1e13", "--dry-run")
    text = capsys.readouterr().out
    assert rc == 0 and not out.exists()
    assert "the plan job would stop: plan text_image stops the study: forecast UNDETERMINED" in text
