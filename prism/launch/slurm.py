"""`slurm`: the Slurm job body that runs one training job on a node's GPUs (NVIDIA, NCCL), or its CPUs.

One rank: `python -m prism train ...` on the device the job holds; a pack's run on the GPU its slot
pins with `CUDA_VISIBLE_DEVICES` (prism.launch.slots runs the body under that pin). Several ranks
(nodes x procs per node): `srun` starts one task a rank over the job's nodes, and each task exports
torch's names (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`) from Slurm's (`SLURM_PROCID`,
`SLURM_NTASKS`, `SLURM_LOCALID`) before it starts `prism train`; `MASTER_ADDR` is the job's first node
(each task asks scontrol) and `MASTER_PORT` the slot's port where a pack's claim took one
(`$PRISM_SLOT_PORT`), else one of 2,000 from 29500 chosen by the job's id: Slurm shares a node between
jobs unless told not to, and two jobs of several ranks on one node must not both listen on 29500. Every
task sees the node's GPUs and takes the one of its local rank (prism.parallel.config), NCCL on cuda,
gloo on cpu. `--kill-on-bad-exit`: one rank that fails ends the others, not a hang in a collective.

The `#SBATCH` lines make the body submittable on its own (`sbatch -A ACCOUNT -p PARTITION -t HH:MM:SS
body.sh`); the node count is rendered as a number, which srun refuses when the job has fewer nodes.
The body activates the venv that rendered it (a job submitted by profiles/slurm has the submitting
shell's environment already).
"""

from __future__ import annotations

import dataclasses
import os
import shlex

from prism.core.errors import PrismError
from prism.data.batching import check_batch
from prism.launch.aurora import _venv
from prism.launch.base import Launcher
from prism.launch.command import train_args
from prism.train.config import RunConfig

MASTER_PORT = 29500
# Ports a job's id picks from (29500-31499: below Linux's ephemeral range, 32768 up).
PORTS = 2000
# What each srun task runs before `prism train`: torch's names of its place, from those Slurm gives every task
# of a step (the job's own SLURM_ variables may be gone: the Slurm executor's job step drops them), and the
# rendezvous host, the step's first node, which rank 0 says.
TASK_ENV = (
    'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_STEP_NODELIST" | head -n 1)" RANK="$SLURM_PROCID" '
    'WORLD_SIZE="$SLURM_NTASKS" LOCAL_RANK="$SLURM_LOCALID" LOCAL_WORLD_SIZE={ppn}; '
    '[ "$RANK" = 0 ] && echo "prism: $WORLD_SIZE ranks on $SLURM_STEP_NUM_NODES node(s) meet at '
    '$MASTER_ADDR:$MASTER_PORT" >&2; '
    'exec "$@"'
)


def render_slurm(
    run: RunConfig,
    nodes: int = 1,
    procs_per_node: int | None = None,
    storage: str = "local",
    workdir: str | None = None,
    venv: str | None = None,
) -> str:
    ppn = procs_per_node or 1
    ranks = nodes * ppn
    if storage == "daos":
        raise PrismError("--storage daos mounts Aurora's DAOS container: a slurm job reads its shards in place")
    if ranks > 1 and run.strategy == "none":
        raise PrismError(
            f"{ranks} ranks with --strategy none would train separate copies; choose --strategy ddp, fsdp or hsdp"
        )
    check_batch(run.global_batch, ranks, "--global-batch", f"this job ({nodes} node(s) x {ppn} ranks)")
    if ranks == 1 and run.strategy != "none":
        # One rank has nothing to shard or replicate: it trains unwrapped (as an aurora body of one rank).
        run = dataclasses.replace(run, strategy="none", replicate=None, shard=None)
    q = shlex.quote
    workdir = workdir or os.getcwd()
    venv = venv if venv is not None else _venv()
    gpus = [f"#SBATCH --gpus-per-node={ppn}"] if run.device in ("cuda", "auto") else []
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={run.run_id[:200]}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={ppn}",
        *gpus,
        "# Submit: sbatch -A ACCOUNT -p PARTITION -t HH:MM:SS THIS_FILE",
        f"# prism run {run.run_id}: {nodes} node(s) x {ppn} ranks, storage {storage}",
        "set -o pipefail",
        f"cd {q(workdir)} || exit 2",
    ]
    if venv:
        lines.append(f"source {q(os.path.join(venv, 'bin', 'activate'))} || exit 2")
    train = ["python", "-m", "prism", *train_args(run)]
    if ranks == 1:
        lines.append(shlex.join(train))
    else:
        lines += [
            ': "${SLURM_JOB_ID:?is not set: run this body as a Slurm job (sbatch): srun starts its ranks}"',
            f"export MASTER_PORT=${{PRISM_SLOT_PORT:-$(({MASTER_PORT} + SLURM_JOB_ID % {PORTS}))}}",
        ]
        srun = ["srun", f"--nodes={nodes}", f"--ntasks={ranks}", f"--ntasks-per-node={ppn}", "--kill-on-bad-exit=1"]
        task = TASK_ENV.format(ppn=ppn)
        lines.append(shlex.join([*srun, "bash", "-c", task, "prism-rank", *train]))
    lines += [
        "status=$?",
        f'echo "prism: run {run.run_id} finished with exit status $status" >&2',
        "exit $status",
    ]
    return "\n".join(lines) + "\n"


class Slurm(Launcher):
    """The Slurm job body (`render_slurm`): printed by `prism train --dry-run`, run by the workflow's jobs (the
    job's shell runs it in the allocation), never by `prism train` itself."""

    name = "slurm"
    cluster = True
    device = "cuda"
    scheduler = "Slurm"
    submit = "sbatch"
    srun_ranks = True

    def render(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None, storage: str = "local") -> str:
        return render_slurm(run, nodes, procs_per_node, storage)


SLURM = Slurm()
