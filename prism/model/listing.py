"""`prism model list`: the registries for people (a table) and for programs (JSON). No torch."""

from __future__ import annotations

import json

from prism.core.families import FAMILIES
from prism.model.config import BACKBONES, REGIMES, VARIANTS
from prism.model.sizes import RULES


def registry() -> dict:
    """The registry as data.

    `{"backbones": {NAME: {params, non_embedding_params, d_model, n_layers, ...}}, "variants", "families", "regimes"}`
    """
    backbones = {
        name: {
            "params": cfg.params,
            "non_embedding_params": cfg.non_embedding_params,
            "d_model": cfg.d_model,
            "n_layers": cfg.n_layers,
            "n_heads": cfg.n_heads,
            "n_kv_heads": cfg.n_kv_heads,
            "ffn_dim": cfg.ffn_dim,
            "vocab_size": cfg.vocab_size,
            "tie_embeddings": cfg.tie_embeddings,
            "qkv_bias": cfg.qkv_bias,
        }
        for name, cfg in BACKBONES.items()
    }
    return {"backbones": backbones, "variants": list(VARIANTS), "families": list(FAMILIES), "regimes": list(REGIMES)}


def _human(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(n)


def format_table(reg: dict) -> str:
    cols = ("backbone", "params", "non-emb", "d_model", "layers", "heads", "kv", "ffn", "vocab", "tied", "qkv_bias")
    rows = [
        (
            name,
            _human(b["params"]),
            _human(b["non_embedding_params"]),
            b["d_model"],
            b["n_layers"],
            b["n_heads"],
            b["n_kv_heads"],
            b["ffn_dim"],
            b["vocab_size"],
            "yes" if b["tie_embeddings"] else "no",
            "yes" if b["qkv_bias"] else "no",
        )
        for name, b in reg["backbones"].items()
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    lines = [
        "  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(r, widths)))
        for r in [cols, *rows]
    ]
    variants = ", ".join(f"{v.name} (width x{v.width_mult}, {v.n_layers} layers)" for v in VARIANTS.values())
    lines += [
        "",
        f"projector variants: {variants}; any W<k>X or D<k>X (k >= 2) by the rule",
        "rule sizes (any N, named by it: n32e3 = 3.2e4 parameters): "
        + "; ".join(
            f"{r.prefix}<m>e<x> heads ~{r.head_dim} wide (at least {r.min_heads}), d_model {r.aspect} x layers"
            for r in RULES.values()
        ),
        f"families: {', '.join(reg['families'])}",
        f"regimes: {', '.join(reg['regimes'])}",
    ]
    return "\n".join(lines)


def model_list(as_json: bool = False) -> str:
    reg = registry()
    return json.dumps(reg, indent=2) if as_json else format_table(reg)
