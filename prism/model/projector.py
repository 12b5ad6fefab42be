"""The projector: an MLP from encoder width to the backbone's d_model.

Its variants (`prism.model.config.VARIANTS`) are the ladder that spreads the
trainable parameter count N for a fixed backbone in the `projector_only` regime.
"""

from __future__ import annotations

from torch import nn

from prism.model.config import ProjectorVariant


class Projector(nn.Sequential):
    """`n_layers` linears with GELU between; hidden width `width_mult * d_model` (LLaVA's mlp2x_gelu is BASE)."""

    def __init__(self, in_dim: int, d_model: int, variant: ProjectorVariant):
        hidden = variant.width_mult * d_model
        dims = [in_dim] + [hidden] * (variant.n_layers - 1) + [d_model]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            if i:
                layers.append(nn.GELU())
            layers.append(nn.Linear(a, b))
        super().__init__(*layers)
        self.variant = variant
