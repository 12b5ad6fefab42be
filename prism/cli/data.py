"""`prism data build|index|verify|bench`."""

from __future__ import annotations

import argparse
import os

from prism.cli.spec import add_spec_arguments, spec_from_args
from prism.core.families import FAMILIES
from prism.data.index import EVAL_FRACTION, MAX_BAD_FRACTION
from prism.data.options import DECODED_MAX_MB


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    for add in (_add_build, _add_index, _add_verify, _add_bench):
        add(verbs)


def _add_build(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("build", help="Write train/eval webdataset shards and manifest.json for a family.")
    p.add_argument("--family", required=True, choices=sorted(FAMILIES))
    p.add_argument("--out", required=True, help="shard directory to create (built beside it, renamed at the end)")
    p.add_argument("--seed", type=int, default=0, help="decides the split, the sample order and generated data")
    p.add_argument("--overwrite", action="store_true", help="replace an existing shard directory")
    p.add_argument(
        "--lm-ratio",
        type=float,
        default=0.0,
        help="share of the train split that is text-only Python documentation (default 0)",
    )
    add_spec_arguments(p)
    p.set_defaults(func=_build)


def _add_index(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("index", help="Index your own webdataset shards (read where they lie) into a manifest.")
    p.add_argument(
        "shards", metavar="DIR", help="absolute folder of .tar shards, or of train/ and eval/ folders of them"
    )
    p.add_argument("--family", required=True, choices=sorted(FAMILIES))
    p.add_argument("--out", required=True, help="index directory to create (manifest.json and the decoded copy)")
    p.add_argument(
        "--eval-fraction",
        type=float,
        default=EVAL_FRACTION,
        help=f"share of the keys held out, by key hash, when DIR has no train/ and eval/ folders "
        f"(default {EVAL_FRACTION})",
    )
    p.add_argument(
        "--max-bad-fraction",
        type=float,
        default=MAX_BAD_FRACTION,
        help=f"refuse when more than this share of the samples is bad or lost (default {MAX_BAD_FRACTION})",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing index directory")
    p.add_argument(
        "--new-spec",
        action="store_true",
        help="with --overwrite: replace an index made at another family, shape or tokenizer (else refused)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=int(os.environ.get("PRISM_INDEX_JOBS") or 1),
        help="processes decoding shards at once; the index is the same (default $PRISM_INDEX_JOBS or 1)",
    )
    p.add_argument(
        "--decoded-max-mb",
        type=float,
        default=DECODED_MAX_MB,
        metavar="MB",
        help="keep a decoded copy (what a preloaded run reads) only of a split up to this decoded size; a larger "
        f"one streams from its shards (default {DECODED_MAX_MB}, as data.preload_max_mb)",
    )
    add_spec_arguments(p)
    p.set_defaults(func=_index)


def _add_verify(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("verify", help="Check every shard's sha256 and sample count against manifest.json.")
    p.add_argument("data_dir", metavar="DIR", help="a built shard directory or an index (or its manifest.json)")
    p.set_defaults(func=_verify)


def _add_bench(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "bench",
        help="Loader samples/s on one core (--stream: per streaming worker, and the workers a step needs).",
    )
    p.add_argument("--data", required=True, metavar="DIR")
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--seconds", type=float, default=2.0, help="length of each timed window")
    p.add_argument("--repeats", type=int, default=5, help="timed windows; the median is reported")
    p.add_argument("--layout", choices=("padded", "packed"), default="padded")
    p.add_argument("--seq-len", type=int, default=None, help="row length (default: one padded sample)")
    stream = p.add_argument_group("streaming (data.loader: stream)")
    stream.add_argument(
        "--stream", action="store_true", help="time one streaming worker: read, decode, resize, tokenize"
    )
    stream.add_argument("--batches", type=int, default=10, help="batches per timed window (default 10)")
    stream.add_argument(
        "--shape",
        type=_shape,
        default=None,
        metavar="C,H,W",
        help="decode at this shape, e.g. 3,224,224 (default: the data's)",
    )
    rate = stream.add_mutually_exclusive_group()
    rate.add_argument(
        "--step-samples-per-s", type=float, default=None, metavar="R", help="a training step's samples/s per rank"
    )
    rate.add_argument(
        "--throughput",
        default=None,
        metavar="FILE",
        help="`prism bench throughput --out FILE`: its fastest fwd_bwd/batch_scaling samples/s is the step's",
    )
    p.set_defaults(func=_bench)


def _build(args: argparse.Namespace) -> int:
    import time

    from prism.data.shards import build

    start = time.perf_counter()
    spec = spec_from_args(args.family, args)
    m = build(args.family, args.out, seed=args.seed, overwrite=args.overwrite, lm_ratio=args.lm_ratio, spec=spec)
    counts = ", ".join(f"{s} {v['samples']} samples in {len(v['shards'])} shards" for s, v in m["splits"].items())
    print(
        f"{args.out}: {m['family']} {counts}; captions truncated {m['captions_truncated']}; "
        f"{time.perf_counter() - start:.1f}s"
    )
    return 0


def _index(args: argparse.Namespace) -> int:
    import time

    from prism.data.index import broken_shards, lost_samples
    from prism.data.indexer import index

    start = time.perf_counter()
    spec = spec_from_args(args.family, args)
    m = index(
        args.shards,
        args.family,
        args.out,
        eval_fraction=args.eval_fraction,
        max_bad_fraction=args.max_bad_fraction,
        overwrite=args.overwrite,
        jobs=args.jobs,
        decoded_max_mb=args.decoded_max_mb,
        spec=spec,
        new_spec=args.new_spec,
    )
    counts = ", ".join(
        f"{s} {v['samples']} samples ({v['tokens']} tokens) in {len(v['shards'])} shards"
        + ("" if v.get("decoded", True) else ", streamed (no decoded copy)")
        for s, v in m["splits"].items()
    )
    broken = broken_shards(m)
    lost = (
        f"{len(broken)} broken shards ({', '.join(broken[:3])}{', ...' if len(broken) > 3 else ''}: see the "
        f"warnings), {lost_samples(m) - len(m['bad_samples'])} samples lost with them; "
        if broken
        else ""
    )
    print(
        f"{args.out}: {m['family']} from {m['shards_dir']}: {counts}; {len(m['bad_samples'])} bad samples "
        f"skipped; {lost}{time.perf_counter() - start:.1f}s"
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from prism.core.studylayout import MANIFEST
    from prism.data.manifest import verify

    if Path(args.data_dir).name == MANIFEST:
        args.data_dir = str(Path(args.data_dir).parent)
    s = verify(args.data_dir)
    print(
        f"{args.data_dir}: ok, {s['family']}, train {s['train']['samples']} samples / {s['train']['shards']} "
        f"shards, eval {s['eval']['samples']} samples / {s['eval']['shards']} shards"
        + (f"; LM text {s['lm_text']}" if "lm_text" in s else "")
        + (f"; shards in {s['shards_dir']}, {s['bad']} bad samples skipped" if "shards_dir" in s else "")
    )
    return 0


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected C,H,W as integers, got {text!r}") from None
    if not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected positive sizes, got {text!r}")
    return shape


def _bench(args: argparse.Namespace) -> int:
    from prism.bench.loader import bench, bench_stream, format_result, step_rate

    if args.stream:
        rate = step_rate(args.throughput) if args.throughput else args.step_samples_per_s
        result = bench_stream(args.data, args.global_batch, args.batches, args.repeats, args.shape, rate)
        print(format_result(result))
        return 0
    print(format_result(bench(args.data, args.global_batch, args.seconds, args.repeats, args.layout, args.seq_len)))
    return 0
