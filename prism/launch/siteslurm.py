"""The Slurm side of `prism cluster check`: the partitions a study's jobs go to, as Slurm has them.

A job that asks a partition for more than it allows waits forever (`PartitionTimeLimit`,
`PartitionNodeLimit` in squeue's reason column) or is refused by sbatch, after the plan and the
calibration have run; a partition whose nodes have no GPUs runs a cuda job to a "no CUDA device"
traceback. Both are cheap to see from the login node: `scontrol show partition --oneliner` gives
each partition's state and limits, `scontrol show node --oneliner` each node's partitions and its
`gpu` GRES. The partitions checked are those the workflow would choose for the study's jobs
(prism.launch.queues.queue_for: cluster.queue, or with cluster.queues the one a job fits), at the
node counts and walltimes its jobs ask. Parsing and judging are pure functions of the text.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prism.core.errors import PrismError
from prism.launch.queues import parse_queues, queue_for
from prism.launch.ranks import cluster_ranks
from prism.launch.sitepbs import Check
from prism.launch.walltime import SPEED_WALLTIME, walltime_seconds, walltime_text

Runner = Callable[[list[str]], "str | None"]
# A key=value field of scontrol's --oneliner output; a word without `=` continues the value before it
# (a node's OS=Linux 6.1.0 #1 SMP ...).
FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9_/:.]*)=(.*)$")
UNLIMITED = {"UNLIMITED", "INFINITE", "NONE", "N/A", ""}
NO_GPU = (
    "no CUDA device visible: the GPU and NCCL checks did not run; run this on a GPU node (srun --gres=gpu:2 --pty ...)"
)


def scontrol(args: list[str]) -> str | None:
    """`scontrol ARGS`' output, or None where scontrol is missing or fails."""
    try:
        out = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def records(text: str) -> list[dict[str, str]]:
    """One dict a line of `scontrol show partition|node --oneliner` (key=value fields)."""
    out = []
    for line in text.splitlines():
        fields: dict[str, str] = {}
        last = None
        for word in line.split():
            match = FIELD.match(word)
            if match:
                last = match.group(1)
                fields[last] = match.group(2)
            elif last:
                fields[last] += " " + word
        if fields:
            out.append(fields)
    return out


def time_seconds(text: str) -> int | None:
    """A Slurm time limit (`D-HH:MM:SS`, `HH:MM:SS`, `MM:SS`, minutes) in seconds; None where unlimited."""
    text = text.strip()
    if text.upper() in UNLIMITED:
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days and len(parts) == 1:  # D-HH
        parts += [0, 0]
    elif days and len(parts) == 2:  # D-HH:MM
        parts += [0]
    elif not days and len(parts) == 1:  # minutes
        parts = [0, parts[0], 0]
    elif not days and len(parts) == 2:  # MM:SS
        parts = [0, *parts]
    hours, minutes, seconds = parts
    return (int(days or 0) * 24 + hours) * 3600 + minutes * 60 + seconds


def limit(text: str | None) -> int | None:
    """A count limit (MaxNodes=UNLIMITED or a number); None where unlimited or not said."""
    return None if text is None or text.upper() in UNLIMITED else int(text)


def gpus_of(gres: str) -> int:
    """GPUs in a node's `Gres=` (gpu:4, gpu:a100:4(S:0-1), gpu:a100:2,gpu:v100:2; (null): none)."""
    total = 0
    for item in re.split(r",(?![^(]*\))", gres):
        words = item.split("(")[0].split(":")
        if words[0] == "gpu" and len(words) > 1 and words[-1].isdigit():
            total += int(words[-1])
    return total


@dataclass(frozen=True)
class Demand:
    """What the study's jobs ask of one partition: the fewest and most nodes, the longest walltime, GPUs a node."""

    partition: str
    min_nodes: int
    max_nodes: int
    longest_s: int
    gpus_per_node: int


def job_kinds(cluster: Mapping) -> list[tuple[int, str]]:
    """(nodes, cap walltime) of each kind of training job: the default's, and each backbone's named in
    cluster.nodes_by_backbone or cluster.walltimes."""
    nodes, walltimes = cluster.get("nodes_by_backbone") or {}, cluster.get("walltimes") or {}
    kinds = {(int(cluster.get("nodes", 1)), str(cluster.get("walltime", "00:30:00")))}
    for backbone in {*nodes, *walltimes}:
        kinds.add(
            (
                int(nodes.get(backbone, cluster.get("nodes", 1))),
                str(walltimes.get(backbone, cluster.get("walltime", "00:30:00"))),
            )
        )
    return sorted(kinds)


