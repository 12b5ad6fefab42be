"""The one check that a global batch splits among a job's ranks (the plan, the launchers, the loader)."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.data.batching import check_batch, nearest_multiples


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


def test_a_batch_of_no_rows_is_refused_whatever_the_ranks():
    with pytest.raises(PrismError, match=r"^--global-batch must be a positive integer, got 0$"):
        check_batch(0, 1, "--global-batch", "this run (1 processes)")


def test_the_loader_and_the_launcher_refuse_a_batch_with_the_same_message():
    """A job started by hand meets the plan's wording: the setting, the ranks, two batches that work."""
    from prism.data.loader import check_batching

    with pytest.raises(PrismError) as err:
        check_batching(0, 2, 9)
    assert str(err.value) == (
        "--global-batch 9 does not divide among the 2 ranks of this run (2 processes) (9 = 4 x 2 + 1): "
        "use a multiple of 2, e.g. 8 or 10"
    )
