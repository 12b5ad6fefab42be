"""Parameter counts of a whole PRISM model without building it (pure Python, no torch).

The workflow decides which rule sizes a study needs before anything is calibrated (its
DAG must list every calibration job), so it needs each size's trainable N from the
names alone. These formulas mirror prism.model.encoders and prism.model.projector;
tests/model/test_paramcount.py holds them equal to the built modules for every family.
"""

from __future__ import annotations

from functools import lru_cache

from prism.core.families import FamilySpec, family_bundle, family_spec
from prism.model.config import backbone_config, projector_variant, regime_parts

ENCODER_HEAD_MLP = 2  # EncoderBlock's mlp_mult
GRID_INDEX = 16  # GridEncoder.N_INDEX
GRAPH_ROUNDS = 2


def _linear(a: int, b: int) -> int:
    return a * b + b


def encoder_params(spec: FamilySpec) -> int:
    """The family's encoder: its tokenizer, learned positions, one transformer block, final LayerNorm."""
    w, t = spec.encoder_width, spec.n_modality_tokens
    block = (
        2 * w
        + _linear(w, 3 * w)
        + _linear(w, w)
        + 2 * w
        + _linear(w, ENCODER_HEAD_MLP * w)
        + _linear(ENCODER_HEAD_MLP * w, w)
    )
    tail = t * w + block + 2 * w
    return family_bundle(spec.name).part("params")(spec) + tail


# The tokenizer of each built-in family's encoder (its bundle's `params`), before the shared tail.


# The values one token of the modality holds: the input width of its tokenizer's linear (prism.model.flopcount
# counts the same linear's FLOPs).


def image_patch_values(spec: FamilySpec) -> int:
    """channels x patch x patch, the patch the image's tokens tile it with."""
    c, h, wd = spec.modality_shape
    patch = round((h * wd / spec.n_modality_tokens) ** 0.5)
    return c * patch * patch


def series_patch_values(spec: FamilySpec) -> int:
    """channels x the steps of one token."""
    c, steps = spec.modality_shape
    return c * (steps // spec.n_modality_tokens)


def video_patch_values(spec: FamilySpec) -> int:
    """channels x patch x patch, the patch each frame's tokens tile it with."""
    frames, c, h, wd = spec.modality_shape
    patch = round((h * wd / (spec.n_modality_tokens // frames)) ** 0.5)
    return c * patch * patch


def image_tokenizer(spec: FamilySpec) -> int:
    return _linear(image_patch_values(spec), spec.encoder_width)


def series_tokenizer(spec: FamilySpec) -> int:
    return _linear(series_patch_values(spec), spec.encoder_width)


def graph_tokenizer(spec: FamilySpec) -> int:
    w = spec.encoder_width
    return _linear(spec.modality_shape[0] + 1, w) + GRAPH_ROUNDS * _linear(w, w)


def table_tokenizer(spec: FamilySpec) -> int:
    return spec.modality_shape[0] * spec.encoder_width + spec.n_modality_tokens * spec.encoder_width


def video_tokenizer(spec: FamilySpec) -> int:
    return _linear(video_patch_values(spec), spec.encoder_width)


def grid_tokenizer(spec: FamilySpec) -> int:
    planes, h, wd = spec.modality_shape
    w = spec.encoder_width
    return planes * GRID_INDEX * w + h * wd * w + _linear(w, w)


def projector_dims(in_dim: int, d_model: int, width_mult: int, n_layers: int) -> list[int]:
    """The widths the projector's `n_layers` linears map between, from the encoder's to the backbone's."""
    return [in_dim] + [width_mult * d_model] * (n_layers - 1) + [d_model]


def projector_params(in_dim: int, d_model: int, width_mult: int, n_layers: int) -> int:
    dims = projector_dims(in_dim, d_model, width_mult, n_layers)
    return sum(_linear(a, b) for a, b in zip(dims[:-1], dims[1:]))


def component_params(family: str, backbone: str, variant: str, spec: FamilySpec | None = None) -> dict[str, int]:
    """`{"backbone", "encoder", "projector"}` parameters (tied embeddings counted once) at `spec`
    (None: the family's laptop default)."""
    return _components(family_spec(family, spec), backbone, variant)


def _components(spec: FamilySpec, backbone: str, variant: str) -> dict[str, int]:
    var, cfg = projector_variant(variant), backbone_config(backbone, spec.vocab.rows)
    return {
        "backbone": cfg.params,
        "encoder": encoder_params(spec),
        "projector": projector_params(spec.encoder_width, cfg.d_model, var.width_mult, var.n_layers),
    }


def trainable_params(family: str, backbone: str, variant: str, regime: str, spec: FamilySpec | None = None) -> int:
    """N of the regime: the parameters of the parts it trains (a calibration's `params_trainable`),
    at `spec` (the family's shape and tokenizer; None: its laptop default)."""
    return _trainable(family_spec(family, spec), backbone, variant, regime)


@lru_cache(maxsize=4096)
def _trainable(spec: FamilySpec, backbone: str, variant: str, regime: str) -> int:
    """Cached by spec: the workflow asks for the same candidates' N each time it evaluates an input function."""
    parts = _components(spec, backbone, variant)
    return sum(parts[name] for name in regime_parts(regime))
