"""`local`: one process on this machine."""

from __future__ import annotations

from prism.core.errors import PrismError
from prism.launch.command import join, train_args
from prism.train.config import RunConfig


def render_local(run: RunConfig, nodes: int = 1, procs_per_node: int | None = None) -> str:
    if nodes != 1 or (procs_per_node or 1) != 1:
        raise PrismError(
            "launcher local runs one process; use --launcher torchrun (one node) or aurora (several nodes)"
        )
    return join(["prism", *train_args(run)])
