"""A tiny study set up for the local Slurm as a Slurm site's user has it: no Torque wrapper (its `qsub`, `qstat`
and `qdel` shadowed by stand-ins that record any call and fail), this instance's config for `srun`, the venv and
the CPU kernels this session built, shared by the tests through profiles/slurm and profiles/slurm-packs."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from workflow.wfhelpers import BIN, env, kernel_builds, make_workdir

# Stand-ins for the Torque wrapper's commands: any call is recorded in calls.log and fails.
TORQUE_STANDIN = '#!/bin/sh\necho "$(basename "$0") $*" >> "$(dirname "$0")/calls.log"\nexit 1\n'


def study_in(root: Path, scheduler: dict, shape_shards, overrides: dict) -> dict:
    """The tiny study under `root` with `overrides`, its shards, its stand-ins and its client environment."""
    shims = root / "bin"
    shims.mkdir()
    for name in ("qsub", "qstat", "qdel"):
        (shims / name).write_text(TORQUE_STANDIN)
        (shims / name).chmod(0o755)
    conf = scheduler["SLURM_CONF"]
    srun = f'#!/bin/sh\nSLURM_CONF={shlex.quote(conf)} exec {shlex.quote(shutil.which("srun"))} "$@"\n'
    (shims / "srun").write_text(srun)
    (shims / "srun").chmod(0o755)
    shape_shards(root / "shards", 2000, per_shard=500)
    workdir = make_workdir(root / "study", {"data": {"shards": {"text_image": str(root / "shards")}}, **overrides})
    # The tiny config as a file of its own, named by --configfile as the documented command names one.
    (workdir / "config" / "tiny-slurm.yaml").write_text((workdir / "config" / "config.yaml").read_text())
    client_env = {k: v for k, v in scheduler.items() if k != "folder"}
    client_env |= {
        "PATH": f"{shims}:{BIN}:{env()['PATH']}",
        "OMP_NUM_THREADS": "2",
        "TORCH_EXTENSIONS_DIR": kernel_builds(),
        "PYTHONPATH": env(slurm=True)["PYTHONPATH"],
    }
    return {"workdir": workdir, "shims": shims, "env": client_env, "folder": scheduler["folder"]}
