"""The study's training step against a plain nanoGPT-style GPT of the same width and depth.

    python tools/bench_nanogpt.py --data D [--backbones 15k,30k,60k,120k,250k] [--steps 60]

For each backbone, one process builds two models at the same width, depth, heads,
vocabulary, sequence length and batch:

- prism: the study's step, `PrismModel` (encoder, projector, backbone) in the e2e
  regime on a real batch of `--family` shards, with `prism train`'s optimizer;
- nanogpt: nanoGPT's `model.py` shape (learned positions, LayerNorm with bias, one
  c_attn projection, SDPA with `is_causal`, a 4x GELU MLP, tied LM head, GPT-2
  init) on the same token ids and labels, with AdamW as nanoGPT configures it
  (decay on >=2-D weights; `fused` only on CUDA, so foreach on a CPU: `--nanogpt-fused`
  gives it the fused kernel too).

It then steps them alternately (forward, backward, optimizer step, zero_grad;
which goes first alternates per pair), one thread, so each pair of steps runs under
the same load of a shared machine. FLOPs are counted the same way for both: one
step's forward and backward under `FlopCounterMode` on a meta copy (matmuls,
attention, convolutions), so the FLOP/s ratio compares how fast each turns its
own arithmetic into progress. Prints per backbone: the median FLOP/s of each and
the median and quartiles of the per-pair ratio prism/nanogpt (above 1: prism
is faster; beside it the same median by CPU seconds per step). `--profile`
prints the top ops of the prism step (self CPU time per step) instead.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from benchlib import flops_ratios, interleaved, make_step, print_profile


class NanoBlock(nn.Module):
    """nanoGPT's Block: LayerNorm, causal self-attention (SDPA), LayerNorm, 4x GELU MLP."""

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class NanoGPT(nn.Module):
    """nanoGPT's GPT: token + learned position embeddings, blocks, final LayerNorm, tied head."""

    def __init__(self, vocab: int, block_size: int, d: int, n_layers: int, n_heads: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block_size, d)
        self.h = nn.ModuleList(NanoBlock(d, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim >= 2:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * n_layers) if name.endswith("proj.weight") else 0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-100)


def nanogpt_optimizer(model: nn.Module, lr: float, fused: bool) -> torch.optim.AdamW:
    """nanoGPT's `configure_optimizers`: weight decay 0.1 on >=2-D parameters, betas (0.9, 0.95)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=fused)


def training_flops(model: nn.Module, inputs: tuple) -> int:
    """One step's forward + backward FLOPs, counted on a meta copy (SDPA as its math decomposition)."""
    import copy

    meta = copy.deepcopy(model).to("meta")
    args = tuple(t.to("meta") for t in inputs)
    with FlopCounterMode(display=False) as counter:
        meta(*args).backward()
    return int(counter.get_total_flops())


def build_pair(args: argparse.Namespace, backbone: str):
    """(prism step, its FLOPs, nanogpt step, its FLOPs) at one backbone's shape."""
    from prism.data.loader import ShardLoader
    from prism.model import build_model
    from prism.model.config import backbone_config
    from prism.train.lr_schedule import build_optimizer, default_lr

    cfg = backbone_config(backbone)
    torch.manual_seed(0)
    prism = build_model(args.family, backbone, "BASE", "e2e")
    lr = default_lr(cfg.d_model)
    prism_opt = build_optimizer(prism.trainable_parameters(), lr)
    batch = next(iter(ShardLoader(args.data, "train", args.global_batch, 0, family=args.family)))
    prism_in = tuple(torch.as_tensor(batch[k]) for k in ("tokens", "modality", "labels"))
    seq_len = prism_in[0].shape[1]
    nano = NanoGPT(cfg.vocab_size, seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads)
    nano_opt = nanogpt_optimizer(nano, lr, args.nanogpt_fused)
    nano_in = (prism_in[0], prism_in[2])
    return (
        make_step(prism, prism_opt, prism_in),
        training_flops(prism, prism_in),
        make_step(nano, nano_opt, nano_in),
        training_flops(nano, nano_in),
        prism,
        prism_opt,
        prism_in,
    )


def compare(args: argparse.Namespace, backbone: str) -> dict:
    prism_step, prism_flops, nano_step, nano_flops, *_ = build_pair(args, backbone)
    r = flops_ratios(interleaved(prism_step, nano_step, args.steps, args.warmup), prism_flops, nano_flops)
    return {
        "backbone": backbone,
        "prism_gflops": prism_flops / r["a_s"] / 1e9,
        "nanogpt_gflops": nano_flops / r["b_s"] / 1e9,
        "prism_ms": 1e3 * r["a_s"],
        "nanogpt_ms": 1e3 * r["b_s"],
        "prism_mflop": prism_flops / 1e6,
        "nanogpt_mflop": nano_flops / 1e6,
        "ratio": r["ratio"],
        "q1": r["q1"],
        "q3": r["q3"],
        "cpu_ratio": r["cpu_ratio"],
    }


def profile(args: argparse.Namespace, backbone: str) -> None:
    prism_step, *_ = build_pair(args, backbone)
    print_profile(f"{backbone}: prism step, {args.steps} steps", prism_step, args.steps, args.warmup, args.rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="shard directory (prism data build --family F)")
    parser.add_argument("--family", default="text_image")
    parser.add_argument("--backbones", default="15k,30k,60k,120k,250k")
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60, help="timed step pairs per backbone")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--nanogpt-fused", action="store_true", help="give nanoGPT the fused AdamW kernel too")
    parser.add_argument("--profile", action="store_true", help="profile the prism step instead of comparing")
    parser.add_argument("--rows", type=int, default=25, help="--profile: ops listed")
    args = parser.parse_args(argv)
    from prism.runtime.host import tune_host

    tune_host()  # as `prism train` does; process-wide, so both models get it
    torch.set_num_threads(args.threads)
    for backbone in args.backbones.split(","):
        if args.profile:
            profile(args, backbone)
            continue
        r = compare(args, backbone)
        print(
            f"{r['backbone']:>5}: prism {r['prism_gflops']:6.2f} GFLOP/s ({r['prism_ms']:.2f} ms, "
            f"{r['prism_mflop']:.0f} MFLOP), nanogpt {r['nanogpt_gflops']:6.2f} GFLOP/s ({r['nanogpt_ms']:.2f} ms, "
            f"{r['nanogpt_mflop']:.0f} MFLOP); prism/nanogpt FLOP/s per pair: median {r['ratio']:.3f}, "
            f"quartiles {r['q1']:.3f}-{r['q3']:.3f} (by CPU time {r['cpu_ratio']:.3f})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
