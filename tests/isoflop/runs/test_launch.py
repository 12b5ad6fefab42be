"""launch: every planned run rendered by the training launchers, run or submitted, with a ledger."""

from __future__ import annotations

import csv
import os
import stat

import pytest

from prism.cli import build_parser, main
from prism.isoflop.runs.launch import launch_plan
from prism.launch.command import train_args
from prism.train.config import merge
from prism.train.identity import run_identity

from ..conftest import plan_cli, write_calibration


@pytest.fixture
def plan_path(tmp_path):
    cal = tmp_path / "cal"
    for name, n in {"30k": 5e4, "60k": 1.2e5, "120k": 2.5e5}.items():
        write_calibration(cal, "text_image", name, "BASE", "e2e", n)
    out = tmp_path / "study" / "plan.yaml"
    assert plan_cli(cal, "1e12", simulations=20, allow_undetermined=True, out=out) == 0
    return out


def test_dry_run_prints_commands_and_writes_nothing(plan_path, tmp_path, capsys):
    ledger = tmp_path / "ledger.csv"
    rc = main(
        [
            "isoflop",
            "launch",
            "--plan",
            str(plan_path),
            "--launcher",
            "local",
            "--ledger",
            str(ledger),
            "--data",
            "shards",
            "--dry-run",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and not ledger.exists()
    assert "prism train --family text_image --backbone 30k --variant BASE --regime e2e --budget 1e12" in out
    assert f"--out {plan_path.parent / 'runs' / '30k-BASE-e2e-C1e12'}" in out
    assert "--calibration-dir" in out  # taken from the plan
    assert "--warmup 25" in out  # half the plan's min_steps (50), as a wsd study's runs


def test_runs_warm_up_over_half_the_plans_min_steps(plan_path, tmp_path):
    import yaml

    plan = yaml.safe_load(plan_path.read_text())
    plan["min_steps"] = 80
    plan_path.write_text(yaml.safe_dump(plan))
    results = launch_plan(plan_path, "local", tmp_path / "ledger.csv", "shards", dry_run=True, echo=lambda *a: None)
    assert results and all("--warmup 40" in r["command"] for r in results)


def test_local_runs_and_ledger(plan_path, tmp_path, monkeypatch):
    import prism.isoflop.runs.launch

    monkeypatch.setattr(
        prism.isoflop.runs.launch,
        "render",
        lambda launcher, run, **kw: f"echo {run.run_id}; test {run.global_batch} -gt 0",
    )
    ledger = tmp_path / "ledger.csv"
    results = launch_plan(plan_path, "local", ledger, "shards", echo=lambda *a: None)
    assert {r["state"] for r in results} == {"finished"}
    rows = list(csv.DictReader(ledger.open()))
    assert [r["state"] for r in rows] == ["finished"] * len(results)
    log = plan_path.parent / "runs" / f"{results[0]['run_id']}.launch.log"
    assert results[0]["run_id"] in log.read_text()
    # a finished run (metrics.json present) is skipped next time
    done = plan_path.parent / "runs" / results[0]["run_id"]
    done.mkdir(parents=True)
    (done / "metrics.json").write_text("{}")
    again = launch_plan(plan_path, "local", ledger, "shards", echo=lambda *a: None)
    assert again[0]["state"] == "finished" and list(csv.DictReader(ledger.open()))[len(rows)]["state"] == "skipped"


def test_aurora_submits_job_bodies_with_qsub(plan_path, tmp_path, monkeypatch):
    import prism.isoflop.runs.launch

    bindir = tmp_path / "bin"
    bindir.mkdir()
    qsub = bindir / "qsub"
    qsub.write_text("#!/bin/sh\necho 4242.pbs-server\n")
    qsub.chmod(qsub.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(
        prism.isoflop.runs.launch, "render", lambda launcher, run, **kw: f"#!/bin/bash\n#PBS -N {run.run_id}\n"
    )
    ledger = tmp_path / "ledger.csv"
    results = launch_plan(plan_path, "aurora", ledger, "shards", echo=lambda *a: None)
    assert all(r["state"] == "submitted" and r["job_id"] == "4242.pbs-server" for r in results)
    body = plan_path.parent / "runs" / "jobs" / f"{results[0]['run_id']}.pbs"
    assert body.read_text().startswith("#!/bin/bash")


def test_missing_plan_is_a_clear_error(tmp_path, capsys):
    rc = main(
        [
            "isoflop",
            "launch",
            "--plan",
            str(tmp_path / "none.yaml"),
            "--launcher",
            "local",
            "--ledger",
            str(tmp_path / "l.csv"),
            "--data",
            "d",
        ]
    )
    assert rc == 2 and "no such file" in capsys.readouterr().err


def test_a_run_finished_under_other_values_trains_again_as_the_workflow_does(plan_path, tmp_path, monkeypatch):
    """A finished run whose recorded identity (prism.train.identity) is not its plan row's, as after a library
    default changed, is not skipped: its metrics.json goes, as Snakemake deletes a rerun job's output, and it
    trains again; a run finished under the row's identity stays skipped."""
    import prism.isoflop.runs.launch

    runs = {}
    monkeypatch.setattr(
        prism.isoflop.runs.launch, "render", lambda launcher, run, **kw: runs.setdefault(run.run_id, run) and "true"
    )
    launch_plan(plan_path, "local", tmp_path / "ledger.csv", "shards", dry_run=True, echo=lambda *a: None)
    same, other = list(runs)[:2]
    # the identity `prism train` records for the launched command is the one launch compares
    flags = vars(build_parser().parse_args(train_args(runs[same])))
    assert run_identity(merge(None, flags)) == run_identity(runs[same])
    for run_id, identity in ((same, run_identity(runs[same])), (other, {**run_identity(runs[other]), "lr": 1.0})):
        runs[run_id].out_dir.mkdir(parents=True)
        runs[run_id].to_yaml(runs[run_id].out_dir / "config.yaml", resolved={"identity": identity})
        (runs[run_id].out_dir / "metrics.json").write_text('{"status": "ok"}')
    said = []
    dry = launch_plan(plan_path, "local", tmp_path / "ledger.csv", "shards", dry_run=True, echo=said.append)
    states = {r["run_id"]: r["state"] for r in dry}
    assert (states[same], states[other]) == ("finished", "dry-run")
    assert f"# {other}: finished under other values (lr: 1.0 -> " in "\n".join(said)
    assert (runs[other].out_dir / "metrics.json").exists()  # a dry run changes nothing
    launch_plan(plan_path, "local", tmp_path / "ledger.csv", "shards", echo=lambda *a: None)
    ledger = [(r["run_id"], r["state"]) for r in csv.DictReader((tmp_path / "ledger.csv").open())]
    assert (same, "skipped") in ledger and [s for r, s in ledger if r == other] == ["retrain", "finished"]
    assert (runs[same].out_dir / "metrics.json").exists() and not (runs[other].out_dir / "metrics.json").exists()
