"""The decoder-only backbone: pre-norm RMSNorm, rotary positions, grouped-query
attention through `scaled_dot_product_attention`, SwiGLU MLP (Llama/Qwen style).

Attention is causal over the row (`is_causal`, the fused kernels' fast path) or, for
packed rows, block-diagonal causal: `segment_ids` number the samples of a row and a
token attends only to earlier tokens of its own sample (`segment_mask`, built once
per batch and shared by all layers). Rotary positions keep running across a packed
row: attention scores depend only on the distance between two tokens, so a sample
that sees only itself gets the same scores at any offset in its row.

Nothing here is device-specific: it runs on cpu, cuda, xpu and meta alike.

This module is the one reference for the block's maths (`rms_norm`, `swiglu`, `rotary` and
the modules built on them); `torch.compile` runs it as written. Two faster forms compute
the same values: in eager mode, `prism.model.ops` (hand-written backwards, complex rotary
positions); on a CPU in fp32, a block of padded rows as one fused kernel forward and one
backward (`prism.model.kernels`). `tests/model/test_block_forms.py` checks both against it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from prism.model import kernels, ops
from prism.model.config import BackboneConfig


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """`x / rms(x) * weight` over the last dimension, the statistics in at least fp32."""
    xf = ops.wide(x)
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)).type_as(x) * weight


def swiglu(h: torch.Tensor) -> torch.Tensor:
    """`silu(gate) * up` for `h = [gate | up]` along the last dimension (one fused projection)."""
    gate, up = h.chunk(2, dim=-1)
    return F.silu(gate) * up


def rope_angles(seq_len: int, head_dim: int, theta: float, device) -> torch.Tensor:
    """Rotation angles `[seq_len, head_dim/2]`, computed per call, so no buffer needs
    re-initialising after a meta-device build."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    return torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv_freq)


def rotary(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate `x` `[B, L, heads, hd]` by position, pairing adjacent features (RoFormer/Meta Llama)."""
    x1, x2 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2).type_as(x)


def apply_rope(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """`rotary` of `x`: `rope` is `rope_angles` (the reference form, which inductor fuses into one
    kernel) or, in eager mode, their `ops.rope_rotation` (the fast complex form)."""
    return ops.rotary(x, rope) if rope.is_complex() else rotary(x, rope)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = ops.rms_norm if ops.usable() else rms_norm
        return norm(x, self.weight, self.eps)


def segment_mask(segment_ids: torch.Tensor) -> torch.Tensor:
    """Boolean `[B, 1, L, L]` attention mask (True: may attend) from segment ids `[B, L]`.

    Causal and within one segment. Padding (segment 0) attends causally to padding,
    so no query row is empty (an all-False row would make softmax NaN).
    """
    L = segment_ids.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool, device=segment_ids.device).tril()
    return (segment_ids[:, None, :, None] == segment_ids[:, None, None, :]) & causal


class Attention(nn.Module):
    """Grouped-query attention with one fused q/k/v projection (one larger matmul, and
    rotary positions applied to q and k in one call)."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim, bias=cfg.qkv_bias)
        self.o = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, _ = x.shape
        qkv = self.qkv(x).view(B, L, self.n_heads + 2 * self.n_kv_heads, self.head_dim)
        # split, not slicing: its backward is one cat, where slices' is a zero-fill per slice.
        qk, v = qkv.split((self.n_heads + self.n_kv_heads, self.n_kv_heads), dim=2)
        q, k = apply_rope(qk, rope).split((self.n_heads, self.n_kv_heads), dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.n_kv_heads != self.n_heads:
            # Repeating KV heads works on every backend (enable_gqa does not everywhere).
            rep = self.n_heads // self.n_kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o(y.transpose(1, 2).reshape(B, L, -1))


class SwiGLU(nn.Module):
    """SwiGLU MLP; gate and up share one projection (one larger matmul forward and backward)."""

    def __init__(self, d_model: int, ffn_dim: int):
        super().__init__()
        self.gate_up = nn.Linear(d_model, 2 * ffn_dim, bias=False)
        self.down = nn.Linear(ffn_dim, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act = ops.swiglu if ops.usable() else swiglu
        return self.down(act(self.gate_up(x)))


class Block(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg.d_model, cfg.ffn_dim)
        # The fused kernel's shape: one K/V head per query head, no q/k/v bias.
        self.fusable = cfg.n_kv_heads == cfg.n_heads and not cfg.qkv_bias

    def forward(self, x: torch.Tensor, rope: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is None and self.fusable and rope.is_complex() and kernels.usable(x):
            return kernels.block(x, self.weights(), rope, self.attn.n_heads, self.attn_norm.eps)
        x = x + self.attn(self.attn_norm(x), rope, mask)
        return x + self.mlp(self.mlp_norm(x))

    def weights(self) -> tuple[torch.Tensor, ...]:
        """What the fused kernel takes: each layer's weight, in forward order."""
        layers = (self.attn_norm, self.attn.qkv, self.attn.o, self.mlp_norm, self.mlp.gate_up, self.mlp.down)
        return tuple(layer.weight for layer in layers)


class Backbone(nn.Module):
    """Token embedding, `n_layers` blocks, final norm, LM head (tied or not).

    Split into `embed` and `forward_embeddings` so the composition can write
    modality features into the embedded sequence before the blocks run.
    """

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        # Set where each block is compiled on its own (`prism train --compile`): the blocks then
        # get the rotary angles, whose real form inductor fuses, as a whole compiled model's do.
        self.blocks_compiled = False
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2 style: N(0, 0.02), residual output projections scaled by 1/sqrt(2 n_layers)."""
        if self.embed_tokens.weight.device.type == "meta":
            return  # nothing to initialise (and meta normal_ would import the whole compiler stack)
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            elif name.endswith(("attn.o.weight", "mlp.down.weight")):
                nn.init.normal_(p, std=std / math.sqrt(2 * self.cfg.n_layers))
            else:
                nn.init.normal_(p, std=std)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(tokens)

    def forward_embeddings(self, x: torch.Tensor, segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits `[B, L, vocab]` from input embeddings `[B, L, d_model]`.

        With `segment_ids` `[B, L]` (packed rows) attention stays within each segment;
        without, it is causal over the whole row.
        """
        return self.lm_head(self.hidden(x, segment_ids))

    def hidden(self, x: torch.Tensor, segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The normed last hidden states `[B, L, d_model]`: `lm_head` of them is the logits."""
        rope = rope_angles(x.shape[1], self.cfg.head_dim, self.cfg.rope_theta, x.device)
        if ops.usable() and not self.blocks_compiled:
            rope = ops.rope_rotation(rope)  # once here, not once per layer
        mask = None if segment_ids is None else segment_mask(segment_ids)
        for block in self.blocks:
            x = block(x, rope, mask)
        return self.norm(x)

    def forward(self, tokens: torch.Tensor, segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        return self.forward_embeddings(self.embed(tokens), segment_ids)