def demands(config: Mapping) -> list[Demand]:
    """The partitions the study's jobs go to, by the workflow's own choice (queue_for) at each job kind's shortest
    and longest walltime and each queue's limit between them; a speed job (one node, SPEED_WALLTIME) goes to
    cluster.queue. Raises PrismError where no queue of cluster.queues holds a job."""
    cluster, train = config.get("cluster") or {}, config.get("train") or {}
    per_node = cluster_ranks(str(train.get("launcher", "local")), dict(cluster))[0]
    gpus = per_node if train.get("device") == "cuda" else 0
    least = walltime_seconds(str(cluster.get("min_walltime", "00:00:00")))
    bounds = [q.max_walltime_s for q in parse_queues(cluster.get("queues") or {})]
    asked: list[tuple[str, int, int, int]] = [
        (str(cluster.get("queue")), 1, walltime_seconds(SPEED_WALLTIME), min(gpus, 1))
    ]
    for nodes, cap in job_kinds(cluster):
        most = walltime_seconds(cap)
        for seconds in {min(least, most), most, *(b for b in bounds if least <= b < most)}:
            partition, fitted = queue_for(dict(cluster), nodes, seconds)
            asked.append((partition, nodes, fitted, gpus))
    out = []
    for name in dict.fromkeys(p for p, *_ in asked):
        mine = [a for a in asked if a[0] == name]
        nodes = [a[1] for a in mine]
        out.append(Demand(name, min(nodes), max(nodes), max(a[2] for a in mine), max(a[3] for a in mine)))
    return out


def partition_problems(demand: Demand, fields: Mapping[str, str]) -> list[str]:
    """What the study's jobs would break of one partition's state and limits, each with the key to change."""
    name, problems = demand.partition, []
    state = fields.get("State", "UP")
    if state != "UP":
        problems.append(f"partition {name} is {state}, not UP: choose another (cluster.queue) or ask the site")
    most = time_seconds(fields.get("MaxTime", "UNLIMITED"))
    if most is not None and demand.longest_s > most:
        problems.append(
            f"the longest job asks {walltime_text(demand.longest_s)}, above partition {name}'s MaxTime "
            f"{fields['MaxTime']}: set cluster.walltime (and cluster.walltimes) to at most {walltime_text(most)}"
        )
    if fields.get("TotalNodes") == "0":
        problems.append(f"partition {name} has no nodes: choose another (cluster.queue)")
    high, low = limit(fields.get("MaxNodes")), limit(fields.get("MinNodes"))
    if high is not None and demand.max_nodes > high:
        problems.append(
            f"a {demand.max_nodes}-node job is above partition {name}'s MaxNodes {high}: "
            "set cluster.nodes (and cluster.nodes_by_backbone) within it"
        )
    if low is not None and demand.min_nodes < low:
        problems.append(
            f"a {demand.min_nodes}-node job is below partition {name}'s MinNodes {low}: "
            "choose another partition (cluster.queue) or raise cluster.nodes"
        )
    return problems


def check_partitions(config: Mapping, run: Runner = scontrol) -> list[Check]:
    """Each partition the study's jobs go to: it exists, is UP, and holds their nodes and walltime."""
    try:
        wanted = demands(config)
    except PrismError as err:
        return [Check("partitions", False, str(err))]
    text = run(["show", "partition", "--oneliner"])
    if text is None:
        return [
            Check("partitions", False, "no `scontrol show partition` answer here: run this where Slurm's commands work")
        ]
    found = {r["PartitionName"]: r for r in records(text) if "PartitionName" in r}
    out = []
    for demand in wanted:
        name = f"partition {demand.partition}"
        fields = found.get(demand.partition)
        if fields is None:
            known = ", ".join(found) or "none"
            out.append(
                Check(name, False, f"no such partition (Slurm has {known}): set cluster.queue (or cluster.queues)")
            )
            continue
        problems = partition_problems(demand, fields)
        if problems:
            out.append(Check(name, False, "; ".join(problems)))
            continue
        nodes = f"{demand.min_nodes}-{demand.max_nodes}" if demand.min_nodes < demand.max_nodes else demand.max_nodes
        out.append(
            Check(
                name,
                True,
                f"UP; the jobs ({nodes} node(s), up to {walltime_text(demand.longest_s)}) fit MaxTime "
                f"{fields.get('MaxTime', '?')}, MaxNodes {fields.get('MaxNodes', '?')}",
            )
        )
    return out


