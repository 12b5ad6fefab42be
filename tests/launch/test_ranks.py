"""A job's ranks and the batches they can split."""

from __future__ import annotations

import pytest

from prism.errors import PrismError
from prism.launch.ranks import check_batch, cluster_ranks, job_ranks, nearest_multiples, study_ranks


def test_job_ranks_follow_the_launcher():
    assert job_ranks("local") == 1
    assert job_ranks("aurora", nodes=1) == 12 and job_ranks("aurora", nodes=8) == 96
    assert job_ranks("aurora", nodes=2, procs_per_node=4) == 8


def test_a_study_plans_one_batch_every_job_can_split():
    assert study_ranks("aurora", [1]) == 12
    assert study_ranks("aurora", [1, 2, 8]) == 96
    assert study_ranks("aurora", [3, 2]) == 72
    assert study_ranks("local", [1]) == 1


def test_nearest_multiples():
    assert nearest_multiples(256, 12) == (252, 264)
    assert nearest_multiples(5, 12) == (12, 24)


def test_check_batch_names_the_setting_and_two_that_work():
    check_batch(384, 12, "plan.global_batch", "x")
    check_batch(7, 1, "plan.global_batch", "x")
    with pytest.raises(PrismError) as err:
        check_batch(256, 12, "plan.global_batch", "a 1-node aurora job (cluster.nodes 1 x 12 ranks per node)")
    assert str(err.value) == (
        "plan.global_batch 256 does not divide among the 12 ranks of a 1-node aurora job (cluster.nodes 1 x 12 "
        "ranks per node) (256 = 21 x 12 + 4): use a multiple of 12, e.g. 252 or 264"
    )


def test_cluster_ranks_from_a_study_config():
    cluster = {"nodes": 1, "ranks_per_node": 12, "nodes_by_backbone": {"g1e9": 2}}
    assert cluster_ranks("aurora", cluster) == (12, 24)
    assert cluster_ranks("aurora", {"nodes": 1, "ranks_per_node": 4}) == (4, 4)
    assert cluster_ranks("local", cluster) == (1, 1)  # one process per job, whatever the cluster section says
