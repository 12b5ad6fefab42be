"""`prism cluster check`: prove a site's installation before a study is submitted; `prism cluster probe`:
measure one of its jobs before the grid is spent."""

from __future__ import annotations

import argparse
import json


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    p = verbs.add_parser(
        "check",
        help="Check a cluster study's environment: account and queue (or Slurm partitions), shards, batch vs ranks, "
        "torch, collectives.",
        description=(
            "Run on a compute node (e.g. in `qsub -I`, or `srun --gres=gpu:2 --pty` under Slurm) before submitting "
            "a study: one line per check, exit 1 if any fails. The collective check starts --ranks processes on "
            "this node and all-reduces over the device's backend (gloo, nccl, xccl)."
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
    p.add_argument(
        "--profile",
        metavar="PROFILE",
        help="the study's Snakemake profile: one whose executor is slurm (profiles/slurm) checks the partitions "
        "(scontrol), their GPUs, this node's CUDA devices and NCCL; so does train.launcher slurm",
    )
    p.set_defaults(func=_check)
    _register_probe(verbs)


def _register_probe(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "probe",
        help="Run the real job body for a few minutes (eager, compiled, SIGTERM, resume) and record what it took.",
        description=(
            "Inside a cluster job (the workflow's probe rules: snakemake probe_FAMILY): renders the aurora body "
            "of the study's largest size that fits a node, runs it eager and compiled for --seconds of steps "
            "each, stops each with SIGTERM (it checkpoints), and writes a JSON record; `--part resume` resumes "
            "the eager run in a second job, runs each --packed size as a pack's one-tile run (all at once), and "
            "completes the record the plan prices the study from."
        ),
    )
    p.add_argument("--part", choices=("first", "resume"), required=True)
    for flag in ("family", "backbone", "regime", "data", "calibration-dir", "device", "strategy", "storage", "folder"):
        p.add_argument(f"--{flag}", required=True)
    p.add_argument("--global-batch", type=int, required=True)
    p.add_argument("--procs-per-node", type=int, required=True)
    p.add_argument("--seconds", type=float, default=120.0, help="seconds of steps per body (default: 120)")
    p.add_argument("--workers", type=int, default=2, help="the streamed loader's workers per rank")
    p.add_argument("--precision", default="auto", help="the runs' precision (train.precision)")
    p.add_argument(
        "--walltime-s", type=float, help="the job's walltime in seconds: every body ends before it, the record written"
    )
    p.add_argument("--why", default="", help="why this size: the workflow's words (the record keeps them)")
    p.add_argument(
        "--packed",
        action="append",
        default=[],
        metavar="BACKBONE:MICRO_BATCH",
        help="--part resume: also run this size as a pack's one-tile run at this micro-batch (all at once, each on "
        "a slot of the node); the workflow gives the study's smallest and largest one-tile sizes",
    )
    p.add_argument(
        "--spread",
        type=int,
        default=1,
        metavar="K",
        help="--part resume: also run the last --packed size spread over K slots of the node (one K-rank run of "
        "--strategy), beside its one-tile run, to measure what spreading a pack's run gains (1: not)",
    )
    p.add_argument("--first", help="--part resume: the first part's record")
    p.add_argument("--out", required=True, help="the record (JSON) to write")
    p.set_defaults(func=_probe)


def _packed(text: str) -> tuple[str, int]:
    from prism.core.errors import PrismError

    backbone, _, micro = text.rpartition(":")
    if not backbone or not micro.isdigit() or int(micro) < 1:
        raise PrismError(f"--packed {text}: give BACKBONE:MICRO_BATCH, e.g. g35e5:384")
    return backbone, int(micro)


def _probe(args: argparse.Namespace) -> int:
    from pathlib import Path

    from prism.core.errors import PrismError
    from prism.launch.probe import Probe, probe_first, probe_resume

    probe = Probe(args.family, args.backbone, args.regime, args.data, args.calibration_dir, args.global_batch,
                  args.device, args.strategy, args.procs_per_node, args.storage, args.seconds, args.folder,
                  workers=args.workers, precision=args.precision, why=args.why, walltime_s=args.walltime_s,
                  packed=tuple(_packed(text) for text in args.packed), spread=args.spread)  # fmt: skip
    if args.part == "first":
        record = probe_first(probe, Path(args.out))
    elif not args.first:
        raise PrismError("prism cluster probe --part resume needs --first (the first part's record)")
    else:
        record = probe_resume(probe, Path(args.first), Path(args.out))
    print(json.dumps(record, indent=1, sort_keys=True))
    return 0


def _check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from prism.core.errors import PrismError
    from prism.launch.sitecheck import load_study_config, run_checks

    if args.ranks < 1:
        raise PrismError(f"--ranks must be at least 1, got {args.ranks}")
    config = load_study_config(args.configfile, args.default_config)
    schema = Path(args.default_config).parent / "schema.yaml"
    return 0 if run_checks(config, args.device, args.ranks, schema, profile=args.profile) else 1
