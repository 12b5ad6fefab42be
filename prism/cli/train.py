"""`prism train --family F --backbone B ... --out RUNDIR`: one training run (no verb).

The flags are generated from `prism.train.config.RunConfig`, so a run config file
(`--config RUN.yaml`) and the command line say the same things; flags given here
override the file. The settings a study's runs share (seed, schedule, evaluation, device,
launcher, ...) are defined once, in `prism.train.options.TrainOptions`.
"""

from __future__ import annotations

import argparse
import re

# argparse reads `--budget -1e10` as a flag followed by an option (its own negative-number test
# knows no exponents), so the user got "expected one argument" instead of "a budget must be positive".
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

LAUNCH_KEYS = ("launcher", "nodes", "procs_per_node", "storage", "dry_run", "restore")


def _train(args: argparse.Namespace) -> int:
    from prism.runtime.host import tune_host

    tune_host()  # before torch is imported: process settings that only take effect then
    # Imported here, after tune_host (they import torch when training starts).
    from prism.launch.run import launch
    from prism.train.config import merge

    flags = {k: v for k, v in vars(args).items() if k not in ("func", "group", "verb")}
    launch_flags = {k: flags.pop(k) for k in LAUNCH_KEYS}
    # Invocation options, not settings of the run: they reach every process (torchrun, a PBS job's
    # mpiexec) through the environment (prism.train.rundir.finished, prism.train.rundir.lock read them).
    import os

    if flags.pop("retrain", None):
        os.environ["PRISM_RETRAIN"] = "1"
    if flags.pop("wait_lock", None):
        os.environ["PRISM_LOCK_WAIT"] = "1"
    run = merge(flags.pop("config"), flags)
    return launch(run, **launch_flags)


def configure(parser: argparse.ArgumentParser) -> None:
    """`prism train` is a group without verbs: its flags live on the group's parser."""
    from prism.core.options import add_arguments
    from prism.launch import registry  # noqa: F401 - registers the launchers, `--launcher`'s choices
    from prism.train.config import RunConfig
    from prism.train.options import LAUNCH_SETTINGS, TrainOptions

    parser.description = (
        "Train one run to a FLOP budget; rerunning the same command resumes from the last "
        "checkpoint, and does nothing once metrics.json exists."
    )
    parser.add_argument("--config", metavar="RUN.yaml", help="run config file (same keys as these flags)")
    add_arguments(parser, RunConfig, unset=True)
    launch = parser.add_argument_group("launching (not part of the run config)")
    add_arguments(launch, TrainOptions, LAUNCH_SETTINGS)
    launch.add_argument("--nodes", type=int, default=1, metavar="N", help="nodes (aurora)")
    launch.add_argument(
        "--procs-per-node",
        type=int,
        default=None,
        metavar="N",
        help="processes per node (torchrun default auto; aurora default 12)",
    )
    launch.add_argument("--dry-run", action="store_true", help="print the exact command or job body and exit")
    launch.add_argument(
        "--restore",
        action="store_true",
        help="first put back a finished run's metrics.json (and kept checkpoints) from final/ when its inputs and "
        "settings are unchanged, before launching anything (with --dry-run: the workflow's job then launches no "
        "body, and a packed run holds no device, for a run that trains nothing)",
    )
    launch.add_argument(
        "--retrain",
        action="store_true",
        default=None,
        help="train a finished run again from scratch (otherwise a finished run is kept, and an "
        "unchanged one whose metrics.json was deleted is restored); also PRISM_RETRAIN=1",
    )
    launch.add_argument(
        "--wait-lock",
        action="store_true",
        default=None,
        help="wait for another trainer of the same run directory to end instead of exiting; also PRISM_LOCK_WAIT=1",
    )
    parser._negative_number_matcher = NEGATIVE_NUMBER  # values like -1e10 are values, not flags
    parser.set_defaults(func=_train)
