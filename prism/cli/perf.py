"""`prism perf ...`."""

from __future__ import annotations

import argparse


def _aggregate(args: argparse.Namespace) -> int:
    from prism.perf.aggregate import aggregate

    result = aggregate(
        args.sweep_dir,
        args.out,
        filters=args.filter,
        per_modality=args.per_modality,
        warmup_fraction=args.warmup_fraction,
    )
    print(result.md_path.read_text(), end="")
    print(f"wrote {result.csv_path}, {result.md_path}" + (f", {result.png_path}" if result.png_path else ""))
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    p = verbs.add_parser(
        "aggregate",
        help="Every perf.jsonl under a directory -> CSV, Markdown, PNG.",
        description="Summarise every perf.jsonl under --sweep-dir (steady-state medians) into "
        "one CSV row per run (or per preset), with OUT.md and OUT.png beside it.",
    )
    p.add_argument("--sweep-dir", required=True, help="root directory scanned for perf.jsonl files")
    p.add_argument("--out", required=True, help="CSV to write; the Markdown (.md) and chart (.png) go beside it")
    p.add_argument(
        "--filter",
        action="append",
        metavar="KEY=VALUE",
        help="keep runs whose column KEY equals VALUE (repeatable; a repeated KEY means any of them)",
    )
    p.add_argument("--per-modality", action="store_true", help="one row per preset (padded and packed side by side)")
    p.add_argument(
        "--warmup-fraction",
        type=float,
        default=0.2,
        help="fraction of each run's logged steps dropped as warm-up (default 0.2)",
    )
    p.set_defaults(func=_aggregate)
