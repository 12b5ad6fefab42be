"""`prism <group> <verb>`: parse flags, call one library function.

Each group lives in its own module with a `register(subparsers)` function; the
handlers import the library lazily so that `prism --help` and small commands
start fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from prism.errors import PrismError

GROUPS: dict[str, str] = {
    "model": "Model registry: backbones, projector variants, families, regimes.",
    "data": "Build, verify and benchmark webdataset shards.",
    "train": "Train one run to a FLOP budget.",
    "isoflop": "IsoFLOP study: calibrate, plan, launch, collect, fit, plot.",
    "bench": "Micro-benchmarks: device peak, throughput.",
    "sweep": "Per-modality throughput sweep.",
    "perf": "Aggregate perf.jsonl files into tables and charts.",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prism", description=__doc__.splitlines()[0])
    groups = parser.add_subparsers(dest="group", required=True, metavar="GROUP")
    for name, help_text in GROUPS.items():
        group = groups.add_parser(name, help=help_text, description=help_text)
        verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")
        importlib.import_module(f"prism.cli.{name}").register(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PrismError as err:
        print(f"prism {args.group} {args.verb}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"prism {args.group} {args.verb}: interrupted", file=sys.stderr)
        return 130
