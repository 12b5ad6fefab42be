"""`prism bench ...`."""

from __future__ import annotations

import argparse

# The dtypes the peak and the throughput bench time (prism.runtime.peak reads each).
DTYPES = ("fp32", "bf16", "fp16")


def _peak(args: argparse.Namespace) -> int:
    from prism.runtime.peak import format_peak, peak_record

    print(format_peak(peak_record(args.device, args.dtype, refresh=args.refresh)))
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    p = verbs.add_parser(
        "peak",
        help="Measured dense matmul peak FLOP/s of a device (cached).",
        description="Measure (or read from the cache) the dense matmul peak that MFU is relative to.",
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, xpu or auto (default: cpu)")
    p.add_argument("--dtype", default="fp32", choices=DTYPES, help="matmul dtype (default: fp32)")
    p.add_argument("--refresh", action="store_true", help="re-measure even if a cached figure exists")
    p.set_defaults(func=_peak)
    register_throughput(verbs)
    register_loop(verbs)


def register_loop(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "loop",
        help="What the training loop costs beyond the bare step (samples/s, MFU, start-up).",
        description="Time a bare step, `prism train` on the same shapes, and the bare step again; print "
        "loop/bare samples/s, the loop's MFU against the measured peak and a fresh process's start-up "
        "(prism.bench.loop). A figure for docs/measurements.md: it depends on the machine.",
    )
    p.add_argument("--data", required=True, help="shard directory (prism data build --family F)")
    p.add_argument("--family", default="text_image", help="modality family (default text_image)")
    p.add_argument("--backbone", default="3m", help="backbone size (default 3m)")
    p.add_argument("--variant", default="BASE", help="projector variant (default BASE)")
    p.add_argument("--regime", default="e2e", help="training regime (default e2e)")
    p.add_argument("--global-batch", type=int, default=32, help="samples a step (default 32)")
    p.add_argument("--steps", type=int, default=60, help="timed steps each side (default 60)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.set_defaults(func=_loop)


def _loop(args: argparse.Namespace) -> int:
    from prism.bench.loop import report_loop

    report_loop(
        args.data, args.family, args.backbone, args.variant, args.regime, args.global_batch, args.steps, args.threads
    )
    return 0


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _throughput(args: argparse.Namespace) -> int:
    from prism.runtime.host import tune_host

    tune_host()  # the process settings `prism train` runs with, so the figures compare
    from prism.bench.benchconfig import BenchConfig
    from prism.bench.throughput import format_table, run

    cfg = BenchConfig(
        test=args.test,
        model=args.model,
        seq_len=args.seq_len,
        family=args.family,
        variant=args.variant,
        regime=args.regime,
        batch=args.batch,
        batch_sizes=args.batch_sizes,
        device=args.device,
        dtype=args.dtype,
        warmup=args.warmup,
        repeats=args.repeats,
        procs=args.procs,
        compile=args.compile,
        threads=args.threads,
        data=args.data,
        out=args.out,
    )
    rows = run(cfg)
    print(format_table(rows))
    if args.out:
        print(f"appended {len(rows)} row(s) to {args.out}")
    return 0


def register_throughput(verbs: argparse._SubParsersAction) -> None:
    from prism.bench.benchconfig import DATA_TESTS, DEFAULT_BATCH_SIZES, TESTS
    from prism.train.config import COMPILE_MODES

    p = verbs.add_parser(
        "throughput",
        help="Throughput micro-benchmarks (samples/s, tokens/s, MFU) of one model.",
        description="Time forward, training, batch scaling, sync and DDP overhead of one PRISM "
        "model; medians after warm-up, MFU against `prism bench peak`.",
    )
    p.add_argument(
        "--test",
        required=True,
        choices=[*TESTS, *DATA_TESTS, "all"],
        help="all = every test but packing (which needs --data)",
    )
    p.add_argument("--model", required=True, help="backbone name (prism model list), e.g. 30k, 3m, 1b")
    p.add_argument("--seq-len", type=int, required=True, help="tokens per row")
    p.add_argument("--family", default="text_image", help="modality family (default text_image)")
    p.add_argument("--variant", default="BASE", help="projector variant (default BASE)")
    p.add_argument("--regime", default="e2e", help="which parts train (default e2e)")
    p.add_argument("--batch", type=int, default=16, help="rows per step for the single-batch tests (default 16)")
    p.add_argument(
        "--batch-sizes",
        type=_ints,
        default=DEFAULT_BATCH_SIZES,
        help="batch_scaling sizes, comma-separated (default 1,2,4,...,64)",
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda, xpu or auto (default cpu)")
    p.add_argument(
        "--dtype",
        default="fp32",
        choices=DTYPES,
        help="fp32, or autocast to bf16/fp16 (MFU is then against that dtype's peak)",
    )
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before timing (default 3)")
    p.add_argument("--repeats", type=int, default=10, help="timed steps per measurement (default 10)")
    p.add_argument("--procs", type=int, default=2, help="processes for ddp_overhead (default 2)")
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads (default: all cores); MFU is against the peak measured with the same thread count",
    )
    p.add_argument(
        "--compile",
        nargs="?",
        const="static",
        default="none",
        choices=COMPILE_MODES,
        help="torch.compile the model first, in `prism train --compile`'s modes (alone: static; default none; "
        "auto: static on cuda/xpu, none on a CPU); fuses element-wise ops, compiling takes a minute on a CPU",
    )
    p.add_argument("--data", help="shard directory of --family (prism data build) for --test packing")
    p.add_argument("--out", help="append the rows to this JSON-lines file (e.g. perf.jsonl)")
    p.set_defaults(func=_throughput)
