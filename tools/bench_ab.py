"""A/B of the training step at two revisions, robust to a shared machine's drift.

    python tools/bench_ab.py --base REV --data D [--backbone 3m] [--global-batch 32] [--steps 40]

Two worker processes, one on `git archive REV` and one on this working tree, each
build the model, optimizer and one fixed batch with their own code (process
settings included), then take steps in lockstep: base, head, base, head...
Each pair runs within a second of itself, so the per-pair ratio base/head cancels
the slow swings of other tenants that make separate runs incomparable here.
Prints the median and quartiles of the ratio (above 1: head is faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(args: argparse.Namespace) -> None:
    """One revision's step, run once per line on stdin; prints its seconds."""
    try:
        from prism.runtime.host import tune_host
    except ImportError:  # a revision before prism.runtime.host: its settings were the OpenMP policy alone
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    else:
        tune_host()
    import torch

    from prism.data.loader import ShardLoader
    from prism.model import build_model
    from prism.model.config import backbone_config
    from prism.train.lr_schedule import build_optimizer, default_lr

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_model(args.family, args.backbone, "BASE", "e2e")
    opt = build_optimizer(model.trainable_parameters(), default_lr(backbone_config(args.backbone).d_model))
    batch = next(iter(ShardLoader(args.data, "train", args.global_batch, 0, family=args.family)))
    inputs = batch["tokens"], batch["modality"], batch["labels"]
    print("ready", flush=True)
    for _ in sys.stdin:
        t0 = time.perf_counter()
        model(*inputs).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(time.perf_counter() - t0, flush=True)


def start(tree: Path, argv: list[str], extensions: Path | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # before the editable install of this checkout
    if extensions is not None:  # the base's compiled kernels apart: it never rebuilds the head's cache
        env["TORCH_EXTENSIONS_DIR"] = str(extensions)
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--worker", *argv],
        cwd=tree,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"the worker on {tree} did not start (exit status {proc.wait()})")
    return proc


def step(proc: subprocess.Popen) -> float:
    proc.stdin.write("step\n")
    proc.stdin.flush()
    return float(proc.stdout.readline())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="git revision to compare this working tree against")
    parser.add_argument("--data", required=True, help="shard directory (prism data build --family F)")
    parser.add_argument("--family", default="text_image")
    parser.add_argument("--backbone", default="3m")
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    if not args.base:
        parser.error("--base is required")
    argv = [
        "--data",
        str(Path(args.data).resolve()),
        "--family",
        args.family,
        "--backbone",
        args.backbone,
        "--global-batch",
        str(args.global_batch),
        "--threads",
        str(args.threads),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "base.tar"
        subprocess.run(["git", "archive", "-o", str(archive), args.base, "prism"], cwd=ROOT, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        base, head = start(Path(tmp), argv, Path(tmp) / "extensions"), start(ROOT, argv)
        ratios, times = [], {"base": [], "head": []}
        for i in range(args.warmup + args.steps):
            tb, th = step(base), step(head)
            if i >= args.warmup:
                ratios.append(tb / th)
                times["base"].append(tb)
                times["head"].append(th)
        for proc in (base, head):
            proc.stdin.close()
            proc.wait()
    q1, med, q3 = statistics.quantiles(ratios, n=4)
    print(f"{args.backbone} {args.family} batch {args.global_batch}, {args.threads} thread(s), {args.steps} step pairs")
    print(
        f"  step time: base {args.base} {statistics.median(times['base']) * 1e3:.1f} ms, "
        f"head {statistics.median(times['head']) * 1e3:.1f} ms (medians)"
    )
    print(f"  base/head per pair: median {med:.3f}, quartiles {q1:.3f}-{q3:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
