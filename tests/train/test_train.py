"""`prism train` end to end on the 30k backbone: files, resume after SIGKILL and SIGTERM, collapse, reruns."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prism.train.rundir.runfiles import read_jsonl

pytestmark = pytest.mark.slow

CONTEXT_KEYS = {
    "strategy",
    "world_size",
    "device",
    "torch_version",
    "compile",
    "grad_checkpoint",
    "git_rev",
    "family",
    "backbone",
    "variant",
    "regime",
    "layout",
    "run_id",
}
PERF_KEYS = {"step", "loss", "samples_per_s", "tokens_per_s", "step_time_s", "data_wait_s", "mfu", "peak_mem_bytes"}


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def test_a_3e11_budget_run_writes_every_file_and_learns(train, tmp_path):
    out = tmp_path / "run"
    res = train(out, "--global-batch", "32")
    assert res.returncode == 0, res.stderr
    assert {p.name for p in out.iterdir()} == {
        ".lock",
        "config.yaml",
        "perf.jsonl",
        "eval.jsonl",
        "final",
        "metrics.json",
    }
    m = metrics(out)
    assert m["status"] == "ok" and m["steps"] == m["budget_steps"] == round(3e11 / (m["flops_per_sample"] * 32))
    assert m["flops"] == pytest.approx(3e11, rel=0.01) and m["tokens"] == m["samples"] * 64
    assert m["params"] == m["params_total"] > 0 and m["run_id"] == "30k-BASE-e2e-C3e11"
    assert "counted in-process" in m["flops_source"] and "counted" in res.stderr
    assert m["final_eval_loss"] < 0.5 * m["initial_eval_loss"]
    perf = read_jsonl(out / "perf.jsonl")
    assert perf[0]["step"] == 1 and perf[-1]["step"] == m["steps"]
    assert all(PERF_KEYS | CONTEXT_KEYS <= row.keys() for row in perf)
    assert 0 < perf[-1]["mfu"] < 1 and perf[-1]["world_size"] == 1 and perf[-1]["strategy"] == "none"
    evals = read_jsonl(out / "eval.jsonl")
    assert evals[0]["step"] == 0 and evals[-1]["step"] == m["steps"] and evals[-1]["loss"] == m["final_eval_loss"]
    assert {"step", "tokens", "flops", "loss"} <= evals[1].keys()
    assert "ETA" in res.stderr and f"step {m['steps']}/{m['steps']}" in res.stderr
    # The final weights are kept, out of the resume path.
    assert any(out.glob(f"final/step-{m['steps']:08d}.pt"))
    # A rerun sees metrics.json and does nothing.
    before = (out / "perf.jsonl").read_text()
    again = train(out, "--global-batch", "32")
    assert again.returncode == 0 and "nothing to do" in again.stderr
    assert (out / "perf.jsonl").read_text() == before
    # A forced rerun (metrics.json removed and --retrain, as `snakemake --forcerun train` does) trains
    # again from step 1 instead of "resuming" at the last step or restoring the finished record.
    (out / "metrics.json").unlink()
    forced = train(out, "--global-batch", "32", "--retrain")
    assert forced.returncode == 0 and "resuming from" not in forced.stderr
    assert metrics(out)["resumed_from"] is None and read_jsonl(out / "perf.jsonl")[0]["step"] == 1
    assert metrics(out)["final_eval_loss"] == pytest.approx(m["final_eval_loss"], rel=1e-4)


def _wait_for_step(path: Path, step: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = read_jsonl(path)
        if rows and rows[-1].get("step", 0) >= step:
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended (rc {proc.returncode}) before step {step}: {proc.stderr.read()}")
        time.sleep(0.02)
    pytest.fail(f"step {step} not reached in {timeout} s")


def _signal_at_step(
    tiny: list[str], shards: Path, out: Path, flags: list[str], step: int, signum: int
) -> tuple[int, str]:
    """Start `prism train`, send `signum` once perf.jsonl reaches `step`; (exit status, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "prism", "train", *tiny, "--data", str(shards), "--out", str(out), *flags],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_step(out / "perf.jsonl", step, proc)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def test_sigkill_then_rerun_resumes_and_ends_like_an_uninterrupted_run(train, tiny, shards, tmp_path):
    flags = ["--max-steps", "160", "--checkpoint-every", "20", "--eval-every", "40", "--log-every", "5"]
    whole = tmp_path / "whole"
    assert train(whole, *flags).returncode == 0
    killed = tmp_path / "killed"
    _signal_at_step(tiny, shards, killed, flags, 85, signal.SIGKILL)
    assert not (killed / "metrics.json").exists(), "the run finished before it was killed"
    res = train(killed, *flags)
    assert res.returncode == 0, res.stderr
    assert "resuming from" in res.stderr
    a, b = metrics(whole), metrics(killed)
    assert b["resumed_from"] is not None and 80 <= b["resumed_from"] < 160 and b["resumed_from"] % 20 == 0
    assert b["final_eval_loss"] == pytest.approx(a["final_eval_loss"], rel=1e-4)
    perf = read_jsonl(killed / "perf.jsonl")
    steps = [r["step"] for r in perf]
    assert steps == sorted(set(steps)), "rows past the checkpoint were not dropped"
    assert [r["step"] for r in perf if r.get("resumed_from") == b["resumed_from"]][0] > b["resumed_from"]
    whole_loss = {r["step"]: r["loss"] for r in read_jsonl(whole / "perf.jsonl")}
    for row in perf:
        assert row["loss"] == pytest.approx(whole_loss[row["step"]], rel=1e-4)
    assert [r["loss"] for r in read_jsonl(killed / "eval.jsonl")] == pytest.approx(
        [r["loss"] for r in read_jsonl(whole / "eval.jsonl")], rel=1e-4
    )


