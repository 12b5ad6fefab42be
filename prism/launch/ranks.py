"""How many processes a training job runs, and whether its global batch divides among them.

Every rank takes `global_batch / ranks` rows per step, so a batch that does not divide stops
the job at its first step. On a cluster that is a queued job lost per run; the plan therefore
asks these functions before anything is submitted, and the job body asks them again when it
is written. Pure functions, no torch.
"""

from __future__ import annotations

import math

from prism.errors import PrismError

# Processes per node of each launcher, where it fixes them: `aurora` one per XPU tile (6 GPUs
# of 2 tiles, ALCF's layout); `local` is one process. torchrun's default depends on the host.
RANKS_PER_NODE = {"local": 1, "aurora": 12}


def job_ranks(launcher: str, nodes: int = 1, procs_per_node: int | None = None) -> int:
    """The processes of one job of `launcher` on `nodes` nodes (`procs_per_node` overrides the launcher's)."""
    per_node = procs_per_node or RANKS_PER_NODE.get(launcher, 1)
    return max(int(nodes), 1) * int(per_node)


def study_ranks(launcher: str, node_counts: list[int], procs_per_node: int | None = None) -> int:
    """The smallest count every job of a study divides: the least common multiple of its jobs' ranks.

    A study whose backbones run on different node counts (cluster.nodes_by_backbone) plans one batch
    that divides among the ranks of each of them.
    """
    return math.lcm(*(job_ranks(launcher, n, procs_per_node) for n in (node_counts or [1])))


def nearest_multiples(batch: int, ranks: int) -> tuple[int, int]:
    """The multiples of `ranks` just below and above `batch` (the lower one at least `ranks`)."""
    below = batch // ranks * ranks or ranks
    return below, below + ranks


def check_batch(global_batch: int, ranks: int, where: str, how: str) -> None:
    """Refuse a global batch that the job's ranks cannot split, naming the setting and two that work.

    `where` names the setting (e.g. "plan.global_batch" or "--global-batch"), `how` the ranks
    (e.g. "a 1-node aurora job (12 ranks per node)").
    """
    if ranks > 1 and global_batch % ranks:
        below, above = nearest_multiples(global_batch, ranks)
        raise PrismError(
            f"{where} {global_batch} does not divide among the {ranks} ranks of {how} "
            f"({global_batch} = {global_batch // ranks} x {ranks} + {global_batch % ranks}): "
            f"use a multiple of {ranks}, e.g. {below} or {above}"
        )


def cluster_ranks(launcher: str, cluster: dict) -> tuple[int, int]:
    """(ranks per node, ranks every job's batch divides among) of a study config's `cluster:` section.

    Only the aurora launcher runs several ranks a job; `local` jobs are one process wherever they run.
    """
    if launcher != "aurora":
        return 1, 1
    per_node = int(cluster.get("ranks_per_node") or RANKS_PER_NODE["aurora"])
    nodes = [int(cluster.get("nodes", 1)), *(int(n) for n in (cluster.get("nodes_by_backbone") or {}).values())]
    return per_node, study_ranks(launcher, nodes, per_node)
