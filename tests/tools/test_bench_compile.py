"""tools/bench_compile.py: eager against compiled blocks, one size, a few steps."""

import pytest

from .conftest import load_tool


@pytest.mark.slow
def test_compile_comparison_runs_on_shards(shards, capsys):
    tool = load_tool("bench_compile")
    assert (
        tool.main(["--data", str(shards), "--backbones", "4k", "--steps", "2", "--warmup", "0", "--global-batch", "4"])
        == 0
    )
    out = capsys.readouterr().out
    assert "4k: compile" in out and "eager/compiled step time per pair median" in out and "|diff|" in out
