"""A job's ranks (the batches they can split: tests/data/test_batching.py)."""

from __future__ import annotations

from prism.launch.ranks import cluster_ranks, job_ranks, study_ranks


def test_job_ranks_follow_the_launcher():
    assert job_ranks("local") == 1
    assert job_ranks("aurora", nodes=1) == 12 and job_ranks("aurora", nodes=8) == 96
    assert job_ranks("aurora", nodes=2, procs_per_node=4) == 8


def test_a_study_plans_one_batch_every_job_can_split():
    assert study_ranks("aurora", [1]) == 12
    assert study_ranks("aurora", [1, 2, 8]) == 96
    assert study_ranks("aurora", [3, 2]) == 72
    assert study_ranks("local", [1]) == 1


def test_cluster_ranks_from_a_study_config():
    cluster = {"nodes": 1, "ranks_per_node": 12, "nodes_by_backbone": {"g1e9": 2}}
    assert cluster_ranks("aurora", cluster) == (12, 24)
    assert cluster_ranks("aurora", {"nodes": 1, "ranks_per_node": 4}) == (4, 4)
    assert cluster_ranks("local", cluster) == (1, 1)  # one process per job, whatever the cluster section says
