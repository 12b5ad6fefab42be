"""Backbones and projector variants of any size from one shape rule (pure Python, no torch).

A hand-written ladder mixes shapes (other head counts, other depths at the same N), and
each size then carries an offset of its own that no scaling law fits. Ladders in the
field are generated instead (Chinchilla's table, Pythia, OLMo): the heads follow the
width by one rule, depth is tied to width by an aspect ratio, widths are rounded to a
multiple the hardware likes, and the MLP width takes up the rest so that a size lands on
its N. Every size of a rule is then the same model, scaled.

A rule size is named by its target N, the backbone's parameters (embeddings included):
`{rule}{m}e{x}` means N = m * 10^x with m of one or two digits, not ending in 0, so every
N has one spelling: `n32e3` (3.2e4, a CPU size), `g7e9` (7e9). The name reads the same in
a run id (`n32e3-BASE-e2e-C1e12`), a file name and a Snakemake wildcard (no dot).

Two rules, by where the sizes train:
- `n`: byte-level models for CPU studies: widths step by 8 (so the smallest sizes, where
  the embedding table is half of N, still come every ~12%), `d_model = 32 * n_layers` but
  at least 2 layers, the tokenizer's 264-row table, tied; heads about 64 wide (GPT-2's
  and Pythia's head dimension) but at least two, so the widths up to 128 have two heads
  of d_model / 2. A fixed narrow head (8 wide, the width step) would
  keep the head dimension constant at the price of speed: a CPU's attention kernel pays
  per head (a tile of scores and its softmax for every head, whatever its width), and a
  step of these sizes with 8-wide heads spends a third of its time in attention
  (docs/measurements-archive.md);
- `g`: accelerator sizes, Llama-2's proportions: head dimension 128, `d_model = 128 *
  n_layers`, MLP 8/3 d_model in multiples of 64 (the registry's 7b is the rule's size of
  its N), the same byte table.

The projector rule: `W{k}X` (hidden width k * d_model, 2 linears) and `D{k}X` (width
d_model, 2k linears) for any k >= 2 beside the registry's BASE, W2X, W4X, D2X, D4X.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Rows of the byte tokenizer's table (256 bytes + 4 specials, padded to a multiple of 8).
RULE_VOCAB = 264


@dataclass(frozen=True)
class ShapeRule:
    """How one rule turns a target N into a shape; `prefix` starts its size names."""

    prefix: str
    width_multiple: int  # widths are multiples of this
    head_dim: int  # heads about this wide ...
    aspect: int  # d_model per layer
    ffn_ratio: float  # the MLP width the rule aims at, per d_model
    ffn_multiple: int
    rope_theta: float = 10000.0
    vocab_size: int = RULE_VOCAB
    min_layers: int = 2
    min_heads: int = 1  # ... but at least this many
    # The MLP width may move this far (a factor) from its aim to land on N.
    ffn_slack: float = 2.0


RULES: dict[str, ShapeRule] = {
    r.prefix: r
    for r in (
        ShapeRule("n", width_multiple=8, head_dim=64, min_heads=2, aspect=32, ffn_ratio=8 / 3, ffn_multiple=8),
        ShapeRule("g", width_multiple=128, head_dim=128, aspect=128, ffn_ratio=8 / 3, ffn_multiple=64),
    )
}

RULE_NAME_RE = re.compile(r"^([ng])([1-9][0-9]?)e([0-9]{1,2})$")
# For Snakemake wildcards and the config schema (the canonical-spelling check is done on use).
RULE_NAME_PATTERN = r"[ng][1-9][0-9]?e[0-9]{1,2}"
VARIANT_NAME_RE = re.compile(r"^([WD])([1-9][0-9]*)X$")
VARIANT_NAME_PATTERN = r"[WD][1-9][0-9]*X"

# A rule name whose shape misses its N by more than this is refused (only below a rule's smallest size).
RULE_TOLERANCE = 0.05

# Sizes per decade of a rule's grid (the sizes a plan picks from): a size every ~12%.
GRID_PER_DECADE = 20


def is_rule_name(name: str) -> bool:
    return bool(RULE_NAME_RE.match(str(name)))


def rule_target(name: str) -> tuple[ShapeRule, int]:
    """`n32e3` -> (rule n, 32000); a ValueError saying how to spell it otherwise."""
    m = RULE_NAME_RE.match(str(name))
    if not m:
        raise ValueError(f"{name!r} is not a rule size (e.g. n32e3 = 3.2e4 parameters, g7e9)")
    prefix, mantissa, exponent = m.group(1), int(m.group(2)), int(m.group(3))
    if mantissa % 10 == 0:
        raise ValueError(f"{name!r}: write {prefix}{mantissa // 10}e{exponent + 1} (one spelling per size)")
    return RULES[prefix], mantissa * 10**exponent


def rule_name(prefix: str, n: float) -> str:
    """The rule size nearest to N with two significant digits: (n, 31600) -> `n32e3`."""
    if prefix not in RULES:
        raise ValueError(f"unknown shape rule {prefix!r}; valid: {', '.join(RULES)}")
    exponent = math.floor(math.log10(n)) - 1
    mantissa = round(n / 10**exponent)
    if mantissa >= 100:
        mantissa, exponent = round(mantissa / 10), exponent + 1
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    return f"{prefix}{mantissa}e{exponent}"


def rule_grid(prefix: str, lo: float, hi: float) -> list[str]:
    """The rule's sizes from lo to hi, GRID_PER_DECADE a decade (evenly spaced in log N)."""
    start, stop = (
        math.ceil(GRID_PER_DECADE * math.log10(lo) - 1e-9),
        math.floor(GRID_PER_DECADE * math.log10(hi) + 1e-9),
    )
    names = [rule_name(prefix, 10 ** (i / GRID_PER_DECADE)) for i in range(start, stop + 1)]
    return list(dict.fromkeys(names))


