"""A wsd study's stable trajectory in segments (cooldown fraction 0), then a branch off its last point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prism.train.runfiles import read_jsonl

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
        done = train(out, *WSD, "--cooldown-fraction", "0", "--max-steps", str(steps), "--checkpoint-at",
                     str(steps), *init)
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
