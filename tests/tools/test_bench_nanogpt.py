"""tools/bench_nanogpt.py: the nanoGPT baseline and the interleaved comparison run."""

import torch

from .conftest import load_tool


def test_nanogpt_is_gpt2_shaped_and_its_flops_are_counted():
    tool = load_tool("bench_nanogpt")
    d, layers = 32, 2
    model = tool.NanoGPT(264, 16, d, layers, 2)
    # blocks: 12 d^2 weights + 13 d biases/norms each; tied wte/lm_head, wpe, final LayerNorm.
    assert sum(p.numel() for p in model.parameters()) == layers * (12 * d * d + 13 * d) + 264 * d + 16 * d + 2 * d
    idx = torch.randint(0, 264, (2, 16))
    flops = tool.training_flops(model, (idx, idx))
    # forward 2 * tokens * matmul weights (+ attention), backward twice that.
    assert flops >= 3 * 2 * 32 * (layers * 12 * d * d + 264 * d)
    opt = tool.nanogpt_optimizer(model, 1e-3, fused=False)
    wall, cpu = tool.make_step(model, opt, (idx, idx))()
    assert wall > 0 and cpu >= 0


def test_comparison_runs_on_shards(shards, capsys):
    tool = load_tool("bench_nanogpt")
    assert tool.main(["--data", str(shards), "--backbones", "15k", "--steps", "4", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "15k: prism" in out and "prism/nanogpt FLOP/s per pair: median" in out
