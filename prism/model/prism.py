"""PRISM: modality encoder -> projector -> decoder-only backbone, and the training regimes.

The projected modality features replace the embeddings of the `MOD` slots in the
token sequence (row-major: the S samples of a batch fill the MOD runs in order),
so padded and packed batches go through the same code. A packed batch passes its
`segment_ids` and each sample then attends only to itself (block-diagonal causal
attention), so its loss is the one it would have alone in a padded row; rotary
positions run on across the row, which changes nothing for a sample that sees only
itself (see `prism.model.backbone`). A padded batch passes none and keeps the
kernels' causal fast path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from prism.core.families import FamilySpec, family_spec
from prism.core.tokenizer import IGNORE
from prism.model import kernels
from prism.model.backbone import Backbone
from prism.model.config import BackboneConfig, ProjectorVariant, backbone_config, projector_variant, regime_parts
from prism.model.encoders import build_encoder
from prism.model.projector import Projector

COMPONENTS: tuple[str, ...] = ("backbone", "encoder", "projector")
# The most an evaluation's logits take at once (fp32): a chunk of tokens, not the whole batch.
EVAL_LOGITS_BYTES = 256 * 2**20


class PrismModel(nn.Module):
    def __init__(self, family: FamilySpec, backbone: BackboneConfig, variant: ProjectorVariant, regime: str):
        super().__init__()
        self.family, self.backbone_config, self.variant = family, backbone, variant
        self.encoder = build_encoder(family)
        self.projector = Projector(family.encoder_width, backbone.d_model, variant)
        self.backbone = Backbone(backbone)
        self.regime = regime
        self.set_regime(regime)

    @property
    def blocks(self) -> nn.ModuleList:
        """The backbone's transformer blocks (units for per-block FSDP and activation checkpointing)."""
        return self.backbone.blocks

    def compile_blocks(self, mode: str) -> None:
        """torch.compile each backbone block on its own (`mode`: none, static or dynamic shapes): the
        trainer's and the speed calibration's one way to compile, so a timed step is a trained one."""
        if mode == "none":
            return
        for block in self.blocks:
            block.compile(dynamic=mode == "dynamic")
        self.backbone.blocks_compiled = True

    def set_regime(self, regime: str) -> None:
        """Freeze every component the regime does not train (requires_grad False)."""
        trained = regime_parts(regime)
        for name in COMPONENTS:
            getattr(self, name).requires_grad_(name in trained)
        self.regime = regime

    def trainable_parameters(self) -> list[nn.Parameter]:
        """What the optimizer gets: frozen parts carry no optimizer state."""
        return [p for p in self.parameters() if p.requires_grad]

    def forward(
        self,
        tokens: torch.Tensor,
        modality: torch.Tensor,
        labels: torch.Tensor,
        segment_ids: torch.Tensor | None = None,
        reduction: str = "mean",
    ) -> torch.Tensor:
        """Mean next-token cross-entropy over the positions whose label is not -100.

        `segment_ids` (int `[B, L]`, 1.. per sample of a row, 0 for padding: the packed
        loader's) keep packed samples from attending to each other; None for padded rows.
        `reduction="none"`: the loss at every position, `[B, L]`, 0 where the label is -100
        (evaluation sums it per sample for the standard error of the mean loss).
        """
        x = self.backbone.embed(tokens)
        slots = tokens == self.family.vocab.mod
        feats = self.projector(self.encoder(modality.to(x.dtype)))  # [S, n_modality_tokens, d_model]
        if tokens.device.type == "cpu" and not torch.compiler.is_compiling():  # no device sync, no graph break
            n_slots = int(slots.sum())
            if n_slots != feats.shape[0] * feats.shape[1]:
                raise ValueError(
                    f"batch has {n_slots} MOD slots but {feats.shape[0]} samples x {feats.shape[1]} modality tokens"
                )
        x = x.masked_scatter(slots.unsqueeze(-1), feats.to(x.dtype))
        if reduction == "none":
            return token_losses(self.backbone.lm_head, self.backbone.hidden(x, segment_ids), labels)
        # Training: the logits of the whole batch, whose gradient the backward needs anyway.
        logits = self.backbone.forward_embeddings(x, segment_ids)
        flat_logits, flat_labels = logits.flatten(0, 1).float(), labels.flatten()
        if reduction == "mean":
            return kernels.cross_entropy(flat_logits, flat_labels, IGNORE)
        return F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE, reduction=reduction)


def logits_chunk(vocab_size: int, max_bytes: int | None = None) -> int:
    """Tokens whose fp32 logits take at most `max_bytes` (EVAL_LOGITS_BYTES), at least one."""
    return max(1, (EVAL_LOGITS_BYTES if max_bytes is None else max_bytes) // (4 * vocab_size))


def token_losses(lm_head: nn.Module, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy at every position `[B, L]` (0 where the label is -100), a chunk of tokens at a time.

    The logits of a chunk only, in fp32 (the log-softmax needs the range): an evaluation's
    memory does not grow with its batch x row length x vocabulary. Each token's loss is
    the one the whole batch's logits would give, to rounding.
    """
    flat_hidden, flat_labels = hidden.flatten(0, 1), labels.flatten()
    chunk = logits_chunk(lm_head.weight.shape[0])
    if flat_labels.numel() <= chunk:
        losses = F.cross_entropy(lm_head(flat_hidden).float(), flat_labels, ignore_index=IGNORE, reduction="none")
        return losses.view(labels.shape)
    losses = torch.empty(flat_labels.shape, dtype=torch.float32, device=hidden.device)
    for lo in range(0, flat_labels.numel(), chunk):
        logits = lm_head(flat_hidden[lo : lo + chunk]).float()
        losses[lo : lo + chunk] = F.cross_entropy(
            logits, flat_labels[lo : lo + chunk], ignore_index=IGNORE, reduction="none"
        )
    return losses.view(labels.shape)


def build_model(
    family: str,
    backbone: str,
    variant: str,
    regime: str,
    device: str | torch.device = "cpu",
    spec: FamilySpec | None = None,
) -> PrismModel:
    """Build a PRISM model directly on `device`; `"meta"` allocates no weights (calibration of real sizes).
    `spec`: the family's shape and tokenizer (None: its laptop default).

    Names are validated first so a typo is a PrismError listing the valid names.
    """
    spec, var = family_spec(family, spec), projector_variant(variant)
    cfg = backbone_config(backbone, spec.vocab.rows)
    regime_parts(regime)
    with torch.device(device):
        return PrismModel(spec, cfg, var, regime)
