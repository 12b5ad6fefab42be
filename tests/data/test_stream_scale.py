"""Streaming at the realistic shape: 20,000 samples of 224x224 RGB JPEGs with 2 workers.

Preloaded, this split is 11 GiB of float32 (auto streams it); streamed, the process and its
workers stay under 1 GiB, and a stream killed with SIGKILL resumes at the same batch.
"""

from __future__ import annotations

import hashlib
import io
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from prism.data.manifest import FORMAT_VERSION
from prism.data.tarwriter import write_tar

pytestmark = pytest.mark.slow

SAMPLES, PER_SHARD, EVAL = 20_000, 1000, 200
SHAPE = [3, 224, 224]  # 196 tokens of 16x16 patches
GIB = 2**30


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


def _write(folder: Path, first: int, count: int, blobs: list[bytes]) -> dict:
    """One img2dataset-style shard (KEY.jpg, KEY.txt) and its manifest entry."""
    members = []
    for i in range(first, first + count):
        members += [(f"{i:09d}.jpg", blobs[i % len(blobs)]), (f"{i:09d}.txt", f"photo number {i}".encode())]
    path = folder / f"{first // PER_SHARD:05d}.tar"
    with open(path, "wb") as fh:
        write_tar(fh, members)
    data = path.read_bytes()
    name = f"{folder.name}/{path.name}"
    digest = hashlib.sha256(data).hexdigest()
    return {"name": name, "sha256": digest, "bytes": len(data), "samples": count, "tokens": 0, "bad": 0}


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """An index of 20,000 train samples (20 shards) and 200 eval ones at 224x224 RGB, captions up to 128 tokens.

    Written as `prism data index` writes one for shards in train/ and eval/ folders, at the shape the
    family will have once shapes are configurable.
    """
    root = tmp_path_factory.mktemp("big")
    blobs = _jpegs(32)
    splits = {}
    for split, count in (("train", SAMPLES), ("eval", EVAL)):
        (root / "shards" / split).mkdir(parents=True)
        entries = [
            _write(root / "shards" / split, first, min(PER_SHARD, count - first), blobs)
            for first in range(0, count, PER_SHARD)
        ]
        splits[split] = {"samples": count, "tokens": 0, "shards": entries}
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": "index",
        "family": "text_image",
        "seed": None,
        "source": "test",
        "shards_dir": str(root / "shards"),
        "split": {"by": "folder"},
        "modality_shape": SHAPE,
        "n_modality_tokens": 196,
        "text_len": 128,
        "bad_samples": [],
        "damaged_shards": [],
        "lm_ratio": 0.0,
        "lm_text": None,
        "splits": splits,
    }
    (root / "index").mkdir()
    (root / "index" / "manifest.json").write_text(json.dumps(manifest))
    return root / "index"


# The stream as a training job opens it (`open_loader` with data.loader auto), in a process of its own.
STREAM = textwrap.dedent(
    """
    import hashlib, json, resource, sys
    from prism.data.manifest import read_manifest
    from prism.data.options import resolve
    from prism.data.stream import StreamLoader

    data, out, batches, state = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    assert resolve(read_manifest(data), "train", "auto", 1024) == "stream"
    loader = StreamLoader(data, global_batch=32, seed=0, workers=2, shuffle_buffer=500)
    if state != "-":
        loader.load_state_dict(json.loads(state))
    with open(out, "a") as fh:
        for _ in range(batches):
            batch = next(loader)
            h = hashlib.sha256(batch["tokens"].numpy().tobytes() + batch["modality"].numpy().tobytes())
            row = {"step": loader.step, "digest": h.hexdigest(), "shape": list(batch["modality"].shape)}
            fh.write(json.dumps({**row, "state": loader.state_dict()}) + "\\n")
            fh.flush()
    loader.close()
    usage = [resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    kib = max(usage)  # this process, and the largest of its workers
    hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
    print(json.dumps({"peak_kib": kib, "hwm_kib": hwm}))
    """
)


def _rows(path: Path) -> list[dict]:
    lines = path.read_text().splitlines() if path.exists() else []
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except ValueError:
            break  # the line a kill cut
    return rows


def test_a_killed_stream_resumes_at_the_same_batch_and_stays_under_a_gib(big, tmp_path):
    log = tmp_path / "killed.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", STREAM, str(big), str(log), "100000", "-"])
    try:
        deadline = time.monotonic() + 600
        while len(_rows(log)) < 6 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the stream ended before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    rows = _rows(log)
    assert len(rows) >= 6 and rows[0]["shape"] == [32, *SHAPE]
    at = rows[4]  # resume after step 5: the killed stream's step 6 is the reference
    resumed = tmp_path / "resumed.jsonl"
    res = subprocess.run(
        [sys.executable, "-c", STREAM, str(big), str(resumed), "60", json.dumps(at["state"])],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr
    again = _rows(resumed)
    assert again[0]["step"] == rows[5]["step"] == 6
    assert again[0]["digest"] == rows[5]["digest"]
    assert [r["digest"] for r in again[: len(rows) - 5]] == [r["digest"] for r in rows[5:]]
    # 60 batches of 32 (1,920 samples, 1.1 GiB as float32) read; the process and its workers under 1 GiB.
    peak = json.loads(res.stdout.strip().splitlines()[-1])
    assert peak["peak_kib"] * 1024 < GIB and peak["hwm_kib"] * 1024 < GIB, peak
