"""Render the command (or PBS job body) that runs one training job.

`render(launcher, run, nodes, procs_per_node, storage)`:
- `local`: `prism train ...` in this process;
- `torchrun`: `torchrun --standalone --nproc-per-node N -m prism train ...` (one node);
- `aurora`: a PBS job body for ALCF Aurora (see `prism.launch.aurora`).
Every value is shell-quoted; the rendered text is exactly what runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prism.errors import PrismError, check_name

if TYPE_CHECKING:
    from prism.train.config import RunConfig

LAUNCHERS = ("local", "torchrun", "aurora")
STORAGES = ("local", "lustre", "daos")


def render(launcher: str, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None,
           storage: str = "local") -> str:
    check_name("launcher", launcher, LAUNCHERS)
    check_name("storage", storage, STORAGES)
    if nodes < 1:
        raise PrismError(f"--nodes must be at least 1, got {nodes}")
    if procs_per_node is not None and procs_per_node < 1:
        raise PrismError(f"--procs-per-node must be at least 1, got {procs_per_node}")
    if launcher == "local":
        from prism.launch.local import render_local

        return render_local(run, nodes, procs_per_node)
    if launcher == "torchrun":
        from prism.launch.torchrun import render_torchrun

        return render_torchrun(run, nodes, procs_per_node)
    from prism.launch.aurora import render_aurora

    return render_aurora(run, nodes, procs_per_node, storage)
