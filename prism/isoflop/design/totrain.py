"""What to train at a predicted N_opt: the study's own shape rule's nearest sizes, at its batch and lr rule.

As Marin's scaling-law code turns a target budget into a model configuration: the sizes come from the
rule the study's plan drew its grid from (`plan.size_rule`), so a model trained at the predicted size
is of the family the law was measured on. A size's trainable parameters are its backbone's plus what
the study's runs add to their backbones (the encoder and projector the regime trains), read off the
plan's own rows. The lr is the plan's lr rule's, refused (with the rule's reason) where the rule would
extrapolate, as the plan refuses it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from prism.core.errors import PrismError
from prism.core.studylayout import FamilyFolder
from prism.isoflop.planread import PlanUnreadable, plan_mapping
from prism.model import sizes
from prism.model.config import backbone_config
from prism.train.lr_rule import LrRule


@dataclass(frozen=True)
class Size:
    """One backbone of the study's shape rule near a predicted N_opt, trained on the budget."""

    backbone: str
    d_model: int
    n_layers: int
    params: float  # trainable, as the study counts N
    tokens: float  # that spend the budget at this size
    steps: int | None  # at the study's global batch and row length
    lr: float | None
    lr_note: str = ""  # why no lr (the rule would extrapolate), else the rule's kind


def _extra_params(plan: dict) -> float:
    """What the study's runs train beyond their backbone (median over the plan's rows of rule sizes)."""
    extra = [
        r["params"] - backbone_config(r["backbone"]).params
        for r in plan.get("runs") or []
        if sizes.is_rule_name(r.get("backbone", "")) and r.get("params")
    ]
    return float(statistics.median(extra)) if extra else 0.0


def _lr_rule(plan: dict) -> LrRule | None:
    data = plan.get("lr_rule")
    if not isinstance(data, dict):
        return None
    known = LrRule.__dataclass_fields__
    fields = {k: (tuple(v) if isinstance(v, list) and k != "curves" else v) for k, v in data.items() if k in known}
    return LrRule(**fields)


def sizes_to_train(plan: dict, n_opt: float, tokens_at, count: int = 2) -> list[Size]:
    """The `count` sizes of the plan's shape rule nearest `n_opt` (trainable parameters, in log), each with
    the tokens `tokens_at(N)` gives it on the budget. Empty when the plan names no shape rule."""
    prefix = (plan.get("options") or {}).get("size_rule")
    if prefix not in sizes.RULES or not (n_opt > 0 and math.isfinite(n_opt)):
        return []
    extra = _extra_params(plan)
    target = max(n_opt - extra, 1.0)
    names = sizes.rule_grid(prefix, target / 1.6, target * 1.6) or [sizes.rule_name(prefix, target)]
    found = []
    for name in names:
        try:
            cfg = backbone_config(name)
        except (ValueError, KeyError, PrismError):
            continue
        found.append((abs(math.log((cfg.params + extra) / n_opt)), name, cfg))
    found.sort(key=lambda t: t[0])
    rule = _lr_rule(plan)
    runs = plan.get("runs") or [{}]
    batch, row = (plan.get("options") or {}).get("global_batch"), runs[0].get("tokens_per_sample")
    out = []
    for _, name, cfg in sorted(found[:count], key=lambda t: t[2].params):
        n = cfg.params + extra
        tokens = float(tokens_at(n))
        steps = round(tokens / row / batch) if batch and row else None
        lr, note = _lr(rule, cfg.d_model, tokens)
        out.append(Size(name, cfg.d_model, cfg.n_layers, float(n), tokens, steps, lr, note))
    return out


def _lr(rule: LrRule | None, d_model: int, tokens: float) -> tuple[float | None, str]:
    if rule is None:
        return None, "the plan records no lr rule"
    try:
        rule.check_covers([d_model], "the lr rule", [tokens])
    except PrismError as err:
        return None, str(err)
    return float(f"{rule.lr(d_model, tokens):.4g}"), rule.kind


def size_line(s: Size) -> str:
    """`n32e3: d_model 64, 4 layers, 4.1e4 trainable params, 2.2e6 tokens = 1070 steps, lr 0.024`."""
    steps = f" = {s.steps} steps" if s.steps is not None else ""
    lr = f"lr {s.lr:g} (the plan's {s.lr_note} lr rule)" if s.lr is not None else f"no lr: {s.lr_note}"
    return (
        f"{s.backbone}: d_model {s.d_model}, {s.n_layers} layers, {s.params:.3g} trainable params, "
        f"{s.tokens:.3g} tokens{steps}, {lr}"
    )


def study_plan(folder: Path) -> dict | None:
    """The study's plan.yaml beside its runs (None where there is none or it does not parse)."""
    try:
        return plan_mapping(FamilyFolder(folder).plan)
    except PlanUnreadable:
        return None


def row_length(plan: dict | None) -> float | None:
    """Tokens per sample of the plan's runs (the study's row length), None without a plan."""
    runs = (plan or {}).get("runs") or []
    value = runs[0].get("tokens_per_sample") if runs and isinstance(runs[0], dict) else None
    return float(value) if value else None
