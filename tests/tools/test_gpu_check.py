"""tools/gpu-check.sh parses, and its table reads what the check writes (the runs themselves need an accelerator)."""

import json
import subprocess

from .conftest import TOOLS, load_tool


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(TOOLS / "gpu-check.sh")]).returncode == 0


def test_the_table_gives_each_part_its_step_and_mfu(tmp_path):
    (tmp_path / "peak-bf16.txt").write_text("peak 692000.0 GFLOP/s (measured; ...)\n")
    bench = {"test": "fwd_bwd", "model": "1b", "batch": 8, "seq_len": 2048, "dtype": "bf16", "compile": "static"}
    bench |= {"step_time_s": 0.2266, "mfu": 0.858, "flops_per_s": 5.94e14}
    (tmp_path / "perf.jsonl").write_text(json.dumps(bench) + "\n")
    (tmp_path / "llama.json").write_text(json.dumps({"model": "1b", "batch": 8, "seq_len": 2048, "dtype": "bf16",
                                                     "step_time_s": 0.3398}))  # fmt: skip
    run = tmp_path / "train-compiled"
    run.mkdir()
    time = {"steady_step_s": 0.25, "steady_mfu": 0.7}
    (run / "metrics.json").write_text(json.dumps({"loss": 3.5, "precision": "bf16", "time": time}))
    (run / "eval.jsonl").write_text(json.dumps({"final": True, "eval_samples": 8640, "eval_s": 95.0}) + "\n")
    (tmp_path / "train-eager").mkdir()
    timed = {"batch_size": 8, "precision": "bf16", "compile": "static", "step_time_s": 0.24, "flops_per_s": 5.5e14}
    speed = {"backbone": "1b", "seq_len": 2048, "samples_per_s": 33.3, "throughput": timed}
    (tmp_path / "speed.json").write_text(json.dumps(speed))
    rows = {row[0]: row for row in load_tool("gpu_check").table_rows(tmp_path)}
    # The speed a cluster plan prices node-hours with, against the bf16 peak the bench measured (5.94e14 / 0.858).
    assert rows["speed calibration 1b 8x2048 bf16, compile static"][1:] == (
        "240.0 ms",
        "79.4%",
        "33.3 samples/s, 550 TFLOP/s a rank",
    )
    assert rows["bench fwd_bwd 1b 8x2048 bf16, compile static"][1:3] == ("226.6 ms", "85.8%")
    assert rows["transformers Llama 1b 8x2048 bf16"][1] == "339.8 ms"
    compiled = rows["prism train train-compiled"]
    assert compiled[1:3] == ("250.0 ms", "70.0%") and "8640 samples" in compiled[3] and "1.36x Llama" in compiled[3]
    assert "no metrics.json" in rows["prism train train-eager"][3]
    assert rows["bench peak bf16"][3].startswith("peak 692000.0")
