"""Modality encoders, one per family in `prism.core.families.FAMILIES` (its bundle's `encoder` names it).

Each maps the family's float32 `[S, *modality_shape]` to `[S, n_modality_tokens,
encoder_width]`: a family-appropriate tokeniser (patches, graph message passing,
per-group linears, grid-cell embeddings) followed by the same small bidirectional
transformer tail. Encoders are deliberately small and do not scale with the
backbone: the projector ladder, not the encoder, spreads N.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from prism.core.families import FamilySpec, family_bundle
from prism.model import kernels


class EncoderBlock(nn.Module):
    """Pre-norm bidirectional self-attention + GELU MLP (ViT style)."""

    def __init__(self, width: int, head_dim: int = 16, mlp_mult: int = 2):
        super().__init__()
        self.n_heads = width // head_dim
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp_mult * width), nn.GELU(), nn.Linear(mlp_mult * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if kernels.usable(x):
            return kernels.encoder_block(x, self.weights(), self.n_heads, self.norm1.eps)
        S, T, W = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(S, T, 3, self.n_heads, W // self.n_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(S, T, W))
        return x + self.mlp(self.norm2(x))

    def weights(self) -> tuple[torch.Tensor, ...]:
        """What the fused kernel takes: each layer's weight and bias, in forward order."""
        layers = (self.norm1, self.qkv, self.proj, self.norm2, self.mlp[0], self.mlp[2])
        return tuple(t for layer in layers for t in (layer.weight, layer.bias))


class Encoder(nn.Module):
    """Base: `tokenize` (family-specific) + learned positions + transformer tail."""

    def __init__(self, spec: FamilySpec, n_layers: int = 1):
        super().__init__()
        self.spec = spec
        width = spec.encoder_width
        self.pos = nn.Parameter(torch.zeros(spec.n_modality_tokens, width))
        nn.init.normal_(self.pos, std=0.02)
        self.blocks = nn.ModuleList(EncoderBlock(width) for _ in range(n_layers))
        self.norm = nn.LayerNorm(width)

    def tokenize(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, modality: torch.Tensor) -> torch.Tensor:
        expected = tuple(self.spec.modality_shape)
        if tuple(modality.shape[1:]) != expected:
            raise ValueError(
                f"{self.spec.name} encoder expects [S, {', '.join(map(str, expected))}], got {list(modality.shape)}"
            )
        x = self.tokenize(modality) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


def patch_linear(conv: nn.Conv1d | nn.Conv2d | nn.Conv3d, patches: torch.Tensor) -> torch.Tensor:
    """A patch embedding whose kernel equals its stride, as one matmul on `[..., C * kernel]` patches.

    The same sums as the convolution with `conv`'s own weights (only their order may
    differ): at a few hundred tiny patches a convolution kernel's set-up and layout
    conversions cost several times the arithmetic, a linear layer's matmul does not.
    """
    return F.linear(patches, conv.weight.flatten(1), conv.bias)


