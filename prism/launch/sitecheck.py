"""`prism cluster check`: prove a site's installation before a study is submitted to it.

A cluster study fails expensively: after a queue wait, on a compute node, in a job log.
What fails there is usually the environment, not prism: a venv whose torch cannot see the
accelerators, a collective backend that does not initialise, a shards folder the compute
nodes cannot read, an account left at its placeholder. Each check here says in one line
what it found and, when it fails, what to do. The PBS checks (the queue's limits, the
filesystems, the DAOS variables: prism.launch.sitepbs) ask `qstat`; the collective check
starts real processes on this node through `mpiexec` (as a job's ranks start), so run the
command on a compute node (`qsub -I`), then the study's probe (`snakemake probe_FAMILY`).
A Slurm study (`--profile profiles/slurm`, or train.launcher slurm) gets Slurm's checks instead of
the PBS ones: its partitions and their GPUs (prism.launch.siteslurm, from `scontrol`), this node's
CUDA devices, and NCCL across two of them, its ranks started by `srun` inside a Slurm job.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from prism.core.errors import PrismError
from prism.data.batching import check_batch
from prism.launch.profilecheck import check_profile, profile_executor, profile_scheduler
from prism.launch.ranks import cluster_ranks
from prism.launch.sitejob import check_debug_queue, check_frameworks, check_helpers_python, check_tmpdir
from prism.launch.sitepbs import Check, check_daos, check_filesystems, check_queue
from prism.launch.siteslurm import NO_GPU, check_account, check_gres, check_partitions, in_allocation, srun_prefix
from prism.parallel.config import BACKENDS
from prism.parallel.env import free_port

PLACEHOLDER = "FILL_IN"


def merged(base: dict, override: dict) -> dict:
    """`override` over `base`, merged by Snakemake's own function for a --configfile over the default."""
    from snakemake.utils import update_config  # noqa: PLC0415 lazy: snakemake

    out = copy.deepcopy(base)
    update_config(out, copy.deepcopy(override))
    return out