def test_sigterm_checkpoints_the_step_reached_and_the_rerun_resumes_there(train, tiny, shards, tmp_path):
    """PBS's walltime/preemption signal: the run stops after the step in progress with a checkpoint
    there (not the last periodic one), exits 143 without metrics.json, and resumes from that step."""
    flags = ["--max-steps", "160", "--checkpoint-every", "50", "--eval-every", "40", "--log-every", "5"]
    whole = tmp_path / "whole"
    assert train(whole, *flags).returncode == 0
    stopped = tmp_path / "stopped"
    returncode, err = _signal_at_step(tiny, shards, stopped, flags, 60, signal.SIGTERM)
    assert returncode == 143, err
    assert not (stopped / "metrics.json").exists()
    checkpoints = sorted(p.name for p in (stopped / "checkpoints").glob("step-*.pt"))
    at = int(checkpoints[-1][len("step-") : -len(".pt")])
    assert 60 < at < 160 and at % 50, f"the last checkpoint {checkpoints[-1]} is a periodic one"
    assert f"checkpoint at step {at}/160" in err and "rerun the same command to resume" in err
    res = train(stopped, *flags)
    assert res.returncode == 0, res.stderr
    assert metrics(stopped)["resumed_from"] == at
    assert metrics(stopped)["final_eval_loss"] == pytest.approx(metrics(whole)["final_eval_loss"], rel=1e-4)
    evals = [(r["step"], r["loss"]) for r in read_jsonl(stopped / "eval.jsonl")]
    assert evals == [
        (step, pytest.approx(loss, rel=1e-4))
        for step, loss in ((r["step"], r["loss"]) for r in read_jsonl(whole / "eval.jsonl"))
    ]


def test_injected_nan_collapses_with_reason_step_and_nonzero_exit(train, tmp_path):
    out = tmp_path / "nan"
    res = train(out, "--max-steps", "20", env={"PRISM_TEST_INJECT_NAN_AT_STEP": "7"})
    assert res.returncode == 3, res.stderr
    m = metrics(out)
    assert m["status"] == "collapsed" and m["step"] == 7 and "non-finite" in m["reason"]
    assert m["final_eval_loss"] is None and "COLLAPSED at step 7" in res.stderr
    assert '"status": "ok"' not in (out / "metrics.json").read_text()
    again = train(out, "--max-steps", "20")
    assert again.returncode == 3 and "status collapsed" in again.stderr


def test_absurd_learning_rate_collapses(train, tmp_path):
    res = train(tmp_path / "lr", "--max-steps", "40", "--lr", "1e6")
    assert res.returncode == 3
    assert metrics(tmp_path / "lr")["status"] == "collapsed"


