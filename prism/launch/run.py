"""Run one training job from this process: in it (`local`), or as its torchrun parent (`torchrun`).

`prism train` comes here with its launch flags; an `aurora` job body is only
printed (`--dry-run`) and submitted by the workflow or `prism isoflop launch`.
"""

from __future__ import annotations

import os

from prism.core.errors import PrismError
from prism.launch import checked
from prism.launch.base import Launcher
from prism.train.config import RunConfig


def launch(
    run: RunConfig,
    launcher: str = "local",
    nodes: int = 1,
    procs_per_node: int | None = None,
    storage: str = "local",
    dry_run: bool = False,
    restore: bool = False,
) -> int:
    """`dry_run` prints the launcher's command; `torchrun` re-executes under torchrun; `local` trains
    here. Returns the exit status (non-zero for a collapsed or stopped run). `restore` first puts back an
    unchanged finished run's records here (`restore_finished`)."""
    chosen = checked(launcher, nodes, procs_per_node, storage)
    if restore:
        restore_finished(run, chosen, nodes, procs_per_node)
    if dry_run:
        text = chosen.render(run, nodes, procs_per_node, storage)
        print(text, end="" if text.endswith("\n") else "\n")  # a job body ends with its newline, a command not
        return 0
    if chosen.submitted:
        raise PrismError(
            f"{chosen.job_body} is submitted with {chosen.submit}, not run here; print it with --dry-run "
            "(or let the workflow submit it)"
        )
    argv = chosen.command(run, nodes, procs_per_node)
    if not chosen.single_process:  # its processes' parent (torchrun) replaces this process
        os.execv(argv[0], argv)
    # Imported here: torch's import is most of a dry run's start-up, which the workflow pays per job.
    from prism.train.lifecycle import exit_code, train  # noqa: PLC0415 lazy: torch

    return exit_code(train(run))


def restore_finished(run: RunConfig, launcher: Launcher, nodes: int, procs_per_node: int | None) -> bool:
    """Put back a finished run's records, unchanged inputs and settings, before anything is launched for it
    (prism.train.lifecycle.restore_only): whether it is finished. Only where its world size is known here (its
    streamed data order depends on it) and it ever finished; torch is imported only then."""
    from prism.train.rundir.finished import record_path  # noqa: PLC0415 lazy: the run's records

    world = 1 if launcher.single_process else nodes * procs_per_node if procs_per_node else None
    if world is None or not record_path(run.out_dir).is_file():
        return False
    from prism.train.lifecycle import restore_only  # noqa: PLC0415 lazy: torch

    return restore_only(run, world)
