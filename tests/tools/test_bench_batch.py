"""tools/bench_batch.py: a step's fixed and per-sample cost from its time at several batch sizes."""

import pytest

from .conftest import load_tool


def test_the_line_through_step_times_recovers_fixed_and_per_sample_cost():
    tool = load_tool("bench_batch")
    batches = [1, 4, 32, 64]
    fixed, per_sample = tool.fit_line(batches, [0.004 + b * 0.0005 for b in batches])
    assert fixed == pytest.approx(0.004) and per_sample == pytest.approx(0.0005)


def test_it_measures_the_study_step_on_shards(shards, capsys):
    tool = load_tool("bench_batch")
    argv = ["--data", str(shards), "--backbones", "n89e2", "--batches", "1,8", "--batch", "8"]
    assert tool.main([*argv, "--steps", "2", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(" n89e2: B1 ") and ", B8 " in out and "at B8 the fixed cost is" in out


def test_one_batch_size_cannot_separate_the_costs(shards):
    tool = load_tool("bench_batch")
    with pytest.raises(SystemExit):
        tool.main(["--data", str(shards), "--batches", "32", "--batch", "32"])
