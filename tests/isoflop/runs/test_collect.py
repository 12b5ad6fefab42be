"""collect: one row per run directory, whatever state the run is in."""

from __future__ import annotations

import csv
import json
import os
import time

import pytest
import yaml

from prism.cli import main
from prism.core.errors import PrismError
from prism.isoflop.runs.collect import CollectOptions, collect


def make_run(
    root,
    run_id,
    losses,
    status="ok",
    finished=True,
    budget=1e12,
    params=1e5,
    extra_lines=(),
    metrics_text=None,
    inputs=None,
    metrics_extra=None,
):
    """A run directory as prism.train writes it (config.yaml, eval.jsonl, metrics.json)."""
    backbone, variant, regime, _ = run_id.split("-")
    d = root / run_id
    (d / "checkpoints").mkdir(parents=True)
    cfg = {
        "family": "text_image",
        "backbone": backbone,
        "variant": variant,
        "regime": regime,
        "budget": budget,
        "data": "shards",
        "out": str(d),
        "resolved": {"run_id": run_id, "params": params, "params_total": 2 * params, "inputs": inputs or {}},
    }
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    rows = [
        json.dumps(
            {"step": 10 * i, "samples": 320 * i, "tokens": 20480 * i, "flops": 1e10 * i, "loss": v, "run_id": run_id}
        )
        for i, v in enumerate(losses)
    ]
    (d / "eval.jsonl").write_text("\n".join([*rows, *extra_lines]) + "\n")
    if finished:
        metrics = {
            "status": status,
            "run_id": run_id,
            "family": "text_image",
            "backbone": backbone,
            "variant": variant,
            "regime": regime,
            "budget": budget,
            "final_eval_loss": losses[-1] if status == "ok" else None,
            "params": params,
            "params_total": 2 * params,
            "steps": 10 * (len(losses) - 1),
            "samples": 320 * len(losses),
            "tokens": 3.0e6,
            "flops": 0.999 * budget,
        }
        if status == "collapsed":
            metrics.update(reason="loss is nan", step=30)
        metrics.update(metrics_extra or {})
        (d / "metrics.json").write_text(metrics_text if metrics_text is not None else json.dumps(metrics))
    return d


def read(path):
    with open(path, newline="") as fh:
        return {r["run_id"]: r for r in csv.DictReader(fh)}


def test_rows_for_every_state(tmp_path, capsys):
    root = tmp_path / "runs"
    make_run(root, "30k-BASE-e2e-C1e12", [5.0, 3.0, 2.6, 2.5, 2.4, 2.3, 2.2])
    make_run(root, "60k-BASE-e2e-C1e12", [5.0, 4.0], status="collapsed")
    make_run(root, "120k-BASE-e2e-C1e12", [5.0, 4.0], finished=False)
    make_run(root, "250k-BASE-e2e-C1e12", [5.0, 4.0, 3.0], metrics_text="{not json")
    make_run(root, "500k-BASE-e2e-C1e12", [5.0, 3.0, 2.8], extra_lines=['{"step": 40, "loss": "nan"}', "garbage"])
    out = tmp_path / "runs.csv"
    assert "5 runs" in collect(root, out, CollectOptions(eval_window=5))
    rows = read(out)
    ok = rows["30k-BASE-e2e-C1e12"]
    assert ok["status"] == "ok" and ok["n_evals"] == "5"
    assert float(ok["loss"]) == pytest.approx((2.6 + 2.5 + 2.4 + 2.3 + 2.2) / 5)
    assert float(ok["loss_std"]) == pytest.approx(0.158113883, rel=1e-6)
    assert float(ok["budget"]) == 1e12 and float(ok["params"]) == 1e5 and float(ok["params_total"]) == 2e5
    assert float(ok["tokens"]) == 3e6 and float(ok["flops"]) == pytest.approx(0.999e12)
    assert rows["60k-BASE-e2e-C1e12"]["status"] == "collapsed" and rows["60k-BASE-e2e-C1e12"]["loss"] == ""
    assert rows["120k-BASE-e2e-C1e12"]["status"] == "incomplete" and rows["120k-BASE-e2e-C1e12"]["loss"] == ""
    assert rows["250k-BASE-e2e-C1e12"]["status"] == "error"
    bad = rows["500k-BASE-e2e-C1e12"]
    assert bad["status"] == "ok" and bad["n_bad_lines"] == "2" and float(bad["loss"]) == pytest.approx(10.8 / 3)
    err = capsys.readouterr().err
    assert "run 500k-BASE-e2e-C1e12: eval.jsonl line 5" in err and "line 4" in err
    header = next(csv.reader(open(out)))
    assert header[:14] == [
        "run_id",
        "family",
        "backbone",
        "variant",
        "regime",
        "budget",
        "flops",
        "params",
        "params_total",
        "tokens",
        "loss",
        "loss_std",
        "n_evals",
        "status",
    ]


