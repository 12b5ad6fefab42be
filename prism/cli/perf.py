"""`prism perf ...`."""

from __future__ import annotations

import argparse
import shlex

from prism.cli.renamed import add_renamed


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
    add_renamed(p, "--sweep-dir", "--outputs", required=True, help="root directory scanned for perf.jsonl files")
    add_renamed(
        p, "--out", "--csv", required=True, help="CSV to write; the Markdown (.md) and chart (.png) go beside it"
    )
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
    _register_report(verbs)


def _report(args: argparse.Namespace) -> int:
    from prism.perf.report import write_report
    from prism.sweep.presets import split_names

    words = ["prism", "perf", "report", "--sweep-dir", args.sweep_dir, "--out", args.out]
    words += ["--presets", args.presets] if args.presets else []
    words += ["--note", args.note] if args.note else []
    md, png = write_report(
        args.sweep_dir, args.out, shlex.join(words), split_names(args.presets) if args.presets else None, args.note
    )
    print(md.read_text(), end="")
    print(f"wrote {md}" + (f" and {png}" if png else ""))
    return 0


def _register_report(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "report",
        help="A per-modality sweep -> a results document (Markdown and chart) with its commands, machine and date.",
        description="Summarise every run under --sweep-dir per preset (padded and packed side by side: "
        "samples/s, tokens/s, MFU, packing speed-up, the spread over repeats) into OUT, a Markdown document "
        "that names the sweep commands, the machine and the dates, and OUT's .png beside it.",
    )
    p.add_argument(
        "--sweep-dir", required=True, help="root scanned for perf.jsonl and status.json (repeats: their parent)"
    )
    p.add_argument("--out", required=True, help="Markdown to write, e.g. docs/results/per_modality_sweep.md")
    p.add_argument("--presets", help="comma-separated presets in table order, each one required (default: all)")
    p.add_argument("--note", default="", help="a paragraph under the header, e.g. how loaded the host was")
    p.set_defaults(func=_report)
