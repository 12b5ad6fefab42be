"""The backbone, projector-variant and regime registries (pure Python, no torch).

The CLI, the planner and the workflow read these to validate names and count
parameters without importing torch.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from prism.core.errors import PrismError, unknown_name
from prism.core.families import FamilySpec, family_spec, spec_record
from prism.model import sizes

# Byte tokenizer: 256 bytes + PAD, BOS, EOS, MOD (see prism.core.tokenizer).
BYTE_VOCAB = 260
# The small backbones pad the embedding table to 264 rows (a multiple of 8) so the
# LM-head matmul has aligned shapes; the 4 extra ids never occur in the data.
SMALL_VOCAB = sizes.RULE_VOCAB


@dataclass(frozen=True)
class BackboneConfig:
    """A decoder-only transformer's shape.

    `vocab_size` is the embedding table's row count: the real sizes keep their
    published vocabularies (so their parameter counts match the papers) while
    the data only uses the first 260 ids.
    """

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int = SMALL_VOCAB
    tie_embeddings: bool = True
    qkv_bias: bool = False
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"{self.name}: d_model {self.d_model} not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: n_heads {self.n_heads} not divisible by n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"{self.name}: head_dim {self.head_dim} must be even for rotary positions")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def block_params(self) -> int:
        """Parameters of one transformer block (attention, SwiGLU MLP, two RMSNorms)."""
        d, kv = self.d_model, self.n_kv_heads * self.head_dim
        attn = d * d + 2 * d * kv + d * d
        if self.qkv_bias:
            attn += d + 2 * kv
        return attn + 3 * d * self.ffn_dim + 2 * d

    @property
    def non_embedding_params(self) -> int:
        """Blocks plus the final norm: the size a backbone is named after."""
        return self.n_layers * self.block_params + self.d_model

    @property
    def embedding_params(self) -> int:
        """Input embedding plus (when untied) the LM head."""
        return self.vocab_size * self.d_model * (1 if self.tie_embeddings else 2)

    @property
    def params(self) -> int:
        return self.non_embedding_params + self.embedding_params

    @property
    def is_small(self) -> bool:
        """A CPU size: the small ladder's or the `n` rule's."""
        return self.name in SMALL_BACKBONES or self.name.startswith("n") and sizes.is_rule_name(self.name)


def _small(name: str, d: int, layers: int, heads: int, ffn: int) -> BackboneConfig:
    return BackboneConfig(name, d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=heads, ffn_dim=ffn)


# Shallow and fairly wide (head_dim 16-32) so fp32 eager matmuls on a CPU stay
# efficient; named by approximate non-embedding parameters. Up to 500k the ladder
# is about 0.1-0.15 decades apart in trainable N (with the encoder, projector and
# embeddings, on text_image: 18k, 23k, 27k, 33k, 41k, 50k, 67k, 86k, 119k, 152k,
# 223k, 278k, 407k, 556k), so an IsoFLOP grid of +-0.3 decades holds 5-6 sizes.
# The encoder and projector (~10k) set a floor under N: 4k and 10k exist so that a
# budget whose optimum is near 2e4 (about 2e11 FLOPs on text_image) is bracketed.
SMALL_BACKBONES: tuple[str, ...] = (
    "4k",
    "8k",
    "10k",
    "15k",
    "20k",
    "30k",
    "45k",
    "60k",
    "90k",
    "120k",
    "180k",
    "250k",
    "350k",
    "500k",
    "1m",
    "3m",
)

BACKBONES: dict[str, BackboneConfig] = {
    cfg.name: cfg
    for cfg in (
        _small("4k", 16, 1, 1, 64),
        _small("8k", 16, 2, 1, 64),
        _small("10k", 20, 2, 1, 64),
        _small("15k", 24, 2, 1, 80),
        _small("20k", 28, 2, 1, 96),
        _small("30k", 32, 2, 2, 112),
        _small("45k", 40, 2, 2, 128),
        _small("60k", 48, 2, 3, 144),
        _small("90k", 56, 2, 2, 192),
        _small("120k", 64, 2, 4, 224),
        _small("180k", 72, 3, 3, 192),
        _small("250k", 80, 3, 5, 224),
        _small("350k", 96, 3, 3, 288),
        _small("500k", 128, 3, 4, 256),
        _small("1m", 128, 5, 4, 352),
        _small("3m", 192, 6, 6, 608),
        # Llama-3.2-1B shape.
        BackboneConfig("1b", 2048, 16, 32, 8, 8192, vocab_size=128256, tie_embeddings=True, rope_theta=500000.0),
        # Llama-2-7B shape.
        BackboneConfig("7b", 4096, 32, 32, 32, 11008, vocab_size=32000, tie_embeddings=False),
        # Qwen2.5-32B shape.
        BackboneConfig(
            "32b",
            5120,
            64,
            40,
            8,
            27648,
            vocab_size=152064,
            tie_embeddings=False,
            qkv_bias=True,
            rope_theta=1000000.0,
            norm_eps=1e-6,
        ),
    )
}


@dataclass(frozen=True)
class ProjectorVariant:
    """An MLP from encoder width to d_model: `n_layers` linears, hidden width `width_mult * d_model`."""

    name: str
    width_mult: int
    n_layers: int


VARIANTS: dict[str, ProjectorVariant] = {
    v.name: v
    for v in (
        ProjectorVariant("BASE", 1, 2),
        ProjectorVariant("W2X", 2, 2),
        ProjectorVariant("W4X", 4, 2),
        ProjectorVariant("D2X", 1, 4),
        ProjectorVariant("D4X", 1, 8),
    )
}

# Which parts train in each regime (the rest is frozen: requires_grad False).
REGIMES: dict[str, tuple[str, ...]] = {
    "projector_only": ("projector",),
    "encoder_projector": ("encoder", "projector"),
    "e2e": ("backbone", "encoder", "projector"),
}


def backbone_config(name: str, vocab_rows: int | None = None) -> BackboneConfig:
    """A registry backbone, or the shape rule's size of that name (`n32e3`, `g7e9`: prism.model.sizes).

    `vocab_rows`: the embedding rows of the study's tokenizer (`Vocab.rows`), replacing a registry
    backbone's published vocabulary; a rule size is shaped with them, so that its N, embeddings
    included, is still its name's. None: the registry's published rows, the rule's byte table.
    """
    if vocab_rows is not None:
        return _with_rows(name, int(vocab_rows))
    if name in BACKBONES:
        return BACKBONES[name]
    if not sizes.RULE_NAME_RE.match(str(name)):
        raise PrismError(
            f"unknown backbone {name!r}; valid: {', '.join(BACKBONES)}, or a rule size such as "
            "n32e3 (3.2e4 parameters, CPU shapes) or g7e9 (accelerator shapes)"
        )
    try:
        rule, n = sizes.rule_target(name)
    except ValueError as err:
        raise PrismError(f"backbone {err}") from None
    cfg = _rule_config(name, rule, n)
    if abs(cfg.params / n - 1) > sizes.RULE_TOLERANCE:
        raise PrismError(
            f"backbone {name!r}: rule {rule.prefix} has no shape within {sizes.RULE_TOLERANCE:.0%} of {n:.3g} "
            f"parameters (nearest: {cfg.params:.3g}); its sizes start at {smallest_rule_size(rule.prefix)}"
        )
    return cfg


@functools.lru_cache(maxsize=4096)
def _with_rows(name: str, rows: int) -> BackboneConfig:
    if name in BACKBONES:
        return dataclasses.replace(BACKBONES[name], vocab_size=rows)
    cfg = backbone_config(name)  # the name checked as it always was (a byte table)
    rule, n = sizes.rule_target(name)
    if rows == rule.vocab_size:
        return cfg
    cfg = _rule_config(name, dataclasses.replace(rule, vocab_size=rows), n)
    if abs(cfg.params / n - 1) > sizes.RULE_TOLERANCE:
        raise PrismError(
            f"backbone {name!r}: with the tokenizer's {rows} embedding rows rule {rule.prefix} has no shape "
            f"within {sizes.RULE_TOLERANCE:.0%} of {n:.3g} parameters (the embedding alone is "
            f"{rows * cfg.d_model:.3g}); choose larger sizes or a smaller vocabulary"
        )
    return cfg


def _rule_config(name: str, rule: sizes.ShapeRule, n: float) -> BackboneConfig:
    shape = sizes.rule_shape(rule, n)
    return BackboneConfig(name, **shape, vocab_size=rule.vocab_size, tie_embeddings=True, rope_theta=rule.rope_theta)


@functools.cache
def smallest_rule_size(prefix: str) -> str:
    """The rule's smallest grid size above which every grid size lands within RULE_TOLERANCE of its name."""
    names = sizes.rule_grid(prefix, 1e3, 1e9)
    off = [
        i
        for i, name in enumerate(names)
        if abs(
            _rule_config(name, sizes.RULES[prefix], sizes.rule_target(name)[1]).params / sizes.rule_target(name)[1] - 1
        )
        > sizes.RULE_TOLERANCE
    ]
    return names[off[-1] + 1 if off else 0]