def test_calibration_sets_the_steps_and_a_changed_rerun_is_refused(train, tmp_path):
    cal = tmp_path / "cal"
    cal.mkdir()
    fps = 3e11 / (8 * 7)  # exactly 7 steps of 8 samples
    record = {
        "calibration_version": 1,
        "family": "text_image",
        "backbone": "30k",
        "variant": "BASE",
        "regime": "e2e",
        "params_total": 1,
        "params_trainable": 1,
        "params_by_component": {},
        "flops_per_sample": fps,
        "tokens_per_sample": 64,
    }
    (cal / "text_image__30k__BASE__e2e.json").write_text(json.dumps(record))
    out = tmp_path / "run"
    res = train(out, "--calibration-dir", str(cal), "--checkpoint-every", "3")
    assert res.returncode == 0, res.stderr
    m = metrics(out)
    assert m["steps"] == 7 and m["flops_per_sample"] == fps and "calibration" in m["flops_source"]
    (out / "metrics.json").unlink()
    res = train(out, "--calibration-dir", str(cal), "--seed", "5")
    assert res.returncode == 2 and "holds a different run (seed: 0 -> 5)" in res.stderr
    assert (out / "perf.jsonl").stat().st_size and (out / "eval.jsonl").stat().st_size  # records kept
    assert len(res.stderr.strip().splitlines()) == 1


def test_rerun_on_changed_inputs_starts_over(train, tmp_path):
    """Checkpoints trained on other data or another calibration are not resumed."""
    cal = tmp_path / "calibration.json"
    record = {"family": "text_image", "backbone": "30k", "variant": "BASE", "regime": "e2e", "flops_per_sample": 2.0e7}
    cal.write_text(json.dumps(record))
    out = tmp_path / "changed"
    flags = ["--max-steps", "30", "--checkpoint-every", "5", "--calibration", str(cal)]
    first = train(out, *flags, env={"PRISM_TEST_INJECT_NAN_AT_STEP": "12"})
    assert first.returncode == 3 and any(out.glob("checkpoints/step-*.pt"))
    (out / "metrics.json").unlink()  # what Snakemake does before rerunning the job
    cal.write_text(json.dumps({**record, "flops_per_sample": 2.1e7}))
    res = train(out, *flags)
    assert res.returncode == 0, res.stderr
    assert "calibration changed since this run started: starting over" in res.stderr
    assert "resuming from" not in res.stderr and metrics(out)["resumed_from"] is None
    assert read_jsonl(out / "perf.jsonl")[0]["step"] == 1


def test_a_streamed_run_killed_and_rerun_trains_the_batches_of_an_uninterrupted_one(train, tiny, shards, tmp_path):
    flags = ["--max-steps", "48", "--checkpoint-every", "12", "--eval-every", "24", "--log-every", "1"]
    flags += ["--loader", "stream", "--workers", "2", "--shuffle-buffer", "300"]
    whole = tmp_path / "whole"
    res = train(whole, *flags)
    assert res.returncode == 0, res.stderr
    killed = tmp_path / "killed"
    _signal_at_step(tiny, shards, killed, flags, 30, signal.SIGKILL)
    assert not (killed / "metrics.json").exists(), "the run finished before it was killed"
    res = train(killed, *flags)
    assert res.returncode == 0, res.stderr
    b = metrics(killed)
    assert b["resumed_from"] in (24, 36)
    whole_loss = {r["step"]: r["loss"] for r in read_jsonl(whole / "perf.jsonl")}
    perf = read_jsonl(killed / "perf.jsonl")
    assert [r["step"] for r in perf] == list(range(1, 49))
    for row in perf:  # the same batches: the same loss at every step, before and after the kill
        assert row["loss"] == pytest.approx(whole_loss[row["step"]], rel=1e-4)
    assert b["final_eval_loss"] == pytest.approx(metrics(whole)["final_eval_loss"], rel=1e-4)
    # The order is part of the run's identity: other workers train the finished run again, from step 1.
    (killed / "metrics.json").unlink()
    other = train(killed, *flags[:-4], "--workers", "1", "--shuffle-buffer", "300")
    assert other.returncode == 0 and "finished under other values (workers: 2 -> 1): training again" in other.stderr
    assert metrics(killed)["resumed_from"] is None
