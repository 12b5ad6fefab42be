"""prism's backbone step against Hugging Face transformers' Llama of the same shape.

    python tools/bench_peer.py [--backbones 15k,60k,250k,3m] [--steps 60] [--seq-len 64]

Needs the `bench` extra (`pip install -e .[bench]`: transformers). For each backbone,
one process builds two decoder-only language models of the same width, depth, heads,
KV heads, MLP width, vocabulary, RMSNorm epsilon and rotary base:

- prism: `prism.model.backbone.Backbone` (RMSNorm, rotary positions, SDPA attention,
  SwiGLU MLP, tied LM head; on a CPU in fp32 each block one fused kernel,
  `prism.model.kernels`), its next-token cross-entropy as `PrismModel` computes
  it, and `prism train`'s optimizer (`build_optimizer`: fused AdamW, decay on
  matrices);
- llama: transformers' `LlamaForCausalLM` (the same architecture, `sdpa`
  attention, no KV cache), its own loss (`model(input_ids, labels=...)`), and the
  same AdamW (fused, the same groups and hyperparameters: transformers' Trainer
  also defaults to the fused torch AdamW).

Both get the same random token ids (batch `--batch`, `--seq-len` tokens, the
study's 64 by default) and the same labels. They step alternately (forward,
backward, optimizer step, zero_grad; which goes first alternates per pair), fp32,
one thread, so each pair runs under the same load of a shared machine. FLOPs are
counted the same way for both: one step's forward and backward under
`FlopCounterMode` (matmuls and attention, SDPA as its math decomposition), and the two counts are
equal because the models do the same arithmetic. Prints per backbone: tokens/s and
GFLOP/s of each (medians) and the median and quartiles of the per-pair ratio
prism/llama (above 1: prism is faster; beside it the median by CPU seconds, which
with one thread is each step's own cost whatever else the host runs). `--profile`
lists each model's top ops (self CPU time per step) instead.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from prism.core.tokenizer import IGNORE
from prism.model import kernels
from prism.model.backbone import Backbone
from prism.model.config import BackboneConfig, backbone_config
from prism.train.lr_schedule import BETAS, EPS, WEIGHT_DECAY, build_optimizer, default_lr

from benchlib import flops_ratios, interleaved, make_step, print_profile

DEFAULT_BACKBONES = "15k,60k,250k,3m"


class PrismLM(nn.Module):
    """prism's backbone with the loss `PrismModel` puts on it (labels already shifted)."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.backbone = Backbone(cfg)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self.backbone(tokens)
        return kernels.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), IGNORE)


class LlamaLM(nn.Module):
    """transformers' LlamaForCausalLM at a prism backbone's shape, returning its own loss."""

    def __init__(self, cfg: BackboneConfig, seq_len: int):
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            intermediate_size=cfg.ffn_dim,
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            num_key_value_heads=cfg.n_kv_heads,
            max_position_embeddings=seq_len,
            rms_norm_eps=cfg.norm_eps,
            rope_theta=cfg.rope_theta,
            tie_word_embeddings=cfg.tie_embeddings,
            attention_bias=cfg.qkv_bias,
            mlp_bias=False,
            use_cache=False,
            attn_implementation="sdpa",
        )
        self.llama = LlamaForCausalLM(config)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        # transformers shifts the labels itself: it gets the unshifted ids.
        return self.llama(input_ids=input_ids, labels=labels).loss


def batch(cfg: BackboneConfig, batch_size: int, seq_len: int, seed: int = 0):
    """Random ids below the byte vocabulary: (prism's inputs, llama's inputs), the same targets."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, min(cfg.vocab_size, 260), (batch_size, seq_len), generator=g)
    shifted = torch.cat([tokens[:, 1:], torch.full((batch_size, 1), IGNORE)], dim=1)
    return (tokens, shifted), (tokens, tokens)


def llama_optimizer(model: nn.Module, lr: float) -> torch.optim.AdamW:
    """The same AdamW as `build_optimizer` (decay on matrices, fused)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": WEIGHT_DECAY},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=BETAS, eps=EPS, fused=True)


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights once


