"""`aurora`: the PBS job body that runs one training job on ALCF Aurora.

Facts from ALCF's Aurora user guide (docs.alcf.anl.gov): 12 ranks per node, one
per GPU tile, with the guide's CPU binding; `module load frameworks/VERSION` for torch
with the `xccl` backend; the oneCCL variables; `MASTER_ADDR` the first host of
`$PBS_NODEFILE`. With `--storage daos` the job mounts the DAOS container with
`launch-dfuse.sh` before training and unmounts it with `clean-dfuse.sh` after,
also when training fails (an EXIT trap), copies the run's index directory (its
manifest and decoded copy, where it has one) into the container unless the same
copy is there already (`stage_into_daos`), trains on the mounted copy, and
`mpiexec` gets `--no-vni` and the `libpil4dfs` interception library. The shards
themselves stay where they are on Lustre (docs/own-data.md, "On the cluster").
With `--storage lustre` (config/aurora.yaml's) the ranks read the index in place.

A job submitted by the workflow has set itself up before this body runs (the
profile's login shell and `cluster.setup`, see prism.launch.jobenv); the body's
own frameworks module (unless one is loaded) and venv make it runnable on its own too.

The `#PBS` lines make the body submittable on its own (`qsub -A PROJECT -q QUEUE
-l walltime=HH:MM:SS body.sh`); the workflow passes account, queue and walltime
on its own `qsub` line. The node count is rendered as a number (what the
scheduler was asked for) and checked against `$PBS_NODEFILE` at run time.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys

from prism.core.errors import PrismError
from prism.data.batching import check_batch
from prism.launch.base import Launcher
from prism.launch.command import train_args
from prism.train.config import RunConfig

# One rank per XPU tile: 6 GPUs of 2 tiles a node (ALCF's layout).
PROCS_PER_NODE = 12
# ALCF's binding of the 12 ranks to cores (two sockets of 52 cores; ALCF reserves cores 0 and 52 for
# the OS, and the guide's list starts at 4 and 56); fewer ranks per node take the first ones.
CPU_CORES = ("4-7", "8-11", "12-15", "16-19", "20-23", "24-27", "56-59", "60-63", "64-67", "68-71", "72-75", "76-79")
CPU_BIND = "verbose,list:" + ":".join(CPU_CORES)
CCL_ENV = (
    ("CCL_PROCESS_LAUNCHER", "pmix"),
    ("CCL_ATL_TRANSPORT", "mpi"),
    ("CCL_KVS_MODE", "mpi"),
    ("FI_MR_CACHE_MONITOR", "userfaultfd"),
)
# oneCCL's worker thread of each rank, on a core none of CPU_CORES binds (the guide's optional list), one
# a tile: a pack's runs each take their slots' entries, so that runs sharing a node share no worker core.
CCL_WORKER_CORES = (42, 43, 44, 45, 46, 47, 94, 95, 96, 97, 98, 99)
# The frameworks module a body submitted on its own loads (config/aurora.yaml pins the same in
# cluster.setup; a workflow job has loaded it before the body runs, and the body keeps what is loaded):
# never the unversioned default, which ALCF changes under a venv built against another.
FRAMEWORKS_MODULE = "frameworks/2025.3.1"
MASTER_PORT = 29500
DAOS_PRELOAD = "/usr/lib64/libpil4dfs.so"
# What a body submitted on its own requests: flare (clone, venv, shards, study folder), home (the login
# shell's files), and DAOS only where the index is read from it.
FILESYSTEMS = {"local": "flare:home", "lustre": "flare:home", "daos": "flare:home:daos_user_fs"}
DAOS_MOUNT = "/tmp/${DAOS_POOL}/${DAOS_CONT}"  # where launch-dfuse.sh mounts the container
DATA_VAR = "PRISM_DATA"  # the job's index directory once staged


def stage_into_daos(data: str, workdir: str) -> list[str]:
    """Shell lines that make `$PRISM_DATA` the index directory's copy inside the mounted container.

    The index is made on Lustre (the workflow's data rule); each job copies it into
    the container unless the copy there has the same manifest, which names and
    checksums every shard (the shards stay on Lustre). The copy goes to a job-private directory first and is
    renamed into place, so a job killed mid-copy, or two jobs staging at once, never
    leave a partial directory that a later job would take as staged.
    """
    q = shlex.quote
    source = os.path.normpath(os.path.join(workdir, data))
    # The same path inside the container: one copy per shard directory, whichever study uses it.
    target = f"{DAOS_MOUNT}/prism/{q(source.lstrip('/'))}"
    return [
        f"{DATA_VAR}={target}",
        "# stage the index into the container unless the same index is there (same manifest)",
        f'if ! cmp -s {q(source)}/manifest.json "${DATA_VAR}/manifest.json"; then',
        f'  staging="${DATA_VAR}.staging.${{PBS_JOBID:-$$}}" old="${DATA_VAR}.old.${{PBS_JOBID:-$$}}"',
        f'  mkdir -p "$(dirname "${DATA_VAR}")" && cp -r {q(source)} "$staging" || exit 2',
        '  rm -rf "$old"',
        f'  [ -e "${DATA_VAR}" ] && mv "${DATA_VAR}" "$old"',
        f'  mv -T "$staging" "${DATA_VAR}" 2>/dev/null || rm -rf "$staging"  # another job staged it first',
        '  rm -rf "$old"',
        "fi",
    ]


def _venv() -> str | None:
    """The virtual environment rendering this body (the job activates the same one)."""
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        return venv
    return sys.prefix if sys.prefix != sys.base_prefix else None


def bind_to_slots(lines: list[str], command: str, bind: str, ppn: int) -> str:
    """`command` with its ranks bound to the cores of the slots a pack's run holds (prism.launch.slots:
    `$PRISM_SLOT_CORES`, else the first cores); `lines`' rendezvous port made the one its claim took
    (`$PRISM_SLOT_PORT`: free on the node and no other held slot's), so that two runs of several ranks on one
    node, of one job or of two sharing it, meet at ports of their own."""
    slot_bind = f'--cpu-bind=verbose,list:"${{PRISM_SLOT_CORES:-{":".join(CPU_CORES[:ppn])}}}"'
    ccl = lines.index(f"export CCL_WORKER_AFFINITY={','.join(map(str, CCL_WORKER_CORES[:ppn]))}")
    lines[ccl : ccl + 1] = [
        f"ccl_cores=({' '.join(map(str, CCL_WORKER_CORES))}) ccl_affinity= "
        'ccl_slots="${ZE_AFFINITY_MASK:-${PRISM_SLOT:-0}}"',
        'for slot in ${ccl_slots//,/ }; do ccl_affinity="${ccl_affinity:+$ccl_affinity,}'
        '${ccl_cores[${slot%%.*}]}"; done',
        'export CCL_WORKER_AFFINITY="$ccl_affinity"',
    ]
    port = lines.index(f"export MASTER_PORT={MASTER_PORT}")
    lines[port] = f"export MASTER_PORT=${{PRISM_SLOT_PORT:-$(({MASTER_PORT} + ${{PRISM_SLOT:-0}}))}}"
    return command.replace(" " + shlex.quote(bind) + " ", f" {slot_bind} ", 1)


def render_aurora(
    run: RunConfig,
    nodes: int = 1,
    procs_per_node: int | None = None,
    storage: str = "local",
    workdir: str | None = None,
    venv: str | None = None,
) -> str:
    ppn = procs_per_node or PROCS_PER_NODE
    ranks = nodes * ppn
    if ppn > len(CPU_CORES):
        raise PrismError(f"--procs-per-node {ppn}: an Aurora node binds at most {len(CPU_CORES)} ranks (one per tile)")
    if ranks > 1 and run.strategy == "none":
        raise PrismError(
            f"{ranks} ranks with --strategy none would train separate copies; choose --strategy ddp, fsdp or hsdp"
        )
    check_batch(run.global_batch, ranks, "--global-batch", f"this job ({nodes} node(s) x {ppn} ranks)")
    if ranks == 1 and run.strategy != "none":
        # One rank has nothing to shard or replicate: it trains unwrapped. (A pack's jobs share one strategy
        # text, Snakemake's rule for a group's resources: its one-tile runs get the spread runs' here.)
        run = dataclasses.replace(run, strategy="none", replicate=None, shard=None)
    q = shlex.quote
    workdir = workdir or os.getcwd()
    venv = venv if venv is not None else _venv()
    daos = storage == "daos"
    lines = [
        "#!/bin/bash -l",
        f"#PBS -N {run.run_id[:236]}",
        f"#PBS -l select={nodes}",
        "#PBS -l place=scatter",
        f"#PBS -l filesystems={FILESYSTEMS[storage]}",
        "#PBS -k doe",
        "# Submit: qsub -A PROJECT -q QUEUE -l walltime=HH:MM:SS THIS_FILE",
        f"# prism run {run.run_id}: {nodes} node(s) x {ppn} ranks, storage {storage}",
        "set -o pipefail",
        f"cd {q(workdir)} || exit 2",
        f"module is-loaded frameworks || module load {FRAMEWORKS_MODULE} || exit 2",
    ]
    if venv:
        lines.append(f"source {q(os.path.join(venv, 'bin', 'activate'))} || exit 2")
    lines += [f"export {k}={q(v)}" for k, v in CCL_ENV]
    lines.append(f"export CCL_WORKER_AFFINITY={','.join(map(str, CCL_WORKER_CORES[:ppn]))}")
    lines += [
        ': "${PBS_NODEFILE:?is not set: run this body as a PBS job (qsub), which lists its nodes there}"',
        'NNODES=$(wc -l < "$PBS_NODEFILE") || exit 2',
        f'if [ "$NNODES" -ne {nodes} ]; then',
        f'  echo "prism: this job has $NNODES nodes but was rendered for {nodes}" >&2',
        "  exit 2",
        "fi",
        'export MASTER_ADDR=$(head -n 1 "$PBS_NODEFILE")',
        f"export MASTER_PORT={MASTER_PORT}",
    ]
    mpiexec = ["mpiexec", "-n", str(ranks), "--ppn", str(ppn), "--cpu-bind=verbose,list:" + ":".join(CPU_CORES[:ppn])]
    if daos:
        lines += [
            "module use /soft/modulefiles || exit 2",
            "module load daos || exit 2",
            ': "${DAOS_POOL:?set DAOS_POOL (pass it with qsub -v DAOS_POOL=...,DAOS_CONT=...)}"',
            ': "${DAOS_CONT:?set DAOS_CONT (pass it with qsub -v DAOS_POOL=...,DAOS_CONT=...)}"',
            "# unmount on every exit, also when training fails",
            "trap 'clean-dfuse.sh \"${DAOS_POOL}:${DAOS_CONT}\"' EXIT",
            'launch-dfuse.sh "${DAOS_POOL}:${DAOS_CONT}" || exit 2',
        ]
        lines += stage_into_daos(run.data, workdir)
        mpiexec += ["--no-vni", "--env", f"LD_PRELOAD={DAOS_PRELOAD}"]
    argv = [*mpiexec, "python", "-m", "prism", *train_args(run)]
    command = shlex.join(argv)
    if daos:  # train on the staged copy: the one argument the shell must expand
        data_at = argv.index("--data") + 1
        command = " ".join([shlex.join(argv[:data_at]), f'"${DATA_VAR}"', shlex.join(argv[data_at + 1 :])])
    if nodes == 1 and ppn < len(CPU_CORES):
        command = bind_to_slots(lines, command, mpiexec[5], ppn)
    lines += [
        command,
        "status=$?",
        f'echo "prism: run {run.run_id} finished with exit status $status" >&2',
        "exit $status",
    ]
    return "\n".join(lines) + "\n"


class Aurora(Launcher):
    """The PBS job body (`render_aurora`): printed by `prism train --dry-run`, submitted by the workflow or
    `prism isoflop launch`, never run by `prism train` itself."""

    name = "aurora"
    procs_per_node = PROCS_PER_NODE
    cluster = True
    device = "xpu"
    scheduler = "PBS"
    submit = "qsub"
    binds_slots = True  # bind_to_slots
    probed = True

    def render(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None, storage: str = "local") -> str:
        return render_aurora(run, nodes, procs_per_node, storage)


AURORA = Aurora()
