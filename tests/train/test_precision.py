"""The precision policy: what auto means where, what bf16 computes in, and that it is a run's setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from prism.core.errors import PrismError
from prism.isoflop.runs.launch import run_args
from prism.train import precision
from prism.train.config import RunConfig
from prism.train.options import TrainOptions
from prism.train.rundir.runfiles import read_jsonl

# bf16 against fp32 on the tests' tiny run, 40 steps, the same 512 held-out samples: measured 2.1612 against
# 2.1814 (0.9%). Mixed precision changes the trajectory by rounding, not the result: 3% is a loose bound.
BF16_LOSS_TOLERANCE = 0.03
ROW = {"family": "text_image", "backbone": "30k", "variant": "BASE", "regime": "e2e", "budget": 3e11, "global_batch": 8}


@pytest.mark.parametrize(
    ("setting", "device", "resolved"),
    [("auto", "cpu", "fp32"), ("auto", "cuda", "bf16"), ("auto", "xpu", "bf16"), ("fp32", "cuda", "fp32"),
     ("bf16", "cpu", "bf16")],
)  # fmt: skip
def test_auto_is_bf16_on_an_accelerator_and_fp32_on_a_cpu(setting, device, resolved):
    assert precision.resolve(setting, device) == resolved


def test_an_unknown_precision_is_one_line():
    with pytest.raises(PrismError, match="unknown precision 'fp16'; valid: auto, fp32, bf16"):
        precision.resolve("fp16", "cpu")
    with pytest.raises(PrismError, match="precision"):
        RunConfig(**ROW, data="d", out="o", precision="fp16")


def test_bf16_computes_matmuls_in_bf16_and_fp32_leaves_them():
    linear = torch.nn.Linear(4, 4)
    with precision.autocast("cpu", "bf16"):
        assert linear(torch.ones(2, 4)).dtype == torch.bfloat16
    with precision.autocast("cpu", "fp32"):
        assert linear(torch.ones(2, 4)).dtype == torch.float32
    assert linear.weight.dtype == torch.float32  # the master weights stay fp32


def test_fsdp_gathers_bf16_weights_and_reduces_fp32_gradients():
    policy = precision.fsdp_policy("bf16")
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert precision.fsdp_policy("fp32") is None


def test_precision_is_a_rerun_trigger_and_the_default_adds_no_flag():
    """The workflow's command carries the study's precision when it is not the default (so changing it
    retrains, and existing studies' commands stay as they were); a run directory refuses another one."""
    for setting, flag in (("auto", None), ("bf16", "--precision bf16"), ("fp32", "--precision fp32")):
        settings = TrainOptions(precision=setting).run_settings()
        args = run_args(ROW, "data", "out", **settings)
        assert (flag in args) if flag else ("--precision" not in args), (setting, args)
    run = RunConfig(**ROW, data="d", out="o")
    assert run.result_mismatch(RunConfig(**ROW, data="d", out="o", precision="bf16")) == ["precision: 'bf16' -> 'auto'"]


def _train_tiny(train, out: Path, setting: str):
    res = train(out, "--max-steps", "40", "--final-eval-samples", "512", "--precision", setting)
    assert res.returncode == 0, res.stderr
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.slow
def test_a_bf16_run_trains_to_the_fp32_runs_loss_and_records_its_precision(train, tmp_path):
    fp32 = _train_tiny(train, tmp_path / "fp32", "fp32")
    bf16 = _train_tiny(train, tmp_path / "bf16", "bf16")
    assert bf16["loss"] < 0.5 * bf16["initial_eval_loss"]
    assert abs(bf16["loss"] - fp32["loss"]) <= BF16_LOSS_TOLERANCE * fp32["loss"], (bf16["loss"], fp32["loss"])
    assert bf16["loss"] != fp32["loss"]  # it did compute in bf16
    assert (fp32["precision"], bf16["precision"]) == ("fp32", "bf16")
    # Which path the blocks took, recorded: the fused kernels are fp32's (where they build), ATen bf16's.
    assert (
        fp32["kernel_path"] == ("fused" if fp32["kernel_error"] is None else "aten") and bf16["kernel_path"] == "aten"
    )
    assert bf16["time"]["precision"] == "bf16" and bf16["time"]["steady_mfu"] > 0
    assert all(row["precision"] == "bf16" and row["peak_flops"] > 0 for row in read_jsonl(tmp_path / "bf16/perf.jsonl"))
    # Another precision on the same run directory is another run: refused, nothing touched.
    again = train(tmp_path / "bf16", "--max-steps", "40", "--final-eval-samples", "512", "--precision", "fp32")
    assert again.returncode != 0 and "precision: 'bf16' -> 'fp32'" in again.stderr


def test_the_memory_preflight_counts_bf16_activations_at_two_bytes(shards):
    """A bf16 step's saved activations are half an fp32 step's; its logits stay fp32."""
    from prism.train.preflight import step_bytes_lower_bound

    data = str(shards)  # the run's rows are its data's (spec): its tokens a sample and vocabulary
    fp32 = step_bytes_lower_bound(RunConfig(**ROW, data=data, out="o", precision="fp32"), 1, "cuda")
    bf16 = step_bytes_lower_bound(RunConfig(**ROW, data=data, out="o"), 1, "cuda")  # auto on cuda
    on_cpu = step_bytes_lower_bound(RunConfig(**ROW, data=data, out="o"), 1, "cpu")  # auto on a CPU: fp32
    assert fp32 == on_cpu > bf16 > fp32 / 2


def test_a_checkpoint_resumes_only_in_the_precision_it_was_trained_in():
    """An `auto` run moved from a CPU (fp32) to a GPU (bf16) would change precision mid-run: refused in one
    line naming the flag that continues it. Checkpoints from before the record were fp32."""
    from types import SimpleNamespace

    from prism.train.trainer import Trainer

    run = RunConfig(**ROW, data="d", out="o")
    trainer = SimpleNamespace(config=run, precision="bf16", device=torch.device("cpu"))
    for extra in ({"precision": "fp32"}, {}):
        with pytest.raises(PrismError, match="trained in fp32, this run computes in bf16.*pass --precision fp32"):
            Trainer._restore(trainer, 10, {}, extra)