def check_gres(config: Mapping, run: Runner = scontrol) -> list[Check]:
    """Where the jobs ask GPUs (train.device cuda), enough of each partition's nodes have that many `gpu` GRES."""
    try:
        wanted = [d for d in demands(config) if d.gpus_per_node]
    except PrismError:
        return []  # check_partitions says why
    if not wanted:
        return []
    text = run(["show", "node", "--oneliner"])
    if text is None:
        return [Check("gpus", False, "no `scontrol show node` answer here: run this where Slurm's commands work")]
    nodes = [r for r in records(text) if "NodeName" in r]
    out = []
    for demand in wanted:
        mine = [n for n in nodes if demand.partition in n.get("Partitions", "").split(",")]
        if mine:  # a partition without nodes fails its partition check
            out.append(gres_check(demand, mine))
    return out


def gres_check(demand: Demand, nodes: list[dict[str, str]]) -> Check:
    """Enough of a partition's `nodes` (scontrol's records) have the GPUs a node its jobs ask."""
    counts = [gpus_of(n.get("Gres", "")) for n in nodes]
    enough, most = sum(c >= demand.gpus_per_node for c in counts), max(counts)
    name, where = f"gpus {demand.partition}", f"partition {demand.partition}"
    asked = f"the jobs ask {demand.gpus_per_node} GPU(s) a node (train.device cuda)"
    if enough >= demand.max_nodes:
        return Check(name, True, f"{enough} of {len(nodes)} node(s) have >= {demand.gpus_per_node} gpu GRES")
    gres = nodes[counts.index(most)].get("Gres", "(null)")
    if most == 0:
        fix = "set cluster.queue to a GPU partition (sinfo -o '%P %G' lists them)"
        return Check(name, False, f"no node of {where} has a gpu GRES (Gres={gres}); {asked}: {fix}")
    return Check(
        name,
        False,
        f"{enough} of {where}'s {len(nodes)} node(s) have {demand.gpus_per_node} GPUs (the most: Gres={gres}); "
        f"{asked} on {demand.max_nodes} node(s): set cluster.queue to another partition, or "
        "cluster.ranks_per_node to at most the GPUs a node has",
    )


def check_account(cluster: Mapping, placeholder: str) -> Check:
    """cluster.queue names a partition; cluster.account is optional (sbatch without -A) but not a placeholder."""
    queue, account = str(cluster.get("queue") or "").strip(), str(cluster.get("account") or "").strip()
    if not queue or placeholder in queue:
        return Check("scheduler", False, "cluster.queue not filled in: set the partition (sbatch -p)")
    if placeholder in account:
        return Check(
            "scheduler", False, "cluster.account not filled in: set your account (sbatch -A) or leave it empty"
        )
    said = f"account {account}" if account else "no account (sbatch without -A)"
    return Check("scheduler", True, f"Slurm: {said}, partition {queue}")


def in_allocation(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this command runs inside a Slurm job (an `srun --pty` or `salloc` shell): its steps start by srun."""
    environ = os.environ if environ is None else environ
    return bool(environ.get("SLURM_JOB_ID"))


def srun_prefix(ranks: int) -> list[str]:
    """How the collective check starts `ranks` tasks on this node inside the job: a step that shares the
    interactive step's CPUs and GPUs (--overlap), each task's place exported from Slurm's as a job's ranks
    do it (prism.launch.slurm.TASK_ENV)."""
    from prism.launch.slurm import TASK_ENV  # noqa: PLC0415 lazy: only in an allocation

    srun = ["srun", "--nodes=1", f"--ntasks={ranks}", "--overlap", "--overcommit", "--kill-on-bad-exit=1"]
    return [*srun, "bash", "-c", TASK_ENV.format(ppn=ranks), "prism-rank"]
