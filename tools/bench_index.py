"""How long `prism data index` takes on shards as img2dataset writes them.

Writes SAMPLES generated images (ellipses and boxes on random backgrounds, 32-160 px, one
third each JPEG, PNG and WebP) with captions through webdataset's TarWriter, then times
`prism data index` and `prism data verify` on them, each REPEATS times; prints the medians of
wall and CPU time (on a shared host the CPU time is the figure to compare). With --rss, runs
`prism data index` once in a process of its own instead and prints that process's peak resident
memory (the prism it imports is the one on PYTHONPATH, so two checkouts compare).

    python tools/bench_index.py --samples 10000 --per-shard 1000 --repeats 3
    python tools/bench_index.py --samples 10000 --per-shard 1000 --rss
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_shards(folder: Path, samples: int, per_shard: int, seed: int = 0) -> int:
    """Write the shards; their total bytes."""
    import webdataset as wds
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for first in range(0, samples, per_shard):
        with wds.TarWriter(str(folder / f"{first // per_shard:05d}.tar")) as sink:
            for i in range(first, min(samples, first + per_shard)):
                w, h = (int(x) for x in rng.integers(32, 161, size=2))
                im = Image.new("RGB", (w, h), tuple(int(c) for c in rng.integers(0, 256, 3)))
                draw = ImageDraw.Draw(im)
                box = sorted(rng.integers(0, w, 2).tolist()), sorted(rng.integers(0, h, 2).tolist())
                shape = ("ellipse", "box")[i % 2]
                (draw.ellipse if shape == "ellipse" else draw.rectangle)(
                    (box[0][0], box[1][0], box[0][1], box[1][1]), fill=tuple(int(c) for c in rng.integers(0, 256, 3))
                )
                fmt = ("JPEG", "PNG", "WEBP")[i % 3]
                buf = io.BytesIO()
                im.save(buf, format=fmt)
                sink.write(
                    {
                        "__key__": f"{i:09d}",
                        {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}[fmt]: buf.getvalue(),
                        "txt": f"an {shape} on a {w} by {h} image",
                        "json": {"width": w, "height": h},
                    }
                )
    return sum(p.stat().st_size for p in folder.glob("*.tar"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--family", default="text_image")
    parser.add_argument("--rss", action="store_true", help="peak memory of one `prism data index` process")
    args = parser.parse_args(argv)
    if args.rss:
        return peak_rss(args)

    from prism.data.indexer import index
    from prism.data.manifest import verify

    with tempfile.TemporaryDirectory() as tmp:
        shards = Path(tmp) / "shards"
        size = write_shards(shards, args.samples, args.per_shard)
        index_s, index_cpu, verify_s, verify_cpu = [], [], [], []
        for r in range(args.repeats):
            start, cpu = time.perf_counter(), time.process_time()
            manifest = index(shards, args.family, Path(tmp) / "idx", overwrite=r > 0)
            index_s.append(time.perf_counter() - start)
            index_cpu.append(time.process_time() - cpu)
            start, cpu = time.perf_counter(), time.process_time()
            verify(Path(tmp) / "idx")
            verify_s.append(time.perf_counter() - start)
            verify_cpu.append(time.process_time() - cpu)
        counts = {s: v["samples"] for s, v in manifest["splits"].items()}
        print(
            f"{args.samples} samples in {len(list(shards.glob('*.tar')))} shards ({size / 1e6:.1f} MB), "
            f"split {counts}: index {statistics.median(index_s):.2f} s wall, {statistics.median(index_cpu):.2f} s CPU "
            f"(runs {', '.join(f'{x:.2f}' for x in index_s)} s wall); verify {statistics.median(verify_s):.2f} s wall, "
            f"{statistics.median(verify_cpu):.2f} s CPU"
        )
    return 0


# The child reports its own high-water mark (Linux's VmHWM, of this program alone: the
# rusage of a forked child would also count the memory of the parent it was forked from).
CHILD = """
import sys
from prism.cli import main
status = main(sys.argv[1:])
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(int(hwm.split()[1]), file=sys.stderr)
sys.exit(status)
"""


def peak_rss(args: argparse.Namespace) -> int:
    """Index once in a process of its own (one decoding process); print its peak resident memory."""
    with tempfile.TemporaryDirectory() as tmp:
        shards = Path(tmp) / "shards"
        size = write_shards(shards, args.samples, args.per_shard)
        command = ["data", "index", str(shards), "--family", args.family, "--out", str(Path(tmp) / "idx")]
        start = time.perf_counter()
        child = subprocess.run(
            [sys.executable, "-c", CHILD, *command, "--jobs", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        if child.returncode:
            print(f"prism data index failed ({child.returncode}): {child.stderr.decode()[-2000:]}", file=sys.stderr)
            return 1
        peak_kib = int(child.stderr.decode().split()[-1])
        print(
            f"{args.samples} samples in {len(list(shards.glob('*.tar')))} shards ({size / 1e6:.1f} MB): "
            f"prism data index peak RSS {peak_kib / 1024:.0f} MiB ({time.perf_counter() - start:.1f} s wall)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