def is_backbone(name: str) -> bool:
    try:
        backbone_config(name)
    except PrismError:
        return False
    return True


def check_backbone(name: str, where: str | None = None) -> str:
    """`name` if it is a registry or rule backbone, else the PrismError saying what is valid (after `where`)."""
    return _checked(backbone_config, name, where)


def check_variant(name: str, where: str | None = None) -> str:
    """`name` if it is a registry or rule projector variant, else the PrismError saying what is valid."""
    return _checked(projector_variant, name, where)


def _checked(lookup, name: str, where: str | None) -> str:
    try:
        lookup(name)
    except PrismError as err:
        if where is None:
            raise
        raise PrismError(f"{where}: {err}") from None
    return name


# The shape a calibration records of its backbone. Two shapes of the same name have the
# same parameters and FLOPs when only the heads differ, so the count alone would not
# notice that a name now builds another model.
SHAPE_KEYS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_dim")


def backbone_shape(name: str, vocab_rows: int | None = None) -> dict[str, int]:
    cfg = backbone_config(name, vocab_rows)
    return {key: getattr(cfg, key) for key in SHAPE_KEYS}


def expected_shape(family: str, backbone: str, spec: FamilySpec | None = None) -> dict:
    """What a calibration of `backbone` for `family` at `spec` (None: the laptop default) must record:
    the backbone's shape (with the tokenizer's embedding rows) and the spec where it is not the default."""
    spec = family_spec(family, spec)
    return backbone_shape(backbone, spec.vocab.rows) | {"family_spec": spec_record(spec)}


def projector_variant(name: str) -> ProjectorVariant:
    """A registry variant, or the projector rule's `W<k>X` (width k, 2 linears) / `D<k>X` (2k linears)."""
    if name in VARIANTS:
        return VARIANTS[name]
    try:
        width, layers = sizes.variant_multipliers(name)
    except ValueError:
        raise PrismError(
            f"unknown projector variant {name!r}; valid: {', '.join(VARIANTS)}, or by the rule "
            "W<k>X (hidden width k x d_model) or D<k>X (2k linears), k >= 2"
        ) from None
    return ProjectorVariant(name, width, layers)


def regime_parts(name: str) -> tuple[str, ...]:
    try:
        return REGIMES[name]
    except KeyError:
        raise unknown_name("regime", name, REGIMES) from None
