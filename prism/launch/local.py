"""`local`: one process on this machine."""

from __future__ import annotations

import sys

from prism.core.errors import PrismError
from prism.launch.base import Launcher
from prism.launch.command import join, train_args
from prism.train.config import RunConfig


def render_local(run: RunConfig, nodes: int = 1, procs_per_node: int | None = None) -> str:
    if nodes != 1 or (procs_per_node or 1) != 1:
        raise PrismError(
            "launcher local runs one process; use --launcher torchrun (one node) or aurora (several nodes)"
        )
    return join(["prism", *train_args(run)])


class Local(Launcher):
    """`prism train` in this process."""

    name = "local"
    procs_per_node = 1
    single_process = True

    def render(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None, storage: str = "local") -> str:
        return render_local(run, nodes, procs_per_node)

    def command(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None) -> list[str]:
        render_local(run, nodes, procs_per_node)  # the same checks as the rendered text
        return [sys.executable, "-m", "prism", *train_args(run)]


LOCAL = Local()
