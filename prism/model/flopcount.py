"""Training FLOPs of one sample without building the model (pure Python, no torch).

A dry run plans every budget, and the plan needs each candidate size's FLOPs per
sample; counting them under FlopCounterMode (prism.model.accounting) would import
torch into every Snakemake process. These formulas give the same integers: they
charge what the counter charges, the matmuls (mm, addmm, bmm: 2 FLOPs a multiply-add,
attention as its math form's two score bmm's), forward, then backward the gradient of
each operand that needs one (a frozen weight none, an activation whenever anything
before it trains). They mirror prism.model.encoders, projector and backbone;
tests/model/test_flopcount.py holds them equal to the counter's number.
"""

from __future__ import annotations

from prism.core.families import FamilySpec, check_row_length, family_bundle
from prism.model.config import BackboneConfig, ProjectorVariant, backbone_config, projector_variant, regime_parts
from prism.model.paramcount import (
    ENCODER_HEAD_MLP,
    GRAPH_ROUNDS,
    image_patch_values,
    projector_dims,
    series_patch_values,
    video_patch_values,
)

ENCODER_HEAD_DIM = 16  # EncoderBlock's head_dim


def matmul(m: int, k: int, n: int, grad_a: bool, grad_b: bool) -> int:
    """`[m, k] @ [k, n]` forward, and backward one matmul as large for each operand that needs a gradient."""
    return 2 * m * k * n * (1 + grad_a + grad_b)


def attention(heads: int, length: int, head_dim: int, grad: bool) -> int:
    """Scores `q @ k^T` and `probs @ v` over all `length`^2 pairs (no causal halving), `grad`: q, k, v need one."""
    return heads * (matmul(length, head_dim, length, grad, grad) + matmul(length, length, head_dim, grad, grad))


# The tokenizer of each built-in family's encoder (its bundle's `flops`): spec, trained -> FLOPs.


def image_tokenizer(spec: FamilySpec, trained: bool) -> int:
    return matmul(spec.n_modality_tokens, image_patch_values(spec), spec.encoder_width, False, trained)


def series_tokenizer(spec: FamilySpec, trained: bool) -> int:
    return matmul(spec.n_modality_tokens, series_patch_values(spec), spec.encoder_width, False, trained)


def graph_tokenizer(spec: FamilySpec, trained: bool) -> int:
    n, w = spec.modality_shape[0], spec.encoder_width
    node_in = matmul(n, n + 1, w, False, trained)
    return node_in + GRAPH_ROUNDS * (matmul(n, n, w, False, trained) + matmul(n, w, w, trained, trained))


def table_tokenizer(spec: FamilySpec, trained: bool) -> int:
    groups = spec.n_modality_tokens
    return groups * matmul(1, spec.modality_shape[0] // groups, spec.encoder_width, False, trained)


def video_tokenizer(spec: FamilySpec, trained: bool) -> int:
    return matmul(spec.n_modality_tokens, video_patch_values(spec), spec.encoder_width, False, trained)


def grid_tokenizer(spec: FamilySpec, trained: bool) -> int:
    _, h, wd = spec.modality_shape
    return matmul(h * wd, spec.encoder_width, spec.encoder_width, trained, trained)


def encoder_flops(spec: FamilySpec, tokenizer: int, trained: bool) -> int:
    """The encoder: its tokenizer's FLOPs, then one bidirectional transformer block over its tokens."""
    t, w = spec.n_modality_tokens, spec.encoder_width
    heads = w // ENCODER_HEAD_DIM
    hidden = ENCODER_HEAD_MLP * w
    block = (
        matmul(t, w, 3 * w, trained, trained)
        + attention(heads, t, w // heads, trained)
        + matmul(t, w, w, trained, trained)
        + matmul(t, w, hidden, trained, trained)
        + matmul(t, hidden, w, trained, trained)
    )
    return tokenizer + block


def projector_flops(
    tokens: int, in_dim: int, d_model: int, variant: ProjectorVariant, encoder: bool, projector: bool
) -> int:
    """The projector's linears; `encoder`, `projector`: whether each is trained."""
    dims = projector_dims(in_dim, d_model, variant.width_mult, variant.n_layers)
    return sum(
        matmul(tokens, a, b, encoder or (projector and i > 0), projector)
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:]))
    )


def backbone_flops(cfg: BackboneConfig, length: int, grad_in: bool, trained: bool) -> int:
    """Every block's projections and attention, then the LM head; `grad_in`: its input embeddings need a gradient."""
    d, hd, g = cfg.d_model, cfg.head_dim, grad_in or trained
    block = (
        matmul(length, d, (cfg.n_heads + 2 * cfg.n_kv_heads) * hd, g, trained)
        + attention(cfg.n_heads, length, hd, g)
        + matmul(length, d, d, g, trained)
        + matmul(length, d, 2 * cfg.ffn_dim, g, trained)
        + matmul(length, cfg.ffn_dim, d, g, trained)
    )
    return cfg.n_layers * block + matmul(length, d, cfg.vocab_size, g, trained)


def training_flops(
    spec: FamilySpec, backbone: str, variant: str, regime: str, seq_len: int | None = None
) -> int | None:
    """One padded sample's forward + backward FLOPs (`seq_len` tokens, default the family's), as
    `count_training_flops` counts them; None for a family whose bundle has no `flops` formula."""
    bundle = family_bundle(spec.name)
    if not bundle.flops:
        return None
    length = spec.tokens_per_sample if seq_len is None else int(seq_len)
    check_row_length("--seq-len", length, spec.name, spec.n_modality_tokens, None)
    trained = regime_parts(regime)
    encoder, projector, backbone_trained = ("encoder" in trained, "projector" in trained, "backbone" in trained)
    var, cfg = projector_variant(variant), backbone_config(backbone, spec.vocab.rows)
    tokens, width = spec.n_modality_tokens, spec.encoder_width
    return (
        encoder_flops(spec, bundle.part("flops")(spec, encoder), encoder)
        + projector_flops(tokens, width, cfg.d_model, var, encoder, projector)
        + backbone_flops(cfg, length, encoder or projector, backbone_trained)
    )
