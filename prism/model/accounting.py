"""Parameter and FLOP accounting.

FLOPs are counted, not estimated: one padded sample's forward and backward run
under `FlopCounterMode` with the regime's frozen parts in place, so a frozen
backbone is charged its activation-gradient matmuls but no weight gradients.
On the meta device this allocates nothing, so real sizes count in seconds.

Counting always happens on meta: there `scaled_dot_product_attention` runs its
math decomposition, whose bmm's the counter sees (the full L x L score matrix,
no causal halving, the usual convention), whereas the fused CPU kernel is not
counted at all by FlopCounterMode in torch 2.13.
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from prism.core.families import check_row_length
from prism.core.tokenizer import IGNORE
from prism.model.prism import COMPONENTS, PrismModel


def _count(params) -> dict[str, int]:
    params = list(params)
    return {"total": sum(p.numel() for p in params), "trainable": sum(p.numel() for p in params if p.requires_grad)}


def param_counts(model: PrismModel) -> dict[str, dict[str, int]]:
    """`{component: {"total", "trainable"}}`; tied weights count once (module.parameters de-duplicates)."""
    return {name: _count(getattr(model, name).parameters()) for name in COMPONENTS}


def input_embedding_params(model: PrismModel) -> int:
    """The token-embedding table: a lookup, so it costs no FLOPs (when tied it is also the LM head)."""
    return model.backbone.embed_tokens.weight.numel()


def example_batch(model: PrismModel, seq_len: int | None = None, batch_size: int = 1, device=None, text_byte: int = 65):
    """A padded batch of `batch_size` identical-layout samples of `seq_len` tokens on `device`.

    Layout per docs/architecture.md: MOD x n, BOS, text, EOS, PAD...; the text fills
    the family's text_len. The modality is zeros (FLOPs do not depend on values).
    """
    spec = model.family
    seq_len = spec.tokens_per_sample if seq_len is None else seq_len
    n_mod = spec.n_modality_tokens
    check_row_length("seq_len", seq_len, spec.name, n_mod, None)
    text_end = min(seq_len, spec.tokens_per_sample)
    v = spec.vocab
    MOD, BOS, EOS, PAD = v.mod, v.bos, v.eos, v.pad  # noqa: N806 - the layout's names
    row = [MOD] * n_mod + [BOS] + [text_byte] * (text_end - n_mod - 2) + [EOS] + [PAD] * (seq_len - text_end)
    tokens = torch.tensor([row] * batch_size, dtype=torch.int64)
    labels = torch.cat([tokens[:, 1:], torch.full((batch_size, 1), IGNORE)], dim=1)
    labels[(labels == MOD) | (labels == PAD)] = IGNORE
    modality = torch.zeros(batch_size, *spec.modality_shape)
    device = next(model.parameters()).device if device is None else device
    return tokens.to(device), modality.to(device), labels.to(device)


def meta_copy(model: PrismModel) -> PrismModel:
    """The same architecture on the meta device, with the same parameters frozen."""
    with torch.device("meta"):
        meta = PrismModel(model.family, model.backbone_config, model.variant, model.regime)
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    for name, p in meta.named_parameters():
        p.requires_grad_(flags[name])
    return meta


def count_training_flops(model: PrismModel, seq_len: int | None = None) -> int:
    """FLOPs of one sample's forward + backward (batch 1, `seq_len` tokens, default the family's).

    A model on a real device is counted through its meta copy (see the module
    docstring). When nothing is trainable there is no backward to count.
    """
    if next(model.parameters()).device.type != "meta":
        model = meta_copy(model)
    tokens, modality, labels = example_batch(model, seq_len)
    with FlopCounterMode(display=False) as counter:
        loss = model(tokens, modality, labels)
        if loss.requires_grad:
            loss.backward()
    return int(counter.get_total_flops())