def _block(d: int, ffn: float) -> float:
    # Attention (q, k, v, o: all heads are kv heads), SwiGLU MLP, two RMSNorms.
    return 4 * d * d + 3 * d * ffn + 2 * d


def rule_depth(rule: ShapeRule, d_model: int) -> int:
    """Layers at a width: `d_model / aspect`, at least `min_layers`."""
    return max(rule.min_layers, round(d_model / rule.aspect))


def rule_heads(rule: ShapeRule, d_model: int) -> int:
    """The head count, at least `min_heads`, whose even heads come nearest `head_dim` wide (in log; fewer on a tie)."""
    counts = [h for h in range(rule.min_heads, d_model // 2 + 1) if d_model % h == 0 and (d_model // h) % 2 == 0]
    if not counts:
        raise ValueError(f"rule {rule.prefix}: width {d_model} has no split into {rule.min_heads}+ even heads")
    return min(counts, key=lambda h: (abs(math.log(d_model / h / rule.head_dim)), h))


def nominal_params(rule: ShapeRule, d_model: int) -> float:
    """N of the rule's shape at a width with the MLP at its aimed-at width."""
    return rule.vocab_size * d_model + d_model + rule_depth(rule, d_model) * _block(d_model, rule.ffn_ratio * d_model)


def rule_shape(rule: ShapeRule, n: float) -> dict[str, int]:
    """`{d_model, n_layers, n_heads, n_kv_heads, ffn_dim}` of the rule's backbone with about N parameters.

    Width and depth walk one path as N grows (both never shrink): the width is the
    multiple of `width_multiple` whose shape at the aimed-at MLP width is nearest N
    (in log), the depth is the width's by the aspect ratio, and the MLP width, a
    multiple of `ffn_multiple` within `ffn_slack` of its aim, lands the total on N.
    """
    if not (n > 0 and math.isfinite(n)):
        raise ValueError(f"a rule size needs a positive N, got {n!r}")
    step = rule.width_multiple
    d = step
    while nominal_params(rule, d + step) <= n:
        d += step
    if n > nominal_params(rule, d) and math.log(nominal_params(rule, d + step) / n) < math.log(
        n / nominal_params(rule, d)
    ):
        d += step
    layers = rule_depth(rule, d)
    ffn = ((n - rule.vocab_size * d - d) / layers - 4 * d * d - 2 * d) / (3 * d)
    aim = rule.ffn_ratio * d
    ffn = min(max(ffn, aim / rule.ffn_slack), aim * rule.ffn_slack)
    m = rule.ffn_multiple
    ffn_dim = max(m, m * round(ffn / m))
    heads = rule_heads(rule, d)
    return {"d_model": d, "n_layers": layers, "n_heads": heads, "n_kv_heads": heads, "ffn_dim": ffn_dim}


def variant_multipliers(name: str) -> tuple[int, int]:
    """`W8X` -> (width 8, 2 linears); `D8X` -> (width 1, 16 linears); a ValueError otherwise."""
    m = VARIANT_NAME_RE.match(str(name))
    if not m or int(m.group(2)) < 2:
        raise ValueError(f"{name!r} is not a projector rule variant (W<k>X or D<k>X, k >= 2)")
    k = int(m.group(2))
    return (k, 2) if m.group(1) == "W" else (1, 2 * k)
