"""What a shard should hold: img2dataset's count beside it, and the loss a broken shard is counted for."""

from __future__ import annotations

import json

import pytest

from prism.data.shardcount import expected_samples, shard_loss


@pytest.mark.parametrize("text", ["not json", '{"count": 5}', '{"successes": "5"}', '{"successes": -1}', "[1]"])
def test_a_stats_file_that_gives_no_count_is_no_count(tmp_path, text):
    (tmp_path / "00000_stats.json").write_text(text)
    assert expected_samples(tmp_path / "00000.tar") is None


def test_the_count_decides_the_loss_and_without_it_a_broken_shard_loses_one(tmp_path):
    tar = tmp_path / "00003.tar"
    assert shard_loss(tar, good=10, bad=0, broken=None, partial=False) is None  # whole, nothing says otherwise
    unknown = shard_loss(tar, good=0, bad=0, broken="0 bytes", partial=False)
    assert unknown.missing == 1 and "no 00003_stats.json" in unknown.said
    assert shard_loss(tar, good=4, bad=1, broken="truncated", partial=True).missing == 0  # the cut sample is named
    (tmp_path / "00003_stats.json").write_text(json.dumps({"successes": 10}))
    cut = shard_loss(tar, good=4, bad=1, broken="truncated", partial=True)
    assert cut.missing == 5 and "4 of the 10 samples its 00003_stats.json lists are readable, 6 lost" in cut.said
    assert shard_loss(tar, good=10, bad=0, broken=None, partial=False) is None