def test_a_finished_run_whose_eval_log_is_gone_keeps_its_loss_from_metrics(tmp_path):
    # The loss is the run's final evaluation, in metrics.json: the eval log only adds loss_std.
    root = tmp_path / "runs"
    d = make_run(root, "30k-BASE-e2e-C1e12", [5.0, 3.0, 2.5], metrics_extra={"loss": 2.45, "loss_se": 0.01})
    (d / "eval.jsonl").unlink()
    make_run(root, "60k-BASE-e2e-C1e12", [5.0, 3.0], metrics_extra={"loss": None})
    (root / "60k-BASE-e2e-C1e12" / "eval.jsonl").unlink()
    collect(root, tmp_path / "runs.csv", CollectOptions(eval_window=5))
    rows = read(tmp_path / "runs.csv")
    row = rows["30k-BASE-e2e-C1e12"]
    assert row["status"] == "ok" and float(row["loss"]) == 2.45 and row["loss_std"] == "" and row["n_evals"] == "0"
    assert "no evaluation in eval.jsonl" in row["note"]
    assert rows["60k-BASE-e2e-C1e12"]["status"] == "error"  # no loss anywhere: nothing to fit


def test_collected_csv_feeds_the_fit_only_ok_runs(tmp_path):
    from prism.isoflop.runs.table import load_runs

    root = tmp_path / "runs"
    make_run(root, "30k-BASE-e2e-C1e12", [3.0, 2.5])
    make_run(root, "60k-BASE-e2e-C1e12", [5.0, 4.0], status="collapsed")
    make_run(root, "120k-BASE-e2e-C1e12", [5.0], finished=False)
    collect(root, tmp_path / "runs.csv")
    loaded = load_runs(tmp_path / "runs.csv", family="text_image", regime="e2e")
    assert [r.run_id for r in loaded.records] == ["30k-BASE-e2e-C1e12"]
    assert loaded.excluded_status == {"collapsed": [3], "incomplete": [4]} or set(loaded.excluded_status) == {
        "collapsed",
        "incomplete",
    }


def test_up_to_date_csv_is_left_untouched_unless_forced(tmp_path, capsys):
    root = tmp_path / "runs"
    make_run(root, "30k-BASE-e2e-C1e12", [3.0, 2.5])
    out = tmp_path / "runs.csv"
    assert main(["isoflop", "collect", "--runs-dir", str(root), "--out", str(out)]) == 0
    past = time.time() - 100
    for f in (root / "30k-BASE-e2e-C1e12").iterdir():
        os.utime(f, (past, past))
    before = out.stat().st_mtime_ns
    assert main(["isoflop", "collect", "--runs-dir", str(root), "--out", str(out)]) == 0
    assert "left untouched" in capsys.readouterr().out and out.stat().st_mtime_ns == before
    # a new run makes it stale even without --force
    make_run(root, "60k-BASE-e2e-C1e12", [3.0, 2.4])
    for f in (root / "60k-BASE-e2e-C1e12").iterdir():
        os.utime(f, (past, past))
    assert main(["isoflop", "collect", "--runs-dir", str(root), "--out", str(out)]) == 0
    assert len(read(out)) == 2
    assert main(["isoflop", "collect", "--runs-dir", str(root), "--out", str(out), "--force"]) == 0
    assert "wrote" in capsys.readouterr().out


def test_bad_arguments(tmp_path):
    with pytest.raises(PrismError, match="no such directory"):
        collect(tmp_path / "nope", tmp_path / "x.csv")
    with pytest.raises(PrismError, match="eval-window must be >= 1"):
        collect(tmp_path, tmp_path / "x.csv", CollectOptions(eval_window=0))


def _study(tmp_path, run_ids):
    """A plan naming `run_ids`, its calibration dir and data dir (manifest), as the workflow lays them out."""
    import hashlib

    cal, data = tmp_path / "calibration", tmp_path / "data"
    cal.mkdir()
    data.mkdir()
    (data / "manifest.json").write_text('{"shards": 1}')
    rows = []
    for rid in run_ids:
        backbone, variant, regime, budget = rid.split("-")
        record = {"family": "text_image", "backbone": backbone, "variant": variant, "regime": regime, "x": 1}
        (cal / f"text_image__{backbone}__{variant}__{regime}.json").write_text(json.dumps(record))
        rows.append(
            {
                "run_id": rid,
                "family": "text_image",
                "backbone": backbone,
                "variant": variant,
                "regime": regime,
                "budget": float(budget[1:]),
                "global_batch": 8,
                "steps": 100,
                "params": 1e5,
                "hours_here": 0.01,
            }
        )
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"calibration_dir": str(cal), "runs": rows}))
    digests = {
        "data_manifest": hashlib.sha256((data / "manifest.json").read_bytes()).hexdigest(),
        "calibration": hashlib.sha256(
            json.dumps(
                {"family": "text_image", "backbone": "30k", "variant": "BASE", "regime": "e2e", "x": 1}, sort_keys=True
            ).encode()
        ).hexdigest(),
    }
    return plan, data, cal, digests


