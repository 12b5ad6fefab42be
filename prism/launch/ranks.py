"""How many processes a training job runs (whether its global batch divides among them:
prism.data.batching.check_batch). Pure functions, no torch.
"""

from __future__ import annotations

import math

from prism.launch.registry import get


def job_ranks(launcher: str, nodes: int = 1, procs_per_node: int | None = None) -> int:
    """The processes of one job of `launcher` on `nodes` nodes (`procs_per_node` overrides the launcher's
    `procs_per_node`; where the host decides them, as torchrun's, one)."""
    per_node = procs_per_node or get(launcher).procs_per_node or 1
    return max(int(nodes), 1) * int(per_node)


def study_ranks(launcher: str, node_counts: list[int], procs_per_node: int | None = None) -> int:
    """The smallest count every job of a study divides: the least common multiple of its jobs' ranks.

    A study whose backbones run on different node counts (cluster.nodes_by_backbone) plans one batch
    that divides among the ranks of each of them.
    """
    return math.lcm(*(job_ranks(launcher, n, procs_per_node) for n in (node_counts or [1])))


def cluster_ranks(launcher: str, cluster: dict) -> tuple[int, int]:
    """(ranks per node, ranks every job's batch divides among) of a study config's `cluster:` section.

    Only a cluster launcher (aurora) runs several ranks a job; `local` jobs are one process wherever they run.
    """
    chosen = get(launcher)
    if not chosen.cluster:
        return 1, 1
    per_node = int(cluster.get("ranks_per_node") or chosen.procs_per_node or 1)
    nodes = [int(cluster.get("nodes", 1)), *(int(n) for n in (cluster.get("nodes_by_backbone") or {}).values())]
    return per_node, study_ranks(launcher, nodes, per_node)
