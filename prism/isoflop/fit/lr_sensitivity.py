"""How much of the exponent's uncertainty is the learning rate's: a refit with every run's lr off.

A run trained at an lr e^delta off its optimum ends `curvature x delta^2` higher (the tuning
sweep's parabola in ln lr at its width). If every run's lr were off by the fitted rule's own
80% half-interval at its width, each run's loss would rise by that much; refitting Approach 2
on the shifted losses (no retraining) moves a by `shift`. The interval of a that carries the
hyperparameters' share is the statistical one widened by |shift| each side, and the lr
dominates when |shift| exceeds the statistical half-width. A hand or given rule has no sweep:
the lines say the lr was not tuned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from prism.errors import PrismError
from prism.isoflop.fit.approach2 import fit_approach2
from prism.isoflop.records import CI_LEVEL, RunRecord
from prism.train.lr_rule import LrRule

Z = 1.2816  # the normal quantile of the 80% interval's upper end (CI_LEVEL)


def lr_penalty(rule: LrRule, d_model: float, tokens: float | None = None) -> float | None:
    """The loss a run of this width (and tokens) loses with its lr off by the rule's 80% half-interval
    (None: no sweep)."""
    sd = rule.ln_sd(d_model, tokens)
    if sd is None or not rule.curves:
        return None
    xs = [math.log(c["d_model"]) for c in rule.curves]
    ks = [max(0.0, float(c["curvature"])) for c in rule.curves]
    order = np.argsort(xs)
    curvature = float(np.interp(math.log(d_model), np.take(xs, order), np.take(ks, order)))
    return curvature * (Z * sd) ** 2


@dataclass(frozen=True)
class LrSensitivity:
    a: float
    a_shifted: float
    penalty_min: float
    penalty_max: float

    @property
    def shift(self) -> float:
        return self.a_shifted - self.a


def lr_sensitivity(records: list[RunRecord], widths: list[float], rule: LrRule) -> LrSensitivity | None:
    """Approach 2's a, and its a with every run's loss raised by `lr_penalty` at its width (None: no sweep or no a)."""
    penalties = [lr_penalty(rule, w, r.tokens) for w, r in zip(widths, records, strict=True)]
    if not records or any(p is None for p in penalties):
        return None
    cols = [np.array([getattr(r, k) for r in records], float) for k in ("params", "tokens", "loss", "budget")]
    n, d, loss, c = cols
    # Every size of each budget, both times: the shift is the penalties', not a window chosen anew.
    base = fit_approach2(n, d, loss, c)
    moved = fit_approach2(n, d, loss + np.array(penalties), c, reference=base.reference)
    if base.n_law is None or moved.n_law is None:
        return None
    return LrSensitivity(base.n_law.exponent, moved.n_law.exponent, min(penalties), max(penalties))


def sensitivity_lines(rule: LrRule, found: LrSensitivity | None, a_ci: tuple[float, float] | None) -> list[str]:
    """The report's lines: which rule, and for a fitted one how far a moves and whether the lr dominates."""
    lines = [f"  learning rate: {rule.describe()}"]
    if rule.kind != "fitted":
        lines.append("  learning rate not tuned: a's interval carries no share of the hyperparameters (no sweep)")
        return lines
    if found is None:
        lines.append("  lr sensitivity: not computed (no Approach 2 exponent, or no sweep curves in the rule)")
        return lines
    text = (
        f"  lr sensitivity: every run's lr off by the rule's {100 * CI_LEVEL:.0f}% interval raises its loss by "
        f"{found.penalty_min:.2g}-{found.penalty_max:.2g} and moves a by {found.shift:+.3f}"
    )
    if a_ci is not None and all(math.isfinite(x) for x in a_ci):
        lo, hi = a_ci
        half = abs(found.shift)
        share = "the lr DOMINATES a's interval" if half > (hi - lo) / 2 else "the noise dominates"
        text += f"; with it a's interval [{lo - half:.3f}, {hi + half:.3f}] ({share})"
    lines.append(text)
    return lines


def family_lr_lines(folder: Path, a_ci: tuple[float, float] | None) -> list[str]:
    """The summary's lr lines of a family folder: its plan's rule (plan.yaml) and the runs (runs.csv).

    A study planned before plans recorded their rule has no line (nothing to say about it).
    """
    from prism.isoflop.runs.table import load_runs  # noqa: PLC0415 lazy: the fit's reader
    from prism.model.config import backbone_config  # noqa: PLC0415

    plan_file = folder / "plan.yaml"
    if not plan_file.is_file():
        return []
    plan = yaml.safe_load(plan_file.read_text()) or {}
    if not plan.get("lr_rule"):
        return []
    rule = LrRule(**plan["lr_rule"])
    found = None
    if rule.kind == "fitted":
        try:
            records = load_runs(folder / "runs.csv").records
        except PrismError:
            records = []
        widths = [backbone_config(r.run_id.split("-", 1)[0]).d_model for r in records]
        found = lr_sensitivity(records, widths, rule)
    return sensitivity_lines(rule, found, a_ci)
