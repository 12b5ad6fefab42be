"""Render, and run, the command (or PBS job body) of one training job.

`render(launcher, run, nodes, procs_per_node, storage) -> str`, the text that runs it:
- `local`: `prism train ...` in one process;
- `torchrun`: `torchrun --standalone --nproc-per-node N -m prism train ...` (one node);
- `aurora`: a PBS job body for ALCF Aurora (see `prism.launch.aurora`).
`command(launcher, run, nodes, procs_per_node) -> list[str]`: the same command as an
argv that this Python runs directly (`sys.executable -m ...`, so it works without the
venv's bin/ on PATH). Every value is shell-quoted; the rendered text is exactly what runs.
Each launcher is a `prism.launch.base.Launcher`, registered by name in `prism.launch.registry`.
"""

from __future__ import annotations

from prism.core.errors import PrismError, check_name
from prism.launch.base import Launcher
from prism.launch.registry import get
from prism.train.config import RunConfig
from prism.train.options import LAUNCHERS, STORAGES

__all__ = ["LAUNCHERS", "STORAGES", "checked", "command", "render"]


def checked(name: str, nodes: int = 1, procs_per_node: int | None = None, storage: str = "local") -> Launcher:
    """The launcher `name` (an unknown one is an error naming the known ones), its job's counts and storage
    checked."""
    found = get(name)
    check_name("storage", storage, STORAGES)
    if nodes < 1:
        raise PrismError(f"--nodes must be at least 1, got {nodes}")
    if procs_per_node is not None and procs_per_node < 1:
        raise PrismError(f"--procs-per-node must be at least 1, got {procs_per_node}")
    return found


def render(
    launcher: str, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None, storage: str = "local"
) -> str:
    return checked(launcher, nodes, procs_per_node, storage).render(run, nodes, procs_per_node, storage)


def command(launcher: str, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None) -> list[str]:
    """The argv that runs the job from this interpreter (`local`, `torchrun`; an aurora body is submitted)."""
    return checked(launcher, nodes, procs_per_node).command(run, nodes, procs_per_node)