class ImageEncoder(Encoder):
    """`[S, C, H, W]` -> non-overlapping square patches, one token each (ViT patch embedding)."""

    def __init__(self, spec: FamilySpec):
        super().__init__(spec)
        c, h, w = spec.modality_shape
        patch = int(round((h * w / spec.n_modality_tokens) ** 0.5))
        if (h // patch) * (w // patch) != spec.n_modality_tokens:
            raise ValueError(f"{spec.name}: {h}x{w} does not split into {spec.n_modality_tokens} square patches")
        self.patch = nn.Conv2d(c, spec.encoder_width, kernel_size=patch, stride=patch)
        self.grid = (h // patch, w // patch)

    def tokenize(self, x: torch.Tensor) -> torch.Tensor:
        (p, _), (gh, gw) = self.patch.kernel_size, self.grid
        S, C = x.shape[:2]
        # [S, C, gh*p, gw*p] -> [S, gh*gw, C*p*p]: row-major patches, (c, i, j) within each (the conv's order).
        patches = x[..., : gh * p, : gw * p].reshape(S, C, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5)
        return patch_linear(self.patch, patches.reshape(S, gh * gw, C * p * p))


class SeriesEncoder(Encoder):
    """`[S, C, T]` -> 1-D patches of T / n_tokens steps across all channels (PatchTST style)."""

    def __init__(self, spec: FamilySpec):
        super().__init__(spec)
        c, t = spec.modality_shape
        if t % spec.n_modality_tokens:
            raise ValueError(f"{spec.name}: {t} steps do not split into {spec.n_modality_tokens} patches")
        patch = t // spec.n_modality_tokens
        self.patch = nn.Conv1d(c, spec.encoder_width, kernel_size=patch, stride=patch)

    def tokenize(self, x: torch.Tensor) -> torch.Tensor:
        (p,) = self.patch.kernel_size
        S, C, T = x.shape
        # [S, C, T] -> [S, T/p, C*p]: consecutive patches, (c, step) within each (the conv's order).
        patches = x.reshape(S, C, T // p, p).transpose(1, 2)
        return patch_linear(self.patch, patches.reshape(S, T // p, C * p))


class GraphEncoder(Encoder):
    """`[S, N, N]` zero-padded adjacency -> one token per node slot.

    Node features are the node's adjacency row and degree; two rounds of mean
    message passing over A + I (GCN-like) mix neighbourhoods before the tail.
    """

    def __init__(self, spec: FamilySpec, rounds: int = 2):
        super().__init__(spec)
        n, n2 = spec.modality_shape
        if n != n2 or n != spec.n_modality_tokens:
            raise ValueError(f"{spec.name}: adjacency {n}x{n2} must be square with one token per node")
        width = spec.encoder_width
        self.node_in = nn.Linear(n + 1, width)
        self.rounds = nn.ModuleList(nn.Linear(width, width) for _ in range(rounds))

    def tokenize(self, adj: torch.Tensor) -> torch.Tensor:
        degree = adj.sum(-1, keepdim=True)
        h = self.node_in(torch.cat([adj, degree], dim=-1))
        a_hat = adj + torch.eye(adj.shape[-1], device=adj.device, dtype=adj.dtype)
        a_hat = a_hat / a_hat.sum(-1, keepdim=True)
        for layer in self.rounds:
            h = h + F.gelu(layer(a_hat @ h))
        return h


class TableEncoder(Encoder):
    """`[S, F]` standardised features -> F / n_tokens features per group, one linear per group."""

    def __init__(self, spec: FamilySpec):
        super().__init__(spec)
        (n_features,) = spec.modality_shape
        groups = spec.n_modality_tokens
        if n_features % groups:
            raise ValueError(f"{spec.name}: {n_features} features do not split into {groups} groups")
        self.groups, self.group_size = groups, n_features // groups
        self.weight = nn.Parameter(torch.empty(groups, self.group_size, spec.encoder_width))
        self.bias = nn.Parameter(torch.zeros(groups, spec.encoder_width))
        nn.init.normal_(self.weight, std=self.group_size**-0.5)

    def tokenize(self, x: torch.Tensor) -> torch.Tensor:
        x = x.view(x.shape[0], self.groups, self.group_size)
        return torch.einsum("sgi,giw->sgw", x, self.weight) + self.bias


class VideoEncoder(Encoder):
    """`[S, T, C, H, W]` -> per-frame square patches (a tubelet of one frame), frame-major."""

    def __init__(self, spec: FamilySpec):
        super().__init__(spec)
        t, c, h, w = spec.modality_shape
        if spec.n_modality_tokens % t:
            raise ValueError(f"{spec.name}: {spec.n_modality_tokens} tokens do not split over {t} frames")
        per_frame = spec.n_modality_tokens // t
        patch = int(round((h * w / per_frame) ** 0.5))
        if (h // patch) * (w // patch) != per_frame:
            raise ValueError(f"{spec.name}: {h}x{w} frames do not split into {per_frame} square patches")
        self.patch = nn.Conv3d(c, spec.encoder_width, kernel_size=(1, patch, patch), stride=(1, patch, patch))
        self.grid = (h // patch, w // patch)

    def tokenize(self, x: torch.Tensor) -> torch.Tensor:
        (_, p, _), (gh, gw) = self.patch.kernel_size, self.grid
        S, T, C = x.shape[:3]
        # [S, T, C, gh*p, gw*p] -> [S, T*gh*gw, C*p*p]: frame-major patches, (c, i, j) within each.
        patches = x[..., : gh * p, : gw * p].reshape(S, T, C, gh, p, gw, p).permute(0, 1, 3, 5, 2, 4, 6)
        return patch_linear(self.patch, patches.reshape(S, T * gh * gw, C * p * p))


class GridEncoder(Encoder):
    """`[S, 3, H, W]` BabyAI egocentric grid of (object, colour, state) indices -> one token per row.

    Each cell embeds its three indices (plus its position); a row's cells are
    mean-pooled into that row's token.
    """

    N_INDEX = 16  # minigrid has 11 object, 6 colour and 3 state ids; indices are clamped below this

    def __init__(self, spec: FamilySpec):
        super().__init__(spec)
        planes, h, w = spec.modality_shape
        if planes != 3 or h != spec.n_modality_tokens:
            raise ValueError(f"{spec.name}: expects a (3, H, W) grid with one token per row")
        width = spec.encoder_width
        self.cell = nn.ModuleList(nn.Embedding(self.N_INDEX, width) for _ in range(planes))
        self.cell_pos = nn.Parameter(torch.zeros(h, w, width))
        nn.init.normal_(self.cell_pos, std=0.02)
        self.cell_mlp = nn.Sequential(nn.GELU(), nn.Linear(width, width))

    def tokenize(self, grid: torch.Tensor) -> torch.Tensor:
        idx = grid.long().clamp(0, self.N_INDEX - 1)
        cells = sum(emb(idx[:, i]) for i, emb in enumerate(self.cell)) + self.cell_pos  # [S, H, W, width]
        return self.cell_mlp(cells).mean(dim=2)


def build_encoder(spec: FamilySpec) -> Encoder:
    """The encoder of `spec`'s family (the class its bundle names), built at `spec`."""
    return family_bundle(spec.name).part("encoder")(spec)
