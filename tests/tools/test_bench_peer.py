"""tools/bench_peer.py: transformers' Llama at a prism backbone's shape does the same arithmetic."""

import math

import pytest
import torch

from prism.model.config import BackboneConfig

from .conftest import load_tool

pytest.importorskip("transformers")

# Two KV heads under four query heads: grouped-query attention is built alike too.
TINY = BackboneConfig("tiny", d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=48)


def test_llama_matches_the_backbone_in_parameters_and_counted_flops():
    tool = load_tool("bench_peer")
    prism, llama = tool.PrismLM(TINY), tool.LlamaLM(TINY, seq_len=16)
    assert tool.param_count(prism) == tool.param_count(llama) == TINY.params
    prism_in, llama_in = tool.batch(TINY, batch_size=2, seq_len=16)
    flops = tool.training_flops(prism, prism_in)
    assert flops == tool.training_flops(llama, llama_in)
    # forward 2 x tokens x matmul weights (LM head included), backward twice that, plus attention.
    matmul_weights = TINY.n_layers * (TINY.block_params - 2 * TINY.d_model) + TINY.vocab_size * TINY.d_model
    assert flops > 6 * 32 * matmul_weights
    # Both losses are the mean over the same 2 x 15 next-token targets: near ln(vocab) at initialisation.
    for model, inputs in ((prism, prism_in), (llama, llama_in)):
        with torch.no_grad():
            assert abs(float(model(*inputs)) - math.log(TINY.vocab_size)) < 0.1
        assert all(p.grad is None for p in model.parameters())  # counting left no gradients behind


def test_both_steps_update_their_weights():
    tool = load_tool("bench_peer")
    llama = tool.LlamaLM(TINY, seq_len=16)
    _, llama_in = tool.batch(TINY, batch_size=2, seq_len=16)
    before = [p.detach().clone() for p in llama.parameters()]
    wall, cpu = tool.make_step(llama, tool.llama_optimizer(llama, 1e-3), llama_in)()
    assert wall > 0 and cpu >= 0
    assert all(not torch.equal(a, b) for a, b in zip(before, llama.parameters()))


def test_comparison_prints_a_ratio_per_backbone(capsys):
    tool = load_tool("bench_peer")
    assert tool.main(["--backbones", "4k", "--steps", "4", "--warmup", "1", "--batch", "2", "--seq-len", "16"]) == 0
    out = capsys.readouterr().out
    assert "4k (" in out and "prism/llama per pair: median" in out


def test_profile_lists_both_models_ops(capsys):
    tool = load_tool("bench_peer")
    assert (
        tool.main(
            [
                "--backbones",
                "4k",
                "--steps",
                "2",
                "--warmup",
                "1",
                "--batch",
                "2",
                "--seq-len",
                "16",
                "--profile",
                "--rows",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "--- 4k prism: self CPU" in out and "--- 4k llama: self CPU" in out and "aten::" in out
