"""`prism cluster check`: prove a site's installation before a study is submitted."""

from __future__ import annotations

import argparse


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    p = verbs.add_parser(
        "check",
        help="Check a cluster study's environment: account and queue, shards, batch vs ranks, torch, collectives.",
        description=(
            "Run on a compute node (e.g. in `qsub -I`) before submitting a study: one line per check, "
            "exit 1 if any fails. The collective check starts --ranks processes on this node and all-reduces "
            "over the device's backend (gloo, nccl, xccl)."
        ),
    )
    p.add_argument("--configfile", required=True, metavar="CONFIG", help="the study config, e.g. config/aurora.yaml")
    p.add_argument(
        "--default-config",
        default="config/config.yaml",
        metavar="CONFIG",
        help="the config it overrides, as Snakemake merges them (default: config/config.yaml)",
    )
    p.add_argument("--device", choices=("cpu", "cuda", "xpu"), help="default: the config's train.device")
    p.add_argument("--ranks", type=int, default=2, metavar="N", help="processes of the collective check (default: 2)")
    p.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from prism.errors import PrismError
    from prism.launch.sitecheck import load_study_config, run_checks

    if args.ranks < 1:
        raise PrismError(f"--ranks must be at least 1, got {args.ranks}")
    config = load_study_config(args.configfile, args.default_config)
    schema = Path(args.default_config).parent / "schema.yaml"
    return 0 if run_checks(config, args.device, args.ranks, schema) else 1