def training_flops(model: nn.Module, inputs: tuple) -> int:
    """One step's forward + backward FLOPs, with SDPA as its math decomposition (whose bmm's the
    counter sees; it does not count the fused CPU kernel) and prism's modules in place of its fused
    kernels (whose matmuls run in C++, unseen; the arithmetic is the same). Not on meta:
    transformers' mask preparation reads a tensor's value."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with kernels.disabled(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(*inputs).backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def build_pair(backbone: str, batch_size: int, seq_len: int) -> dict:
    """Both models at one backbone's shape, their optimizers, inputs and FLOPs per step."""
    cfg = backbone_config(backbone)
    lr = default_lr(cfg.d_model)
    torch.manual_seed(0)
    prism = PrismLM(cfg)
    llama = LlamaLM(cfg, seq_len)
    prism_in, llama_in = batch(cfg, batch_size, seq_len)
    return {
        "cfg": cfg,
        "prism": prism,
        "llama": llama,
        "prism_in": prism_in,
        "llama_in": llama_in,
        "prism_step": make_step(prism, build_optimizer(list(prism.parameters()), lr), prism_in),
        "llama_step": make_step(llama, llama_optimizer(llama, lr), llama_in),
        "prism_flops": training_flops(prism, prism_in),
        "llama_flops": training_flops(llama, llama_in),
    }


def compare(backbone: str, batch_size: int, seq_len: int, steps: int, warmup: int) -> dict:
    pair = build_pair(backbone, batch_size, seq_len)
    fp, fl = pair["prism_flops"], pair["llama_flops"]
    r = flops_ratios(interleaved(pair["prism_step"], pair["llama_step"], steps, warmup), fp, fl)
    tokens = batch_size * seq_len
    mp, ml = r["a_s"], r["b_s"]
    return {
        "backbone": backbone,
        "params": param_count(pair["prism"]),
        "prism_mflop": fp / 1e6,
        "llama_mflop": fl / 1e6,
        "prism_ms": 1e3 * mp,
        "llama_ms": 1e3 * ml,
        "prism_tok_s": tokens / mp,
        "llama_tok_s": tokens / ml,
        "prism_gflops": fp / mp / 1e9,
        "llama_gflops": fl / ml / 1e9,
        "ratio": r["ratio"],
        "q1": r["q1"],
        "q3": r["q3"],
        "cpu_ratio": r["cpu_ratio"],
    }


def profile(backbone: str, batch_size: int, seq_len: int, steps: int, warmup: int, rows: int) -> None:
    """The top ops of each model's step by self CPU time per step."""
    pair = build_pair(backbone, batch_size, seq_len)
    for name in ("prism", "llama"):
        print_profile(f"{backbone} {name}", pair[f"{name}_step"], steps, warmup, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbones", default=DEFAULT_BACKBONES)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60, help="timed step pairs per backbone")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="list each step's top ops instead of comparing")
    parser.add_argument("--rows", type=int, default=20, help="--profile: ops listed per model")
    args = parser.parse_args(argv)
    import transformers

    from prism.runtime.host import tune_host

    tune_host()  # as `prism train` does; process-wide, so both models get it
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, {args.threads} thread(s), "
        f"batch {args.batch} x {args.seq_len} tokens",
        flush=True,
    )
    for backbone in args.backbones.split(","):
        if args.profile:
            profile(backbone, args.batch, args.seq_len, args.steps, args.warmup, args.rows)
            continue
        r = compare(backbone, args.batch, args.seq_len, args.steps, args.warmup)
        print(
            f"{r['backbone']:>5} ({r['params']} params, {r['prism_mflop']:.0f} MFLOP/step; llama "
            f"{r['llama_mflop']:.0f}): prism {r['prism_tok_s']:,.0f} tokens/s {r['prism_gflops']:.2f} GFLOP/s "
            f"({r['prism_ms']:.2f} ms), llama {r['llama_tok_s']:,.0f} tokens/s {r['llama_gflops']:.2f} GFLOP/s "
            f"({r['llama_ms']:.2f} ms); prism/llama per pair: median {r['ratio']:.3f}, quartiles "
            f"{r['q1']:.3f}-{r['q3']:.3f} (by CPU time {r['cpu_ratio']:.3f})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
