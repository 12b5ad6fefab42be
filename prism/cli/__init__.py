"""`prism <group> <verb>`: parse flags, call one library function.

Each group lives in its own module with a `register(subparsers)` function; the
handlers import the library lazily so that `prism --help` and small commands
start fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from prism.core.errors import PrismError

GROUPS: dict[str, str] = {
    "model": "Model registry: backbones, projector variants, families, regimes.",
    "data": "Build, verify and benchmark webdataset shards.",
    "train": "Train one run to a FLOP budget.",
    "isoflop": "IsoFLOP study: calibrate, plan, launch, collect, fit, plot.",
    "bench": "Micro-benchmarks: device peak, throughput.",
    "sweep": "Per-modality throughput sweep.",
    "perf": "Aggregate perf.jsonl files into tables and charts.",
    "cluster": "Check a cluster site before submitting a study to it.",
    "worker": "Fork server: a local study's commands start without importing torch each time.",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prism", description=__doc__.splitlines()[0])
    groups = parser.add_subparsers(dest="group", required=True, metavar="GROUP")
    for name, help_text in GROUPS.items():
        group = groups.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(f"prism.cli.{name}")
        if hasattr(module, "configure"):  # a group that is its own verb: `prism train --flags`
            module.configure(group)
            continue
        verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")
        module.register(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the `prism` command itself: a worker of this study may run it (prism.workflow.worker)
        from prism.workflow.worker import run

        status = run(sys.argv[1:])
        if status is not None:
            return status
    args = build_parser().parse_args(argv)
    command = " ".join(str(part) for part in (args.group, getattr(args, "verb", None)) if part)
    try:
        return int(args.func(args) or 0)
    except PrismError as err:
        return _error(command, str(err))
    except OSError as err:  # a full disk anywhere (a log, a shard, a cache): one line, not a traceback
        from prism.core.atomic import disk_full, is_disk_full

        if not is_disk_full(err):
            raise
        return _error(command, str(disk_full(err.filename or "an output file")))
    except KeyboardInterrupt:
        print(f"prism {command}: interrupted", file=sys.stderr)
        return 130


def _error(command: str, message: str) -> int:
    """Print the one-line error (even where stderr's own disk is full: then only the status says it)."""
    try:
        print(f"prism {command}: error: {message}", file=sys.stderr, flush=True)
    except OSError:
        pass
    return 2
