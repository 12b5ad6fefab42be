"""Render, and run, the command (or PBS job body) of one training job.

`render(launcher, run, nodes, procs_per_node, storage) -> str`, the text that runs it:
- `local`: `prism train ...` in one process;
- `torchrun`: `torchrun --standalone --nproc-per-node N -m prism train ...` (one node);
- `aurora`: a PBS job body for ALCF Aurora (see `prism.launch.aurora`).
`command(launcher, run, nodes, procs_per_node) -> list[str]`: the same command as an
argv that this Python runs directly (`sys.executable -m ...`, so it works without the
venv's bin/ on PATH). Every value is shell-quoted; the rendered text is exactly what runs.
Each launcher is a `prism.launch.base.Launcher`, registered by name in `prism.launch.registry`.
`LauncherName`: a `--launcher` flag that takes these names and refuses a script in one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

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


class LauncherName(argparse.Action):
    """A `--launcher` flag: a launcher by name; a script path (what the old launch tool took) is refused in
    one line that says what to give instead."""

    def __init__(self, option_strings: Sequence[str], dest: str, names: Sequence[str] = LAUNCHERS, **kwargs) -> None:
        self.names = tuple(names)
        super().__init__(option_strings, dest, metavar="{" + ",".join(self.names) + "}", **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if values not in self.names:
            choices = ", ".join(self.names)
            if "/" in values or values.endswith((".sh", ".py", ".pbs")):
                why = (
                    f"takes a launcher name ({choices}), not a script ({values}): prism writes the command "
                    "or job body itself; `--dry-run` prints it, and a site of its own adapts prism/launch/"
                )
            else:
                why = f"{values!r} is not a launcher; choose one of {choices}"
            parser.exit(2, f"{parser.prog}: error: {option_string} {why}\n")
        setattr(namespace, self.dest, values)