def test_plan_true_collect_lists_unplanned_and_retrained_runs_as_stale(tmp_path):
    from prism.isoflop.runs.table import load_runs

    planned = ["30k-BASE-e2e-C1e12", "30k-BASE-e2e-C2e12", "30k-BASE-e2e-C3e12"]
    plan, data, cal, digests = _study(tmp_path, planned)
    root = tmp_path / "runs"
    make_run(
        root,
        planned[0],
        [3.0, 2.5],
        inputs=digests,
        metrics_extra={
            "loss": 2.45, "loss_se": 0.01, "epochs": 0.5, "warnings": ["loss spike"], "wall_s": 30.0,
            "precision": "bf16",
        },
    )  # fmt: skip
    make_run(root, planned[1], [3.0, 2.6], budget=2e12, inputs={**digests, "data_manifest": "other"})
    make_run(root, "30k-BASE-e2e-C9e12", [3.0, 2.4], budget=9e12, inputs=digests)  # a removed budget
    text = collect(root, tmp_path / "runs.csv", plan=plan, data=data)
    rows = read(tmp_path / "runs.csv")
    assert rows[planned[0]]["status"] == "ok"
    assert (rows[planned[0]]["loss_se"], rows[planned[0]]["epochs"], rows[planned[0]]["warnings"]) == (
        "0.01",
        "0.5",
        "loss spike",
    )
    assert float(rows[planned[0]]["loss"]) == 2.45  # the run's recorded loss at the budget
    assert float(rows[planned[0]]["wall_s"]) == 30.0 and float(rows[planned[0]]["est_wall_s"]) == pytest.approx(36)
    assert rows[planned[0]]["precision"] == "bf16"
    assert rows[planned[1]]["status"] == "stale" and "other data" in rows[planned[1]]["note"]
    assert rows["30k-BASE-e2e-C9e12"]["status"] == "stale" and "not in the plan" in rows["30k-BASE-e2e-C9e12"]["note"]
    assert rows[planned[2]]["status"] == "incomplete" and rows[planned[2]]["note"] == "not started"
    assert "stale 30k-BASE-e2e-C9e12" in text
    # a recalibrated model makes its finished runs stale too
    (cal / "text_image__30k__BASE__e2e.json").write_text(json.dumps({"x": 2}))
    collect(root, tmp_path / "runs.csv", plan=plan, data=data)
    assert read(tmp_path / "runs.csv")[planned[0]]["status"] == "stale"
    # stale rows are never fitted
    (cal / "text_image__30k__BASE__e2e.json").write_text(
        json.dumps({"family": "text_image", "backbone": "30k", "variant": "BASE", "regime": "e2e", "x": 1})
    )
    collect(root, tmp_path / "runs.csv", plan=plan, data=data)
    loaded = load_runs(tmp_path / "runs.csv")
    assert [r.run_id for r in loaded.records] == [planned[0]] and set(loaded.excluded_status) == {"stale", "incomplete"}


def test_missing_new_columns_read_as_empty(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "30k-BASE-e2e-C1e12", [3.0, 2.5])
    collect(root, tmp_path / "runs.csv")
    row = read(tmp_path / "runs.csv")["30k-BASE-e2e-C1e12"]
    assert (row["loss_se"], row["epochs"], row["warnings"], row["wall_s"], row["precision"]) == ("", "", "", "", "")


def test_a_study_whose_runs_took_different_kernel_paths_is_said(tmp_path):
    """One run's fused kernels failed to build and it trained on ATen: its loss differs by rounding, so the
    study is warned, naming the paths and a run of each."""
    runs = tmp_path / "runs"
    make_run(runs, "30k-BASE-e2e-g1e12", [3.0, 2.5], metrics_extra={"kernel_path": "fused"})
    make_run(runs, "60k-BASE-e2e-g1e12", [3.0, 2.4], params=2e5,
             metrics_extra={"kernel_path": "aten", "kernel_error": "RuntimeError: no compiler"})  # fmt: skip
    said = collect(runs, tmp_path / "runs.csv")
    assert "WARNING: the study's runs took different kernel paths (aten: 1 run(s), e.g. 60k-BASE-e2e-g1e12; " in said
    assert read(tmp_path / "runs.csv")["60k-BASE-e2e-g1e12"]["kernel_path"] == "aten"
    from prism.isoflop.present.summary import runs_lines

    assert "kernels aten and fused (MIXED: losses differ by rounding)" in runs_lines(tmp_path / "runs.csv")[0]
    (runs / "60k-BASE-e2e-g1e12" / "metrics.json").write_text(
        (runs / "60k-BASE-e2e-g1e12" / "metrics.json").read_text().replace('"aten"', '"fused"')
    )
    assert "kernel paths" not in collect(runs, tmp_path / "runs.csv", force=True)
