"""The realistic shape end to end: 20,000 LAION-style 224x224 RGB JPEG samples, indexed and trained on.

`prism data index` of this split keeps no decoded copy (11 GiB of float32; the index's
memory and disk stay small), `data.loader: auto` streams it with 2 workers, and a
`prism train` killed with SIGKILL resumes at the same batch: the same loss at every step as
an uninterrupted run, each process of the job under 1 GiB.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from prism.data.tarwriter import write_tar
from prism.train.rundir.runfiles import read_jsonl

pytestmark = pytest.mark.slow

SAMPLES, PER_SHARD, EVAL = 20_000, 1000, 200
SHAPE = [3, 224, 224]  # 196 tokens of 16x16 patches
SPEC = ["--image-size", "224", "--channels", "3", "--patch", "16", "--text-len", "128"]
GIB = 2**30
TINY = str(Path(__file__).parents[1] / "fixtures" / "tiny_run.yaml")
# 24 steps of 32 samples (768 samples, 440 MiB as float32) through 2 workers and a 500-sample buffer each.
FLAGS = ["--global-batch", "32", "--max-steps", "24", "--checkpoint-every", "6", "--eval-every", "12"]
FLAGS += ["--log-every", "1", "--loader", "auto", "--workers", "2", "--shuffle-buffer", "500"]
# The ATen path: the fused CPU kernels' first-use build (a C++ compiler, a child of the trainer,
# 1.6 GiB) is no part of what a stream holds, and would count in the children's peak.
ENV = {**os.environ, "PRISM_CPU_KERNELS": "0"}


def _jpegs(count: int) -> list[bytes]:
    """`count` distinct 224x224 RGB JPEGs (smooth gradients and noise: about what a photo costs to decode)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:224, 0:224]
    out = []
    for _ in range(count):
        a, b, c = rng.uniform(0.2, 1.0, 3)
        base = np.stack([x * a, y * b, (x + y) * c / 2], axis=-1) + rng.normal(0, 12, (224, 224, 3))
        buf = io.BytesIO()
        Image.fromarray(np.clip(base, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=85)
        out.append(buf.getvalue())
    return out


def _write(folder: Path, first: int, count: int, blobs: list[bytes]) -> None:
    """One img2dataset-style shard: KEY.jpg and KEY.txt per sample."""
    members = []
    for i in range(first, first + count):
        members += [(f"{i:09d}.jpg", blobs[i % len(blobs)]), (f"{i:09d}.txt", f"photo number {i}".encode())]
    with open(folder / f"{first // PER_SHARD:05d}.tar", "wb") as fh:
        write_tar(fh, members)


# A command run in a process of its own, whose peak resident set (its largest process: the
# command, or a worker it waited for) comes back as the last line of stdout.
PEAK = textwrap.dedent(
    """
    import json, resource, subprocess, sys
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"rc": done.returncode, "peak_kib": kib}))
    """
)


def _peak(*args: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", PEAK, *args], capture_output=True, text=True, timeout=900, env=ENV)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[Path, dict, float]:
    """20 train shards of 1,000 samples and one eval shard of 200 (train/ and eval/ folders), indexed by
    `prism data index` at 224x224 RGB with 2 jobs: (index, its peak, seconds)."""
    root = tmp_path_factory.mktemp("laion")
    blobs = _jpegs(32)
    for split, start, count in (("train", 0, SAMPLES), ("eval", SAMPLES, EVAL)):
        (root / "shards" / split).mkdir(parents=True)
        for first in range(start, start + count, PER_SHARD):
            _write(root / "shards" / split, first, min(PER_SHARD, start + count - first), blobs)
    start = time.monotonic()
    cmd = [sys.executable, "-m", "prism", "data", "index", str(root / "shards"), "--family", "text_image"]
    peak, _ = _peak(*cmd, "--out", str(root / "index"), *SPEC, "--jobs", "2")
    assert peak["rc"] == 0
    return root / "index", peak, time.monotonic() - start


def test_the_index_of_a_large_split_counts_every_sample_and_keeps_no_decoded_copy(indexed):
    data, peak, _ = indexed
    manifest = json.loads((data / "manifest.json").read_text())
    train, held = manifest["splits"]["train"], manifest["splits"]["eval"]
    assert (train["samples"], held["samples"], manifest["bad_samples"]) == (SAMPLES, EVAL, [])
    assert manifest["modality_shape"] == SHAPE and manifest["n_modality_tokens"] == 196
    assert train["tokens"] == sum(e["tokens"] for e in train["shards"]) > SAMPLES * 198
    assert all(len(e["sha256"]) == 64 for e in train["shards"] + held["shards"])
    assert train["decoded"] is False and held["decoded"] is False
    assert [p.name for p in data.iterdir()] == ["manifest.json"]  # no decoded copy, nothing spooled left
    assert peak["peak_kib"] * 1024 < GIB / 4, peak  # neither the index nor its 2 readers hold the split


def _killed_at(data: Path, out: Path, step: int) -> None:
    """`prism train` started on `data`, killed with SIGKILL once its perf.jsonl reaches `step`."""
    cmd = [sys.executable, "-m", "prism", "train", "--config", TINY, "--data", str(data), "--out", str(out)]
    proc = subprocess.Popen([*cmd, *FLAGS], stderr=subprocess.DEVNULL, env=ENV)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            rows = read_jsonl(out / "perf.jsonl")
            if rows and rows[-1].get("step", 0) >= step:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_streamed_train_killed_and_rerun_trains_the_batches_of_an_uninterrupted_one_under_a_gib(indexed, tmp_path):
    data = indexed[0]
    train = [sys.executable, "-m", "prism", "train", "--config", TINY, "--data", str(data)]
    whole, err = _peak(*train, "--out", str(tmp_path / "whole"), *FLAGS)
    assert whole["rc"] == 0, err
    killed = tmp_path / "killed"
    _killed_at(data, killed, 15)
    assert not (killed / "metrics.json").exists(), "the run finished before it was killed"
    rerun, err = _peak(*train, "--out", str(killed), *FLAGS)
    assert rerun["rc"] == 0, err
    metrics = json.loads((killed / "metrics.json").read_text())
    assert metrics["resumed_from"] in (12, 18)
    losses = {r["step"]: r["loss"] for r in read_jsonl(tmp_path / "whole" / "perf.jsonl")}
    perf = read_jsonl(killed / "perf.jsonl")
    assert [r["step"] for r in perf] == list(range(1, 25))
    for row in perf:  # the same batches: the same loss at every step, before and after the kill
        assert row["loss"] == pytest.approx(losses[row["step"]], rel=1e-4)
    reference = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    assert metrics["final_eval_loss"] == pytest.approx(reference["final_eval_loss"], rel=1e-4)
    # The training process and each of its 2 workers (the largest counts) under 1 GiB.
    assert whole["peak_kib"] * 1024 < GIB and rerun["peak_kib"] * 1024 < GIB, (whole, rerun)
