"""Training jobs' nodes and walltimes (PBS on the cluster), and what a plan's jobs request.

Each training job requests the walltime its plan estimate needs (prism.launch.walltime): the
estimate x cluster.walltime_factor, whole minutes, at least cluster.min_walltime, at most the cap
(cluster.walltimes[backbone], else cluster.walltime: the queue's limit). A job whose estimate
exceeds the cap requests the cap and resumes from its checkpoint when resubmitted.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable
from typing import Any

from prism.core.ids import id_backbone
from prism.launch import registry as launchers
from prism.launch.jobenv import job_env, job_setup, setup_shell
from prism.launch.queues import queue_for
from prism.launch.slots import PROGRAM
from prism.launch.walltime import SPEED_WALLTIME, pieces, requested_seconds, walltime_seconds, walltime_text
from prism.workflow.packing import Pack, summary

# (backbone, nodes, estimated seconds or None) of one training job.
Job = tuple[str, int, "float | None"]


def environment(cluster: dict, study_dir: str) -> dict[str, str]:
    """What every cluster job sets up itself (prism.launch.jobenv): its set-up lines with the caches under
    the study folder (`setup`), and the variables `qsub -v` passes (`env`)."""
    return {"setup": job_setup(cluster, study_dir), "env": job_env(cluster)}


def speed_job(cluster: dict, study_dir: str) -> dict:
    """The resources of a speed job: one node, as a training job's (account, queue, filesystems, place,
    environment), for a short walltime; it times a rank where the training jobs run."""
    return {
        "nodes": 1,
        "walltime": SPEED_WALLTIME,
        "runtime": walltime_minutes(SPEED_WALLTIME),
        **{key: cluster[key] for key in ("account", "queue", "filesystems", "place")},
        **environment(cluster, study_dir),
    }


def backbone_of(wildcards: Any) -> str:
    """The backbone from the run id (or a wsd segment's trajectory id, which starts alike), so a job's
    nodes never wait on the plan (Snakemake cannot evaluate resources of a job whose checkpoint is pending)."""
    return id_backbone(getattr(wildcards, "run_id", None) or wildcards.traj)


def backbone_nodes(cluster: dict, backbone: str) -> int:
    return int(cluster["nodes_by_backbone"].get(backbone, cluster["nodes"]))


def backbone_cap(cluster: dict, backbone: str) -> str:
    return cluster["walltimes"].get(backbone, cluster["walltime"])


def request_s(cluster: dict, estimate_s: float | None, backbone: str, startup_s: float = 0.0) -> int:
    """Seconds a job of `backbone` estimated at `estimate_s` asks for, its start-up (`startup_s`, before the
    first step: prism.workflow.probe.job_startup) included."""
    cap = backbone_cap(cluster, backbone)
    estimate = None if estimate_s is None else estimate_s + startup_s
    return requested_seconds(estimate, cluster["walltime_factor"], cluster["min_walltime"], cap)


def train_walltime(cluster: dict, estimate_s: float | None, backbone: str, startup_s: float = 0.0) -> str:
    return walltime_text(request_s(cluster, estimate_s, backbone, startup_s))


def walltime_minutes(walltime: str) -> int:
    """Snakemake's `runtime` (whole minutes) of a walltime text."""
    return -(-walltime_seconds(walltime) // 60)


def requested_text(cluster: dict, family: str, jobs: list[Job], startup: tuple[float, str] = (0.0, "")) -> str:
    """One line: node-hours the training jobs request on a cluster beside those estimated, and the jobs over the cap.

    `startup`: (seconds, label) every job spends before its first step, in its walltime and said so."""
    requested = sum(n * request_s(cluster, est, b, startup[0]) for b, n, est in jobs) / 3600
    known = [n * est for b, n, est in jobs if est is not None]
    estimated = f"{sum(known) / 3600:.3g}" if len(known) == len(jobs) else "unknown"
    over = [pieces(est, backbone_cap(cluster, b)) for b, n, est in jobs if pieces(est, backbone_cap(cluster, b)) > 1]
    text = (
        f"plan {family}: {len(jobs)} training jobs request {requested:.3g} node-hours as cluster jobs for "
        f"{estimated} node-hours estimated (walltime = estimate x {cluster['walltime_factor']:g}, "
        f">= {cluster['min_walltime']}, <= {cluster['walltime']}"
        + (" or cluster.walltimes" if cluster["walltimes"] else "")
        + (f"; estimate + {startup[1]}" if startup[1] else "")
        + ")"
    )
    if over:
        text += (
            f"; {len(over)} job(s) need up to {max(over)} walltimes each, resumed from their checkpoints "
            f"(retries: 1 gives 2 a call: add --retries {max(over) - 1})"
        )
    return text


# ---- packs: one-device runs many to a node (cluster.pack) ------------------------------------------

# The Snakemake group every pack's id maps to: the profile's `group-components: [prism_pack=...]` lets
# one group job span all the connected components (runs, trajectories) of a pack.
PACK_GROUP = "prism_pack"


def pin_prefix(slots: int, device: str) -> str:
    """What a packed job's command starts with: claim free ones of the node's `slots` devices ($PRISM_SLOT_DEVICES
    of them, the job's ranks, else one) and pin to them (prism.launch.slots; a module call, so that the lock is
    held by this process, not a worker's fork)."""
    return f"python -m {PROGRAM} --slots {int(slots)} --device {device} -- "


def pack_request(cluster: dict, pack: Pack, once_s: float = 0.0) -> tuple[str, int]:
    """(queue, walltime seconds) of a pack: its start-up (`once_s`: set-up, Snakemake's start) and its
    busiest slot's seconds, x walltime_factor, whole minutes, at least min_walltime, at most
    cluster.walltime (the cap packs are split to keep within)."""
    seconds = None if pack.seconds is None else pack.seconds + once_s
    wanted = requested_seconds(seconds, cluster["walltime_factor"], cluster["min_walltime"], cluster["walltime"])
    return queue_for(cluster, pack.nodes, wanted)


def pack_limit_s(cluster: dict) -> float:
    """The busiest-slot seconds a pack may hold: the cap (cluster.walltime) over the safety factor."""
    return walltime_seconds(cluster["walltime"]) / float(cluster["walltime_factor"])


def speed_pack(cluster: dict, jobs: int, slots: int, study_dir: str) -> dict:
    """The resources of the packed speed jobs: one node's `slots` at once, SPEED_WALLTIME for each round."""
    rounds = max(1, -(-jobs // max(slots, 1)))
    queue, seconds = queue_for(cluster, 1, rounds * walltime_seconds(SPEED_WALLTIME))
    return {
        **speed_job(cluster, study_dir),
        "nodes": "1",  # text: Snakemake adds up a group's numbers, and a pack is one node
        "walltime": walltime_text(seconds),
        "runtime": -(-seconds // 60),
        "queue": queue,
    }


def spread_text(packs: list[Pack], efficiency: tuple[float, str]) -> str:
    """Which units of the packs spread over several devices, and over how many ("" where none does): the
    devices column of the packed dry run's summary. `efficiency`: the speed kept per doubling of devices and
    where it comes from (prism.workflow.probe.pack_efficiency)."""
    spread = sorted((u for p in packs if p.shared for u in p.units if u.devices > 1), key=lambda u: (-u.devices, u.key))
    if not spread:
        return ""
    names = ", ".join(f"{u.key.split('-')[0]} x{u.devices}" for u in spread)
    speed = f"k devices at k x {efficiency[0]:.3g}^log2(k) one's speed, {efficiency[1]}"
    return f"; {len(spread)} spread over devices of their pack: {names} ({speed})"


def packs_text(
    cluster: dict,
    family: str,
    runs: int,
    packs: list[Pack],
    once_s: float = 0.0,
    startup: str = "",
    efficiency: tuple[float, str] | None = None,
) -> str:
    """One line: the runs in jobs on nodes, their queues, node-hours requested beside those estimated.

    `once_s`: each pack's start-up before its runs (the runs' own is in their units); `startup` says so;
    `efficiency`: what prices the spread runs (the assumed cluster.pack_efficiency by default)."""
    efficiency = efficiency or (float(cluster.get("pack_efficiency", 1.0)), "assumed")
    requests = [pack_request(cluster, p, once_s) for p in packs]
    requested = sum(p.nodes * seconds for p, (_, seconds) in zip(packs, requests)) / 3600
    known = [p.nodes * sum(u.seconds * u.devices for u in p.units) / p.slots for p in packs if p.seconds is not None]
    estimated = f"{sum(known) / 3600:.3g}" if len(known) == len(packs) else "unknown"
    queues = ", ".join(f"{q} {n}" for q, n in Counter(q for q, _ in requests).items())
    longest = max((s for _, s in requests), default=0)
    return (
        f"plan {family}: {summary(runs, packs)} (up to {cluster['ranks_per_node']} one-device runs a node"
        f"{spread_text(packs, efficiency)}, queues: "
        f"{queues}, longest {walltime_text(longest)}): the training jobs request {requested:.3g} node-hours as "
        f"cluster jobs for {estimated} node-hours estimated (walltime = busiest device x "
        f"{cluster['walltime_factor']:g}, >= {cluster['min_walltime']}, <= {cluster['walltime']}"
        + (f"; {startup}" if startup else "")
        + ")"
    )


# ---- Snakemake's Slurm executor (profiles/slurm) ----------------------------------------------------


def slurm_names(
    res: dict[str, Any],
    device: str,
    mem_mb: int | None = None,
    ranks: Any = None,
    threads: int = 1,
    node_devices: int | None = None,
) -> dict[str, Any]:
    """A cluster job's resources with the names snakemake-executor-plugin-slurm reads added (profiles/slurm;
    the PBS profile ignores them): `slurm_partition` is the job's queue (cluster.queue, or with cluster.queues
    the one its nodes and walltime fit), `slurm_account` cluster.account (left out when empty: the executor
    then submits without -A), `mem_mb` cluster.mem_mb (0 when null: no --mem, the partition's default, not
    Snakemake's 1000 MB), on cuda `gpu` one a rank (`ranks`, else `procs_per_node`, x `nodes`) and a task a
    GPU, and with a launcher whose body starts ranks with srun (the slurm one) `tasks` one a rank and
    `mpi` where there are several.
    `runtime` (minutes of the walltime) and `nodes` are the executor's names already. A value may be a
    function of the job's wildcards, as Snakemake takes them; so is the name added for it.
    `sbatch`: the same job as profiles/slurm-packs' sbatch flags (`sbatch_args`: `threads` a rank, whole nodes
    of `node_devices` devices for a pack or the probe)."""
    per_node = res.get("procs_per_node", 1) if ranks is None else ranks
    out = {**res, "slurm_partition": res["queue"]}
    out["sbatch"] = sbatch_args({**res, "procs_per_node": per_node}, device, threads, mem_mb, node_devices)
    if res.get("account"):
        out["slurm_account"] = res["account"]
    # 0: no --mem (the executor leaves it out), so the partition's default; else the study's
    out["mem_mb"] = mem_mb or 0
    job_ranks = _of_wildcards(lambda r, n: int(r) * int(n), per_node, res.get("nodes", 1))
    if device == "cuda":
        out["gpu"] = job_ranks
        out["tasks_per_gpu"] = 1
    if res.get("launcher") and launchers.get(res["launcher"]).srun_ranks:
        # The slurm launcher's body starts its ranks with srun (prism.launch.slurm): the job asks one task a
        # rank, and its Snakemake runs in the job's batch step (the executor's `mpi`), not in a one-task step
        # that the body's srun would have to share.
        out["tasks"] = job_ranks
        out["mpi"] = _of_wildcards(lambda r: "srun" if int(r) > 1 else "", job_ranks)
    return out


def sbatch_args(
    res: dict[str, Any], device: str, threads: int = 1, mem_mb: int | None = None, node_devices: int | None = None
) -> Any:
    """`sbatch`'s flags for a job of profiles/slurm-packs (Slurm through the cluster-generic executor, whose group
    jobs run at once), quoted for its submit command's shell: nodes, time limit (`runtime`), partition, account
    where set, memory where cluster.mem_mb is set. A whole-node job (a pack, the probe: `node_devices`, the node's
    devices) takes its nodes `--exclusive`, with as many GPUs each on cuda: a pack's runs pin themselves to the
    node's devices by index (prism.launch.slots), which holds only on a node of its own. Any other job asks one
    task a rank where its launcher starts ranks with srun, else one task, with `threads` cores a rank and a GPU a
    rank on cuda. Text, equal for every job of a pack as Snakemake requires of a group's text resources; a
    function of the job's wildcards where any value is."""

    def flags(nodes: Any, runtime: Any, queue: Any, ranks: Any) -> str:
        out = [f"--nodes={nodes}", *([f"--time={int(runtime)}"] if runtime else []), f"--partition={queue}"]
        if res.get("account"):
            out.append(f"--account={res['account']}")
        if mem_mb:
            out.append(f"--mem={int(mem_mb)}")
        if node_devices:
            out.append("--exclusive")
            gpus = node_devices
        else:
            srun = bool(res.get("launcher")) and launchers.get(res["launcher"]).srun_ranks
            tasks, cores = (int(ranks), int(threads)) if srun else (1, int(threads) * int(ranks))
            out += [f"--ntasks-per-node={tasks}", f"--cpus-per-task={cores}"]
            gpus = ranks
        if device == "cuda":
            out.append(f"--gpus-per-node={int(gpus)}")
        return shlex.join(out)

    ranks = res.get("procs_per_node", 1)
    return _of_wildcards(flags, res.get("nodes", 1), res.get("runtime"), res["queue"], ranks)


def slurm_setup(cluster: dict, study_dir: str, under_slurm: Callable[[], bool]) -> dict[str, Any]:
    """`slurm_setup`, the first lines of a cluster job's shell: the study's set-up lines and caches
    (prism.launch.jobenv.setup_shell) where the job goes through Snakemake's Slurm executor (`under_slurm()`:
    prism.workflow.engine.Engine.runs_under_slurm), "" otherwise (profiles/aurora's job script runs them
    itself; a local or dry run needs none)."""
    shell = setup_shell(cluster, study_dir)
    return {"slurm_setup": lambda wildcards: shell if under_slurm() else ""}


def _of_wildcards(combine: Any, *values: Any) -> Any:
    """`combine` of `values`, each a value or a function of the job's wildcards: a function of them where any is."""
    if not any(callable(v) for v in values):
        return combine(*values)
    return lambda w: combine(*(v(w) if callable(v) else v for v in values))
