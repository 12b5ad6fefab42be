"""How much of the exponent's uncertainty is the learning rate's: a refit with every run's lr off.

A run trained at an lr e^delta off its optimum ends `curvature x delta^2` higher (the tuning
sweep's parabola in ln lr at its width). If every run's lr were off by the fitted rule's own
80% half-interval at its width, each run's loss would rise by that much; refitting Approach 2
on the shifted losses (no retraining) moves a by `shift`. The interval of a that carries the
hyperparameters' share is the statistical one widened by |shift| each side, and the lr
dominates when |shift| exceeds the statistical half-width. A hand or given rule has no sweep:
the lines say the lr was not tuned, and where the plan found a sweep measured on the same design
(a previous round's `lr_rule.json`), how far the runs' lrs are off its optimum and how a moves if
they were at it (`lr_offset`) or off by its interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prism.isoflop.fit.approach2 import fit_approach2
from prism.isoflop.records import CI_LEVEL, RunRecord
from prism.train.lr_rule import LrRule

Z = 1.2816  # the normal quantile of the 80% interval's upper end (CI_LEVEL)


def curvature(rule: LrRule, d_model: float) -> float:
    """The sweep's loss curvature per (ln lr)^2 at this width: its widths' (their lengths' mean), interpolated
    in log width."""
    by_width: dict[float, list[float]] = {}
    for c in rule.curves:
        by_width.setdefault(math.log(c["d_model"]), []).append(max(0.0, float(c["curvature"])))
    xs = sorted(by_width)
    return float(np.interp(math.log(d_model), xs, [sum(by_width[x]) / len(by_width[x]) for x in xs]))


def lr_penalty(rule: LrRule, d_model: float, tokens: float | None = None) -> float | None:
    """The loss a run of this width (and tokens) loses with its lr off by the rule's 80% half-interval
    (None: no sweep)."""
    sd = rule.ln_sd(d_model, rule.covered_tokens(tokens) if tokens else None)
    if sd is None or not rule.curves:
        return None
    return curvature(rule, d_model) * (Z * sd) ** 2


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


@dataclass(frozen=True)
class LrOffset:
    """A study's runs against a sweep's optimum: how far off their lrs are, what it costs, how a moves."""

    ratio_min: float
    ratio_max: float
    penalty_min: float
    penalty_max: float
    shift: float


def lr_offset(records: list[RunRecord], widths: list[float], used: LrRule, reference: LrRule) -> LrOffset | None:
    """Runs trained at `used`'s lrs, against `reference`'s (a fitted sweep's) optimum: each run's loss is
    `curvature x ln(lr / optimum)^2` above what the optimum would give; a refitted on the losses without
    it moves by `shift` (None: no sweep curves or no a)."""
    if not records or not reference.curves:
        return None
    # The optimum where the sweep measured it: its lengths (widened by its margin), not q extrapolated beyond.
    ratios = [used.lr(w, r.tokens) / reference.lr(w, reference.covered_tokens(r.tokens))
              for w, r in zip(widths, records, strict=True)]  # fmt: skip
    penalties = [curvature(reference, w) * math.log(k) ** 2 for w, k in zip(widths, ratios, strict=True)]
    n, d, loss, c = (np.array([getattr(r, k) for r in records], float) for k in ("params", "tokens", "loss", "budget"))
    base = fit_approach2(n, d, loss, c)
    tuned = fit_approach2(n, d, loss - np.array(penalties), c, reference=base.reference)
    if base.n_law is None or tuned.n_law is None:
        return None
    shift = tuned.n_law.exponent - base.n_law.exponent
    return LrOffset(min(ratios), max(ratios), min(penalties), max(penalties), shift)


def reference_lines(reference: LrRule, source: str, offset: LrOffset | None, found: LrSensitivity | None,
                    a_ci: tuple[float, float] | None) -> list[str]:  # fmt: skip
    """The lines of an untuned study against a sweep measured on its design (a previous round's)."""
    if offset is None or found is None:
        return [f"  lr sensitivity against the sweep in {source}: not computed (no Approach 2 exponent)"]
    text = (
        f"  lr sensitivity against the sweep in {source} ({reference.describe()}): the runs train at "
        f"x{offset.ratio_min:.2g}-x{offset.ratio_max:.2g} of its optimum lr, {offset.penalty_min:.2g}-"
        f"{offset.penalty_max:.2g} above its loss; at the optimum a would move by {offset.shift:+.3f}, and by "
        f"{found.shift:+.3f} with every lr off by the sweep's {100 * CI_LEVEL:.0f}% interval"
    )
    return [text + _dominance(abs(offset.shift) + abs(found.shift), a_ci)]


def _dominance(half: float, a_ci: tuple[float, float] | None) -> str:
    """a's interval widened by the lr's share `half` each side, and which of the two dominates."""
    if a_ci is None or not all(math.isfinite(x) for x in a_ci):
        return ""
    lo, hi = a_ci
    share = "the lr DOMINATES a's interval" if half > (hi - lo) / 2 else "the noise dominates"
    return f"; with it a's interval [{lo - half:.3f}, {hi + half:.3f}] ({share})"


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
    lines.append(text + _dominance(abs(found.shift), a_ci))
    return lines


@dataclass(frozen=True)
class LrShare:
    """A family's lr lines, and the lr's share of a's interval each side against a's statistical half-width
    (None: not computed), so that the verdict can say when the learning rate, not the noise, dominates."""

    lines: list[str]
    half: float | None = None
    a_ci: tuple[float, float] | None = None

    @property
    def dominates(self) -> bool:
        if self.half is None or self.a_ci is None or not all(math.isfinite(x) for x in self.a_ci):
            return False
        return self.half > (self.a_ci[1] - self.a_ci[0]) / 2

    def verdict_note(self) -> str:
        """The verdict's clause when the lr dominates a's interval ("" otherwise)."""
        if not self.dominates:
            return ""
        lo, hi = self.a_ci
        return (
            f"; the learning rate DOMINATES a's interval (its share +/-{self.half:.3f} against the noise's "
            f"+/-{(hi - lo) / 2:.3f}: a depends on each size's lr more than on the seeds; see the lr lines)"
        )
