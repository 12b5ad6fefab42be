"""What `prism train` does with its flags: render a launch command, or train here."""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any

from prism.errors import PrismError
from prism.host import tune_host

LAUNCH_KEYS = ("launcher", "nodes", "procs_per_node", "storage", "dry_run", "config")


def train_command(flags: dict[str, Any]) -> int:
    """`--dry-run` prints the launcher's command; `torchrun` re-executes under torchrun;
    `local` trains in this process. Returns the exit status (non-zero for a collapsed run)."""
    from prism.train.config import merge

    tune_host()
    launch = {k: flags.pop(k, None) for k in LAUNCH_KEYS}
    run = merge(launch["config"], flags)
    launcher = launch["launcher"] or "local"
    if launch["dry_run"]:
        from prism.launch import render

        print(render(launcher, run, launch["nodes"] or 1, launch["procs_per_node"], launch["storage"] or "local"),
              end="" if launcher == "aurora" else "\n")
        return 0
    if launcher == "aurora":
        raise PrismError("an aurora job body is submitted with qsub, not run here; print it with --dry-run "
                         "(or let the workflow submit it)")
    if launcher == "torchrun":
        from prism.launch import render

        argv = shlex.split(render("torchrun", run, launch["nodes"] or 1, launch["procs_per_node"]))
        # The venv's interpreter runs torchrun's module even when its bin/ is not on PATH.
        os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run", *argv[1:]])
    if (launch["nodes"] or 1) != 1 or (launch["procs_per_node"] or 1) != 1:
        raise PrismError("launcher local runs one process; use --launcher torchrun or aurora")
    from prism.train.loop import exit_code, train

    return exit_code(train(run))
