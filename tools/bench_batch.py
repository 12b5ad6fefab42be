"""The study's step at several batch sizes: how much of a small model's step is fixed cost.

    python tools/bench_batch.py --data D [--backbones n89e2,n32e3,n1e5,n2e5] [--batches 1,4,32,64]

A step of batch B takes about `fixed + B * per_sample` seconds: `fixed` is what a step costs
whatever it computes (Python, dispatch, autograd bookkeeping, the optimizer over every
parameter), `per_sample` the arithmetic and memory traffic that grow with the batch. For each
backbone, one process builds the study's model and optimizer (`prism train`'s, one thread),
takes the first B samples of `--family` shards for every B, and steps on each in
turn, round after round, so each size is timed across the same minutes of a shared machine.
It prints the median step and FLOP/s per batch size, the least-squares `fixed` and
`per_sample`, and the FLOP/s of `per_sample` alone: the most any removal of per-step cost
(batching runs, fewer kernels, graph capture) could give at the study's batch, `--batch`.
FLOPs are counted as the study counts them (`count_training_flops`, one sample times B).
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchlib import make_step


def fit_line(batches: list[int], seconds: list[float]) -> tuple[float, float]:
    """(fixed, per_sample) of the least-squares line `seconds = fixed + batch * per_sample`."""
    n = len(batches)
    mb, ms = sum(batches) / n, sum(seconds) / n
    slope = sum((b - mb) * (s - ms) for b, s in zip(batches, seconds)) / sum((b - mb) ** 2 for b in batches)
    return ms - slope * mb, slope


def first_batch(args: argparse.Namespace, size: int) -> tuple[torch.Tensor, ...]:
    """The first `size` training samples as the model's inputs (a batch's modality rows are
    those of its samples that carry one, so each size is loaded, not sliced from a larger batch)."""
    from prism.data.loader import ShardLoader

    batch = next(iter(ShardLoader(args.data, "train", size, 0, family=args.family)))
    return tuple(torch.as_tensor(batch[k]) for k in ("tokens", "modality", "labels"))


def measure(args: argparse.Namespace, backbone: str) -> dict:
    from prism.model import build_model
    from prism.model.accounting import count_training_flops
    from prism.model.config import backbone_config
    from prism.train.lr_schedule import build_optimizer, default_lr

    batches = sorted(set(args.batches) | {args.batch})
    torch.manual_seed(0)
    model = build_model(args.family, backbone, "BASE", "e2e")
    opt = build_optimizer(model.trainable_parameters(), default_lr(backbone_config(backbone).d_model))
    steps = {b: make_step(model, opt, first_batch(args, b)) for b in batches}
    times: dict[int, list[float]] = {b: [] for b in batches}
    for round_ in range(args.warmup + args.rounds):
        for b in batches if round_ % 2 else reversed(batches):
            wall = [steps[b]()[0] for _ in range(args.steps)]
            if round_ >= args.warmup:
                times[b].extend(wall)
    median = {b: statistics.median(times[b]) for b in batches}
    fixed, per_sample = fit_line(batches, [median[b] for b in batches])
    flops = count_training_flops(model)
    return {
        "backbone": backbone,
        "flops_per_sample": flops,
        "median_s": median,
        "fixed_s": fixed,
        "per_sample_s": per_sample,
        "gflops": {b: flops * b / median[b] / 1e9 for b in batches},
        "marginal_gflops": flops / per_sample / 1e9,
        "fixed_share": fixed / median[args.batch],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="shard directory (prism data build --family F)")
    parser.add_argument("--family", default="text_image")
    parser.add_argument("--backbones", default="n89e2,n32e3,n1e5,n2e5")
    parser.add_argument("--batches", default="1,4,32,64", type=lambda s: [int(b) for b in s.split(",")])
    parser.add_argument("--batch", type=int, default=32, help="the study's batch, whose fixed share is reported")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5, help="steps per batch size per round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds")
    args = parser.parse_args(argv)
    if len(set(args.batches) | {args.batch}) < 2:
        parser.error("--batches: give at least two batch sizes to separate fixed from per-sample cost")
    from prism.runtime.host import tune_host

    tune_host()  # as `prism train` does
    torch.set_num_threads(args.threads)
    for backbone in args.backbones.split(","):
        r = measure(args, backbone)
        per_batch = ", ".join(
            f"B{b} {1e3 * s:.2f} ms {r['gflops'][b]:.1f} GFLOP/s" for b, s in sorted(r["median_s"].items())
        )
        print(
            f"{backbone:>6}: {per_batch}; "
            f"fixed {1e3 * r['fixed_s']:.2f} ms + {1e3 * r['per_sample_s']:.3f} ms a sample; "
            f"at B{args.batch} the fixed cost is {100 * r['fixed_share']:.0f}% of the step; without it "
            f"{r['marginal_gflops']:.1f} GFLOP/s, {r['marginal_gflops'] / r['gflops'][args.batch]:.2f}x",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
