"""`prism isoflop status` on a half-finished study: done, running, killed, waiting and stale runs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from prism.core.errors import PrismError
from prism.isoflop.runs.status import family_dirs, status_text, study_status
from prism.train.rundir.lock import RunLock

PLAN_RUNS = [
    # run_id, budget, steps, flops, hours_here
    ("30k-BASE-e2e-C1e10", 1e10, 40, 1e10, 0.01),
    ("60k-BASE-e2e-C1e10", 1e10, 20, 1e10, 0.01),
    ("30k-BASE-e2e-C2e10", 2e10, 80, 2e10, 0.02),
    ("60k-BASE-e2e-C2e10", 2e10, 40, 2e10, 0.02),
]


def plan_row(run_id: str, budget: float, steps: int, flops: float, hours: float) -> dict:
    """A plan.yaml row as `prism isoflop plan` writes it (the keys status reads, and what every row has)."""
    backbone, variant, regime, _ = run_id.split("-")
    return {"run_id": run_id, "family": "text_image", "backbone": backbone, "variant": variant, "regime": regime,
            "budget": budget, "global_batch": 8, "steps": steps, "flops": flops, "hours_here": hours}  # fmt: skip


def write_run(run_dir: Path, steps: int, logged: list[tuple[int, float]], metrics: dict | None = None) -> None:
    """A run directory as `prism train` leaves it: config.yaml, perf rows, eval rows, maybe metrics.json."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"budget": 1e10, "resolved": {"steps": steps}}))
    rows = [{"step": s, "loss": loss, "step_time_s": 0.5, "flops": s * 2.5e8} for s, loss in logged]
    (run_dir / "perf.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "eval.jsonl").write_text(json.dumps({"step": 0, "loss": 5.5}) + "\n")
    if metrics is not None:
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
    if metrics and metrics.get("status") == "ok":  # a finished run keeps its weights and record in final/
        (run_dir / "final").mkdir()
        (run_dir / "final" / "finished.json").write_text(json.dumps({"metrics": metrics}))


@pytest.fixture
def study(tmp_path) -> Path:
    family = tmp_path / "scaling-study" / "text_image"
    family.mkdir(parents=True)
    runs = [plan_row(*row) for row in PLAN_RUNS]
    (family / "plan.yaml").write_text(
        yaml.safe_dump({"family": "text_image", "regime": "e2e", "runs": runs, "cost": {"node_hours_total": 2.5}})
    )
    root = family / "runs"
    # done: its measured wall time is twice the plan's 36 s estimate
    write_run(
        root / "30k-BASE-e2e-C1e10",
        40,
        [(1, 5.4), (40, 3.1)],
        {"status": "ok", "steps": 40, "loss": 3.05, "flops": 1e10, "wall_s": 72.0},
    )
    # killed at step 10 an hour ago: no metrics.json, no trainer
    killed = root / "60k-BASE-e2e-C1e10"
    write_run(killed, 20, [(1, 5.5), (10, 4.2)])
    old = time.time() - 3600
    for path in [killed, *killed.iterdir()]:
        os.utime(path, (old, old))
    # training now: step 20 of 80, its lock held
    write_run(root / "30k-BASE-e2e-C2e10", 80, [(1, 5.4), (10, 4.0), (20, 3.6)])
    # 60k at 2e10: not started; and a run the plan no longer holds
    write_run(root / "90k-BASE-e2e-C5e9", 10, [(10, 3.0)], {"status": "ok", "steps": 10, "flops": 5e9})
    return family


def test_half_finished_study_counts_each_state(study):
    with RunLock(study / "runs" / "30k-BASE-e2e-C2e10"):
        status = study_status(study)
        text = status_text(status)
    assert status.counts() == {"done": 1, "running": 1, "failed": 1, "waiting": 1}
    assert status.counts(1e10) == {"done": 1, "running": 0, "failed": 1, "waiting": 0}
    assert status.counts(2e10) == {"done": 0, "running": 1, "failed": 0, "waiting": 1}
    assert [r.run_id for r in status.stale] == ["90k-BASE-e2e-C5e9"]
    assert "4 planned runs: 1 done, 1 running, 1 failed, 1 waiting; 1 stale" in text
    # the running run shows its step, its latest loss and its own ETA (60 steps x 0.5 s)
    assert "30k-BASE-e2e-C2e10: step 20/80 (25%) loss 3.6000 eval 5.5000 ETA 0:00:30" in text
    assert "60k-BASE-e2e-C1e10: step 10/20 (50%) loss 4.2000" in text and "resumes from its last checkpoint" in text
    # FLOPs: the done run's 1e10, the killed run's 2.5e9 and the running run's 5e9, of 6e10 planned
    assert "FLOPs: 1.75e+10 of 6e+10 planned (29%)" in text
    # The finished run took twice the plan's estimate: what is left (36 s x 0.5 + 72 s x 0.75 + 72 s) x 2,
    # one job at a time as so far.
    assert status.eta_s() == pytest.approx((36 * 0.5 + 72 * 0.75 + 72) * 2)
    assert "ETA 0:04:48 of wall time (1 of 4 training jobs done; from the jobs left, 1.0 at a time" in text
    assert "x2.00 the plan's estimate" in text
    assert "node-hours" in text  # the plan has a cluster estimate


def write_body(run_dir: Path, nodes: int | None, started: float) -> None:
    """The job body a training job writes at its start (`launch.sh`): `#PBS -l select=N` for a cluster job."""
    pbs = f"#PBS -l select={nodes}\n" if nodes else ""
    (run_dir / "launch.sh").write_text(f"#!/bin/bash\n{pbs}prism train ...\n")
    os.utime(run_dir / "launch.sh", (started, started))


def test_node_hours_spent_against_the_plans_estimate(study):
    """A cluster study: nodes x job time of the finished, killed and running jobs, beside the plan's node-hours."""
    plan = yaml.safe_load((study / "plan.yaml").read_text())
    for row in plan["runs"]:
        row["node_hours"] = 0.5
    (study / "plan.yaml").write_text(yaml.safe_dump(plan))
    root, now = study / "runs", time.time()
    done = root / "30k-BASE-e2e-C1e10"  # 4 nodes for an hour: 4 node-hours
    for path in done.iterdir():
        os.utime(path, (now - 3600, now - 3600))  # its last write
    write_body(done, 4, now - 7200)
    killed = root / "60k-BASE-e2e-C1e10"  # 2 nodes from its start to its last write, half an hour
    write_body(killed, 2, now - 3600 - 1800)
    running = root / "30k-BASE-e2e-C2e10"  # 8 nodes, started 15 minutes ago
    write_body(running, 8, now - 900)
    write_body(root / "90k-BASE-e2e-C5e9", 16, now - 99999)  # stale: not this plan's spending
    with RunLock(running):
        status = study_status(study, now=now)
        text = status_text(status)
    by_id = {r.run_id: r for r in status.runs}
    assert by_id["30k-BASE-e2e-C1e10"].node_hours == pytest.approx(4.0, abs=0.01)
    assert by_id["60k-BASE-e2e-C1e10"].node_hours == pytest.approx(1.0, abs=0.01)
    assert by_id["30k-BASE-e2e-C2e10"].node_hours == pytest.approx(2.0, abs=0.01)
    assert by_id["60k-BASE-e2e-C2e10"].node_hours == 0.0  # waiting
    assert status.node_hours_spent() == pytest.approx(7.0, abs=0.02)
    assert "node-hours: 7 spent of the plan's estimate 2.5; finished runs used 4 against their 0.5 (x8.00)" in text


def test_a_run_started_by_hand_counts_its_wall_time_on_one_node(study):
    status = study_status(study)
    done = next(r for r in status.runs if r.run_id == "30k-BASE-e2e-C1e10")
    assert (done.nodes, done.job_s) == (1, 72.0)  # no launch.sh: metrics.json's wall_s
    (study / "plan.yaml").write_text(yaml.safe_dump({"family": "text_image", "runs": []}))
    # A plan without a cluster estimate and jobs on one node each: a laptop study, whose status has no node-hours.
    assert "node-hours" not in status_text(study_status(study))


def test_a_run_without_a_lock_but_fresh_files_counts_as_running(study):
    """A job on another node: its lock is not visible here, its files are still being written."""
    status = study_status(study)
    assert status.counts()["running"] == 1  # perf.jsonl written just now
    assert status.counts(2e10)["running"] == 1
    quiet = study_status(study, active_s=0.0)
    assert quiet.counts() == {"done": 1, "running": 0, "failed": 2, "waiting": 1}


def test_study_folder_and_errors(study, tmp_path):
    assert family_dirs(study.parent) == [study]
    assert family_dirs(study) == [study]
    with pytest.raises(PrismError, match="no plan.yaml"):
        family_dirs(tmp_path / "scaling-study" / "text_image" / "runs")
    with pytest.raises(PrismError, match="no such study folder"):
        family_dirs(tmp_path / "nowhere")
    (study / "plan.yaml").unlink()
    with pytest.raises(PrismError, match=r"plan\.yaml: no such file; `snakemake plan_text_image` makes it$"):
        study_status(study)


def test_cli_prints_the_status(study, run_prism):
    done = run_prism("isoflop", "status", str(study.parent))
    assert done.returncode == 0, done.stderr
    assert "4 planned runs" in done.stdout and "budget" in done.stdout
    assert done.stderr == ""


def test_a_done_run_whose_final_is_gone_is_listed_with_the_command_that_trains_it_again(study):
    import shutil

    from prism.isoflop.runs.status import lost_finals

    done = study / "runs" / "30k-BASE-e2e-C1e10"
    assert "final/ gone" not in status_text(study_status(study)) and lost_finals(study, [done.name], "wsd") == []
    shutil.rmtree(done / "final")
    status = study_status(study)
    assert status.counts()["done"] == 1  # its metrics stay fitted
    text = status_text(status)
    assert "done, final/ gone:" in text
    command = f"`snakemake fit_text_image --forcerun {done}/metrics.json`"
    assert f"{done}/final/ is gone" in text and command in text
    (line,) = lost_finals(study, [r[0] for r in PLAN_RUNS], "wsd")
    assert command in line and "from its branch point" in line and "\n" not in line


def wsd_study(tmp_path) -> Path:
    """A wsd study halfway: one model's trajectory cut at 80 (1e10's cooldown) and 160 (2e10's), its first
    segment done, its second running at step 120, no branch started."""
    family = tmp_path / "wsd-study" / "text_image"
    family.mkdir(parents=True)
    runs = [
        plan_row("30k-BASE-e2e-C1e10", 1e10, 100, 1e10, 0.01),
        plan_row("30k-BASE-e2e-C2e10", 2e10, 200, 2e10, 0.02),
    ]
    for r in runs:
        r["flops_per_sample"] = 1e6
    plan = {
        "family": "text_image",
        "regime": "e2e",
        "runs": runs,
        "min_steps": 10,
        "schedules": {"cooldown_fraction": 0.2},
    }
    (family / "plan.yaml").write_text(yaml.safe_dump(plan))
    stable = family / "stable" / "30k-BASE-e2e-B8"
    write_run(stable / "to-00000080", 80, [(1, 5.4), (80, 3.5)], {"status": "ok", "steps": 80, "wall_s": 36.0})
    write_run(stable / "to-00000160", 160, [(100, 3.4), (120, 3.3)])
    return family


def test_a_wsd_study_counts_its_segments_and_branches_and_the_flops_of_their_prefixes(tmp_path):
    """Halfway through a wsd study no run is done, but most of its work is: said, with totals."""
    family = wsd_study(tmp_path)
    with RunLock(family / "stable" / "30k-BASE-e2e-B8" / "to-00000160"):
        status = study_status(family)
        text = status_text(status)
    assert status.schedule == "wsd"
    assert "wsd training jobs: 1 of 2 trajectory segments done (1 running), 0 of 2 branches done" in text
    # 1e10's run has its whole prefix (80 of its 100 steps), 2e10's 120 of its 200: 0.8e10 + 1.2e10 FLOPs.
    assert "FLOPs: 2e+10 of 3e+10 planned (67%)" in text and "branch point included" in text
    assert "node-hours" not in text  # a laptop study: no cluster estimate, no PBS job
    assert "ETA " in text and "1 of 4 training jobs done" in text