def load_study_config(path: str | Path, default: str | Path | None = "config/config.yaml") -> dict:
    """The study config as the workflow sees it: `path` over the default config (when it exists)."""
    path = Path(path)
    try:
        own = yaml.safe_load(path.read_text()) or {}
    except OSError as err:
        raise PrismError(f"{path}: cannot read the config ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise PrismError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    base = yaml.safe_load(Path(default).read_text()) if default and Path(default).is_file() else {}
    return merged(base or {}, own)


def check_schema(config: dict, schema: str | Path = "config/schema.yaml") -> Check:
    """The config as the workflow would validate it (skipped where the schema is not beside it)."""
    from prism.core.configtypes import problem  # noqa: PLC0415 lazy: jsonschema

    if not Path(schema).is_file():
        return Check("config", True, f"not validated ({schema} not found: run from the repository)")
    line = problem(config, yaml.safe_load(Path(schema).read_text()))
    return Check("config", line is None, line or f"valid against {schema}")


def check_scheduler(config: dict) -> Check:
    cluster = config.get("cluster") or {}
    empty = [key for key in ("account", "queue") if not str(cluster.get(key) or "").strip()]
    placeholder = [key for key in ("account", "queue") if PLACEHOLDER in str(cluster.get(key) or "")]
    if empty or placeholder:
        keys = ", ".join(f"cluster.{k}" for k in empty + placeholder)
        return Check("scheduler", False, f"{keys} not filled in: set your project (qsub -A) and queue")
    return Check("scheduler", True, f"account {cluster['account']}, queue {cluster['queue']}")


def check_shards(config: dict) -> list[Check]:
    """Every `data.shards` folder exists, is readable and holds tar shards."""
    shards = (config.get("data") or {}).get("shards") or {}
    out = []
    for family, folder in sorted(shards.items()):
        name, path = f"shards {family}", Path(folder)
        if PLACEHOLDER in str(folder):
            out.append(Check(name, False, f"data.shards.{family} is the placeholder {folder}: name your shards folder"))
        elif not path.is_dir():
            out.append(Check(name, False, f"data.shards.{family} = {folder} is no folder here: check the path"))
        elif not os.access(path, os.R_OK | os.X_OK):
            out.append(Check(name, False, f"{folder} is not readable by this user: fix its permissions"))
        else:
            tars = [p for p in path.rglob("*.tar") if p.is_file()]
            unreadable = [p for p in tars if not os.access(p, os.R_OK)]
            if not tars:
                out.append(Check(name, False, f"{folder} holds no .tar shards (layout: docs/own-data.md)"))
            elif unreadable:
                out.append(
                    Check(name, False, f"{len(unreadable)} of {len(tars)} shards unreadable, e.g. {unreadable[0]}")
                )
            else:
                out.append(Check(name, True, f"{len(tars)} readable shards in {folder}"))
    return out


def check_batch_ranks(config: dict) -> Check:
    launcher = (config.get("train") or {}).get("launcher", "local")
    try:
        per_node, ranks = cluster_ranks(launcher, config.get("cluster") or {})
    except PrismError as err:  # an unknown launcher
        return Check("batch", False, str(err))
    batch = (config.get("plan") or {}).get("global_batch")
    if batch is None:
        return Check("batch", True, f"the plan chooses batches that divide among {ranks} rank(s) a job")
    try:
        check_batch(int(batch), ranks, "plan.global_batch", f"each {launcher} job ({per_node} a node)")
    except PrismError as err:
        return Check("batch", False, str(err))
    return Check("batch", True, f"plan.global_batch {batch} = {int(batch) // ranks} rows x {ranks} rank(s) a job")


def check_device(device: str) -> Check:
    """torch imports and sees `device` (how many, which)."""
    try:
        import torch  # noqa: PLC0415 lazy: the cheap checks run without it
    except ImportError as err:
        return Check("torch", False, f"cannot import torch ({err}): install prism into this venv (docs/guide.md)")
    version = torch.__version__
    if device == "cpu":
        return Check("torch", True, f"torch {version}, device cpu ({os.cpu_count()} cores)")
    module = getattr(torch, device, None)
    if module is None or not module.is_available():
        return Check(
            "torch",
            False,
            f"torch {version} sees no {device} device: on Aurora load the frameworks module before activating "
            "the venv (made with --system-site-packages, so that its torch has XPU support); elsewhere set "
            "train.device",
        )
    count = module.device_count()
    return Check("torch", True, f"torch {version}, {count} {device} device(s): {module.get_device_name(0)}")


def _all_reduce(
    rank: int, world: int, device: str, port: int, addr: str = "127.0.0.1", local_rank: int | None = None
) -> None:
    """One rank: join the group, sum ones over all ranks, check the sum (a child process)."""
    import torch  # noqa: PLC0415 lazy: in the spawned rank
    import torch.distributed as dist  # noqa: PLC0415 lazy: in the spawned rank

    dist.init_process_group(BACKENDS[device], init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world)
    try:
        index = rank if local_rank is None else local_rank
        where = torch.device(device, index) if device != "cpu" else torch.device("cpu")
        value = torch.ones(4, device=where)
        dist.all_reduce(value)
        if value.tolist() != [float(world)] * 4:
            raise RuntimeError(f"all_reduce gave {value.tolist()}, not {world}")
    finally:
        dist.destroy_process_group()


def mpi_rank(device: str) -> int:
    """One rank started by `mpiexec` (`python -m prism.launch.sitecheck DEVICE`): its place from the launcher's
    environment (PMI/PALS, as a job's ranks read it), then the all-reduce; 0 when the sum is right."""
    from prism.parallel.env import discover  # noqa: PLC0415 lazy: in the rank

    env = discover()
    _all_reduce(env.rank, env.world_size, device, env.master_port, env.master_addr, env.local_rank)
    return 0


def launched_collectives(device: str, ranks: int, prefix: list[str], via: str) -> Check:
    """`ranks` processes started by a launcher (`prefix`: mpiexec's or srun's), as a job's are, join the
    device's backend and all-reduce; each rank is `python -m prism.launch.sitecheck DEVICE`."""
    backend = BACKENDS[device]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    argv = [*prefix, sys.executable, "-m", "prism.launch.sitecheck", device]
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as err:
        return Check("collectives", False, f"{backend} on {ranks} ranks through {via} failed: {err}")
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        return Check("collectives", False, f"{backend} on {ranks} ranks through {via} failed: {last}")
    return Check("collectives", True, f"{backend} initialised on {ranks} ranks through {via} and all-reduced")


def mpiexec_collectives(device: str, ranks: int, mpiexec: str) -> Check:
    """`ranks` processes started by `mpiexec`, as a job's are, join the device's backend and all-reduce."""
    return launched_collectives(device, ranks, [mpiexec, "-n", str(ranks)], mpiexec)


def spawned_collectives(device: str, ranks: int, hint: str) -> Check:
    """`ranks` processes spawned from here join the device's backend and all-reduce; `hint` follows a failure."""
    backend = BACKENDS[device]
    try:
        import torch.multiprocessing as mp  # noqa: PLC0415 lazy: torch

        mp.spawn(_all_reduce, args=(ranks, device, free_port()), nprocs=ranks, join=True)
    except Exception as err:  # noqa: BLE001 - any failure of the backend is the finding
        first = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        return Check("collectives", False, f"{backend} on {ranks} ranks failed: {first}{hint}")
    return Check("collectives", True, f"{backend} initialised on {ranks} ranks and all-reduced")


def check_collectives(device: str, ranks: int) -> Check:
    """`ranks` processes on this node initialise the device's backend and all-reduce a tensor: started by
    `mpiexec` where there is one (as a job's ranks are), else spawned from here."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec:
        return mpiexec_collectives(device, ranks, mpiexec)
    return spawned_collectives(device, ranks, " (on Aurora: module load frameworks provides oneCCL)")


def slurm_collectives(device: str, ranks: int, environ: Mapping[str, str] | None = None) -> Check:
    """The collective check of a Slurm study: inside a Slurm job its ranks are tasks of an srun step, as a
    slurm-launcher job's are; elsewhere (no allocation) processes spawned from here."""
    if in_allocation(environ):
        return launched_collectives(device, ranks, srun_prefix(ranks), "srun")
    return spawned_collectives(device, ranks, "" if device == "cpu" else " (check the node's NCCL and driver)")


def check_gpus(ranks: int, needed: int, environ: Mapping[str, str] | None = None) -> list[Check]:
    """The CUDA devices this node shows, and with two or more an all-reduce across `ranks` of them over NCCL.
    No device is a failure, said plainly: the GPU and NCCL checks cannot pass where they did not run.
    `needed`: GPUs a job of the study uses a node (one: a single GPU is enough, with a note)."""
    try:
        import torch  # noqa: PLC0415 lazy: the cheap checks run without it
    except ImportError as err:
        return [Check("torch", False, f"cannot import torch ({err}): install prism into this venv (docs/guide.md)")]
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return [Check("gpus here", False, f"torch {torch.__version__}: {NO_GPU}")]
    names = ", ".join(sorted({torch.cuda.get_device_name(i) for i in range(count)}))
    found = Check("gpus here", True, f"torch {torch.__version__}, {count} CUDA device(s): {names}")
    if count < 2:
        enough = needed <= 1
        why = "the study's jobs use one GPU" if enough else f"the study's jobs use {needed} a node"
        note = "NCCL across two GPUs not checked (one visible; srun --gres=gpu:2 --pty ... checks it)"
        return [found, Check("collectives", enough, f"{note}: {why}")]
    return [found, slurm_collectives("cuda", max(2, min(ranks, count)), environ)]


def slurm_study(config: dict, profile: str | None) -> bool:
    """Whether the study goes to Slurm: its launcher is slurm, or its profile submits there (Snakemake's Slurm
    executor, or sbatch through cluster-generic: profiles/slurm-packs)."""
    from prism.launch import registry  # noqa: PLC0415 lazy: the launchers import the job bodies

    launcher = (config.get("train") or {}).get("launcher")
    submits_to_slurm = launcher in registry.names() and registry.get(launcher).scheduler == "Slurm"
    return submits_to_slurm or (profile is not None and profile_scheduler(profile) == "Slurm")


def slurm_checks(config: dict, device: str, ranks: int) -> list[Check]:
    """What a Slurm study needs beside the checks every site shares: its partitions and their GPUs, then this
    node's devices and the collective (NCCL across two GPUs on cuda, gloo on cpu)."""
    checks = [*check_partitions(config), *check_gres(config)]
    if device == "cuda":
        per_node, _ = cluster_ranks((config.get("train") or {}).get("launcher", "local"), config.get("cluster") or {})
        return [*checks, *check_gpus(ranks, per_node)]
    checks.append(check_device(device))
    if checks[-1].ok:
        checks.append(slurm_collectives(device, ranks))
    return checks


def check_study_dir(config: dict) -> Check:
    folder = Path(str(config.get("study_dir") or "scaling-study"))
    probe = folder if folder.exists() else next((p for p in folder.parents if p.exists()), Path("."))
    if not os.access(probe, os.W_OK):
        return Check("study_dir", False, f"cannot write {probe} (study_dir {folder}): choose a folder you own")
    return Check("study_dir", True, f"{folder} is writable")


def run_checks(
    config: dict,
    device: str | None = None,
    ranks: int = 2,
    schema: str | Path = "config/schema.yaml",
    log=print,
    profile: str | None = None,
) -> bool:
    """Run every check, cheapest first, one line each; whether all passed.

    `device` defaults to the config's train.device; the collectives run only once torch sees it.
    `profile`: the study's Snakemake profile; a Slurm study (its executor, or train.launcher slurm) gets the
    Slurm checks (prism.launch.siteslurm) in place of the PBS ones.
    """
    device = device or (config.get("train") or {}).get("device", "cpu")
    if device not in BACKENDS:  # auto: what this node has
        device = "cpu"
    if slurm_study(config, profile):
        common = [check_schema(config, schema), check_account(config.get("cluster") or {}, PLACEHOLDER)]
        if profile is not None and profile_executor(profile) == "cluster-generic":  # packs: a pack's runs at once
            common.append(check_profile(config, profile))
        common += [check_helpers_python(), *check_shards(config), check_batch_ranks(config), check_study_dir(config)]
        checks = [*common, *slurm_checks(config, device, ranks)]
        for check in checks:
            log(check.line())
        return all(check.ok for check in checks)
    checks = [
        check_schema(config, schema),
        check_scheduler(config),
        check_profile(config),
        check_helpers_python(),
        check_queue(config.get("cluster") or {}),
        check_debug_queue(),
        check_filesystems(config),
        check_daos(config),
        *check_shards(config),
        check_batch_ranks(config),
        check_study_dir(config),
        check_tmpdir(),
        check_frameworks(config),
    ]
    checks.append(check_device(device))
    if checks[-1].ok:
        checks.append(check_collectives(device, ranks))
    for check in checks:
        log(check.line())
    if not checks[-1].ok and checks[-1].name == "torch":
        log("skip collectives: torch does not see the device")
    return all(check.ok for check in checks)


if __name__ == "__main__":  # one rank of the mpiexec collective check
    sys.exit(mpi_rank(sys.argv[1]))
