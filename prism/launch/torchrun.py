"""`torchrun`: N processes on this node (`--standalone` picks a free rendezvous port)."""

from __future__ import annotations

import sys

from prism.core.errors import PrismError
from prism.data.batching import check_batch
from prism.launch.base import Launcher
from prism.launch.command import join, train_args
from prism.train.config import RunConfig


def torchrun_args(run: RunConfig, nodes: int = 1, procs_per_node: int | None = None) -> list[str]:
    """torchrun's arguments (after the program name) that start the run's processes."""
    if nodes != 1:
        raise PrismError("launcher torchrun renders one node; for several nodes use --launcher aurora")
    if procs_per_node is not None and procs_per_node > 1 and run.strategy == "none":
        raise PrismError(
            f"{procs_per_node} processes with --strategy none would train separate "
            "copies; choose --strategy ddp, fsdp or hsdp"
        )
    if procs_per_node is not None:
        check_batch(
            run.global_batch, procs_per_node, "--global-batch", f"this job (1 node x {procs_per_node} processes)"
        )
    # `auto`: one process per GPU when there are GPUs, else one per CPU core.
    nproc = str(procs_per_node) if procs_per_node is not None else "auto"
    return ["--standalone", "--nproc-per-node", nproc, "-m", "prism", *train_args(run)]


def render_torchrun(run: RunConfig, nodes: int = 1, procs_per_node: int | None = None) -> str:
    return join(["torchrun", *torchrun_args(run, nodes, procs_per_node)])


class Torchrun(Launcher):
    """`torchrun --standalone`: the node's processes, their count `--procs-per-node` or torchrun's `auto`."""

    name = "torchrun"

    def render(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None, storage: str = "local") -> str:
        return render_torchrun(run, nodes, procs_per_node)

    def command(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None) -> list[str]:
        return [sys.executable, "-m", "torch.distributed.run", *torchrun_args(run, nodes, procs_per_node)]


TORCHRUN = Torchrun()
