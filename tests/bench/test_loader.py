"""prism data bench: runs and reports (no timing assertions; the figure goes to the README)."""

from __future__ import annotations

import pytest

from prism.bench.loader import bench, bench_stream, step_rate, workers_needed
from prism.cli import main
from prism.core.errors import PrismError


def test_bench_reports_rates_and_packing(built, capsys):
    padded = bench(str(built("text_image")), global_batch=32, seconds=0.05, repeats=2)
    assert padded["samples_per_s"] > 0 and padded["samples_per_row"] == 1.0 and padded["threads"] == 1
    packed = bench(str(built("text_image")), global_batch=8, seconds=0.05, repeats=2, layout="packed", seq_len=256)
    assert packed["samples_per_row"] > 3
    assert main(["data", "bench", "--data", str(built("text_image")), "--seconds", "0.05", "--repeats", "1"]) == 0
    assert "samples_per_s" in capsys.readouterr().out


def test_the_stream_bench_decodes_at_the_asked_shape_and_sizes_the_workers(built, tmp_path, capsys):
    result = bench_stream(str(built("text_image")), global_batch=8, batches=2, repeats=1, step_samples_per_s=1e9)
    assert result["samples_per_s_per_worker"] > 0 and result["modality_shape"] == [1, 8, 8]
    assert result["workers_needed"] == workers_needed(result["samples_per_s_per_worker"], 1e9) > 1
    rows = tmp_path / "throughput.jsonl"
    rows.write_text(
        '{"test": "forward_only", "samples_per_s": 900.0}\n{"test": "fwd_bwd", "samples_per_s": 300.0}\n'
        '{"test": "batch_scaling", "samples_per_s": 450.0}\n'
    )
    assert step_rate(str(rows)) == 450.0  # the fastest training step, not the forward pass
    args = ["data", "bench", "--data", str(built("text_image")), "--stream", "--batches", "1", "--repeats", "1"]
    assert main([*args, "--global-batch", "4", "--throughput", str(rows)]) == 0
    out = capsys.readouterr().out
    assert "step_samples_per_s: 450.0" in out and "workers_needed" in out


def test_workers_needed_keeps_a_quarter_in_hand():
    assert workers_needed(100.0, 100.0) == 2  # 125 samples/s wanted of 100-a-worker processes
    assert workers_needed(500.0, 100.0) == 1
    assert workers_needed(507.0, 1000.0) == 3


def test_a_throughput_file_without_a_training_step_is_refused(tmp_path):
    rows = tmp_path / "t.jsonl"
    rows.write_text('{"test": "forward_only", "samples_per_s": 900.0}\n')
    with pytest.raises(PrismError, match="no fwd_bwd or batch_scaling row.*--test fwd_bwd"):
        step_rate(str(rows))
