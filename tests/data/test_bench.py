"""prism data bench: runs and reports (no timing assertions; the figure goes to the README)."""

from __future__ import annotations

from prism.cli import main
from prism.data.bench import bench


def test_bench_reports_rates_and_packing(built, capsys):
    padded = bench(str(built("text_image")), global_batch=32, seconds=0.05, repeats=2)
    assert padded["samples_per_s"] > 0 and padded["samples_per_row"] == 1.0 and padded["threads"] == 1
    packed = bench(str(built("text_image")), global_batch=8, seconds=0.05, repeats=2, layout="packed", seq_len=256)
    assert packed["samples_per_row"] > 3
    assert main(["data", "bench", "--data", str(built("text_image")), "--seconds", "0.05", "--repeats", "1"]) == 0
    assert "samples_per_s" in capsys.readouterr().out
