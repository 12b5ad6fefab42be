"""A wsd study's stable trajectory in segments (cooldown fraction 0), then a branch off its last point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from prism.train.rundir.runfiles import read_jsonl

pytestmark = pytest.mark.slow

WSD = ["--schedule", "wsd", "--warmup", "5", "--eval-every", "10"]


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def test_branch_off_chained_segments_equals_one_uninterrupted_wsd_run(train, tmp_path):
    whole, seg1, seg2, branch = (tmp_path / name for name in ("whole", "to16", "to32", "branch"))
    # One wsd run of 40 steps: warm-up 5, constant up to step 32, (1-sqrt) cooldown over the last 8.
    assert train(whole, *WSD, "--max-steps", "40").returncode == 0
    # Its stable phase as two segments (constant after the warm-up: cooldown fraction 0), each ending
    # in a kept checkpoint, the second continuing the first.
    for out, steps, init in ((seg1, 16, []), (seg2, 32, ["--init-from", str(seg1), "--init-step", "16"])):
        done = train(
            out, *WSD, "--cooldown-fraction", "0", "--max-steps", str(steps), "--checkpoint-at", str(steps), *init
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert (out / "final" / "keep" / f"step-{steps:08d}.pt").is_file()
    done = train(branch, *WSD, "--max-steps", "40", "--init-from", str(seg2), "--init-step", "32")
    assert done.returncode == 0, done.stderr[-3000:]
    a, b = metrics(whole), metrics(branch)
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-4)
    assert b["loss"] == a["loss"]  # bit-exact on one CPU thread
    assert (b["steps"], b["flops"], b["samples"]) == (a["steps"], a["flops"], a["samples"])  # prefix + cooldown
    assert b["started_from"] == f"{seg2}@32"
    # the whole curve: the segments' evaluations up to the branch point, then the branch's own
    steps = [r["step"] for r in read_jsonl(branch / "eval.jsonl")]
    assert steps[0] == 0 and 16 in steps and 32 in steps and steps[-1] == 40


def _weights(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def test_a_segment_missing_its_kept_checkpoint_is_not_finished_and_rebuilds_it_bit_identically(train, tmp_path):
    seg1, seg2, branch = tmp_path / "to16", tmp_path / "to32", tmp_path / "branch"
    cmd2 = [
        *WSD,
        "--cooldown-fraction",
        "0",
        "--max-steps",
        "32",
        "--checkpoint-at",
        "32",
        "--init-from",
        str(seg1),
        "--init-step",
        "16",
    ]
    assert train(seg1, *WSD, "--cooldown-fraction", "0", "--max-steps", "16", "--checkpoint-at", "16").returncode == 0
    assert train(seg2, *cmd2).returncode == 0
    kept = seg2 / "final" / "keep" / "step-00000032.pt"
    original = _weights(kept)
    # Deleted (as Snakemake does before rerunning the job whose output it is): put back from final/.
    kept.unlink()
    done = train(seg2, *cmd2)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "put back from final/" in done.stderr and "nothing to do" not in done.stderr
    assert kept.is_file() and "step 1/" not in done.stderr
    # Damaged (both names are one file): a branch off it says what rewrites it, and doing so retrains
    # the segment from its own start to the same weights.
    kept.write_bytes(b"not a checkpoint")
    failed = train(branch, *WSD, "--max-steps", "40", "--init-from", str(seg2), "--init-step", "32")
    assert failed.returncode != 0
    assert f"delete it and rerun the run that wrote it ({seg2}" in failed.stderr
    kept.unlink()
    done = train(seg2, *cmd2)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cannot stand in for it: training again from its start" in done.stderr
    assert "starting from" in done.stderr and metrics(seg2)["status"] == "ok"
    rebuilt = _weights(kept)
    assert rebuilt.keys() == original.keys() and all(torch.equal(rebuilt[k], original[k]) for k in original)
    assert train(branch, *WSD, "--max-steps", "40", "--init-from", str(seg2), "--init-step", "32").returncode == 0
