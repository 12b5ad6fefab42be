"""The peak learning rate of a run, by a stated rule: hand, given or fitted, never silent.

    lr = c * (d_model / D_REF)^-p * (tokens / tokens_ref)^-q(d_model)

q(d_model) = q + q_slope * ln(d / q_mid), d = d_model held within `q_widths` (the widths swept at two
lengths; q_mid their geometric middle): measured at one width, q is one number; at several, how
fast the optimal lr falls with a run's tokens may change with width, and beyond the widths where it
was measured q is held at its last measured value, not extrapolated.

- `hand`: today's rule (prism.train.lr_schedule.default_lr: c = 3e-3, p = 1, q = 0), nothing measured;
- `given`: the study's own constants (config `tune:` lr_c, lr_p, lr_q), nothing measured;
- `fitted`: what the tuning stage measured (prism.isoflop.design.tuning writes it as JSON): its
  constants, the widths it swept, and the covariance of (ln c, p[, q[, q_slope]]), so that the rule's own
  uncertainty at any width is known (`ln_sd`) and a grid outside the swept widths (beyond
  `margin` decades) is refused.

Pure Python: the plan and the CLI read it without torch or numpy.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from prism.core.errors import PrismError
from prism.train.lr_schedule import BASE_LR, D_REF

RULE_KINDS = ("hand", "given", "fitted")
TOKENS_REF = 1e8
DEFAULT_MARGIN = 0.3
PAIRS = ("widths", "tokens", "q_widths")  # the rule file's [min, max] fields


@dataclass(frozen=True)
class LrRule:
    """A peak-lr rule; `fitted` ones carry the widths they were measured on and their uncertainty."""

    kind: str = "hand"
    c: float = BASE_LR
    p: float = 1.0
    q: float = 0.0
    # The tokens at which c is the lr (a fitted rule's: the sweep's geometric mean, so c is measured there).
    tokens_ref: float = TOKENS_REF
    # fitted: [min, max] d_model swept, the decades beyond it the rule may extrapolate, and the
    # covariance of (ln c, p) or, with a tokens exponent, of (ln c, p, q) (None: not measured).
    widths: tuple[float, float] | None = None
    # fitted with a tokens exponent: [min, max] tokens of the swept runs (None: one length, or not measured).
    tokens: tuple[float, float] | None = None
    # fitted with q measured at two or more widths: q's change per ln d_model, and the [min, max] d_model
    # it was measured on (q is held constant beyond them).
    q_slope: float = 0.0
    q_widths: tuple[float, float] | None = None
    margin: float = DEFAULT_MARGIN
    cov: tuple[tuple[float, ...], ...] | None = None
    # fitted: the sweep's curves per swept width (d_model, ln lr optimum, loss curvature per (ln lr)^2)
    # and what the sweep cost, for the sensitivity of the answer and the plan's cost line.
    curves: list[dict] = field(default_factory=list)
    flops: float | None = None
    source: str = "prism.train.lr_schedule (3e-3 x 128 / d_model), not tuned"

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise PrismError(f"lr rule: unknown kind {self.kind!r}; valid: {', '.join(RULE_KINDS)}")
        if not (self.c > 0 and math.isfinite(self.c)):
            raise PrismError(f"lr rule ({self.kind}): c must be a positive number, got {self.c!r}")

    @property
    def has_q(self) -> bool:
        """Whether the lr depends on the run's tokens."""
        return bool(self.q or self.q_slope)

    def _q_offset(self, d_model: float) -> float:
        """ln(d / q_mid), d_model held within the widths q was measured on (0 where q is one number)."""
        if not self.q_slope or self.q_widths is None:
            return 0.0
        lo, hi = self.q_widths
        return math.log(min(max(d_model, lo), hi) / math.sqrt(lo * hi))

    def q_at(self, d_model: float) -> float:
        """The tokens exponent at this width."""
        return self.q + self.q_slope * self._q_offset(d_model)

    def lr(self, d_model: float, tokens: float | None = None) -> float:
        """The peak learning rate of a run of this width (and tokens, where q != 0)."""
        value = self.c * (d_model / D_REF) ** -self.p
        if self.has_q:
            if not tokens:
                raise PrismError(f"lr rule ({self.kind}): q = {self.q:g} needs the run's tokens")
            value *= (tokens / self.tokens_ref) ** -self.q_at(d_model)
        return value

    def ln_sd(self, d_model: float, tokens: float | None = None) -> float | None:
        """Standard deviation of ln lr the rule predicts at this width and tokens (None: not measured;
        no tokens: at `tokens_ref`)."""
        if self.cov is None:
            return None
        ln_t = math.log(tokens / self.tokens_ref) if tokens else 0.0
        grad = [1.0, -math.log(d_model / D_REF), -ln_t, -ln_t * self._q_offset(d_model)]
        k = len(self.cov)
        var = sum(grad[i] * self.cov[i][j] * grad[j] for i in range(k) for j in range(k))
        return math.sqrt(max(0.0, var))

    def covered_tokens(self, tokens: float) -> float:
        """`tokens` within the swept lengths widened by `margin` decades: where q was measured (a sensitivity
        read beyond it would extrapolate the exponent)."""
        if self.tokens is None:
            return tokens
        lo, hi = self.tokens
        return min(max(tokens, lo / 10**self.margin), hi * 10**self.margin)

    def check_covers(self, widths: list[float], source: str = "the plan", tokens: list[float] = ()) -> None:
        """Refuse, in one line, a grid whose widths (or, for a rule with a tokens exponent, the tokens its lrs
        are taken at) lie beyond the fitted range by more than `margin` decades."""
        if self.tokens is not None and self.has_q and tokens:
            lo, hi = self.tokens
            beyond = max(math.log10(lo / min(tokens)), math.log10(max(tokens) / hi))
            if beyond > self.margin + 1e-9:
                raise PrismError(
                    f"{source}: the lr rule ({self.source}) was fitted on runs of {lo:.3g}-{hi:.3g} tokens, but the "
                    f"grid's lrs are taken at {min(tokens):.3g}-{max(tokens):.3g}, more than tune.margin "
                    f"{self.margin:g} decades beyond; sweep longer (tune.long_steps) or widen tune.margin"
                )
        if self.widths is None or not widths:
            return
        lo, hi = self.widths
        below = math.log10(lo / min(widths))
        above = math.log10(max(widths) / hi)
        if max(below, above) > self.margin + 1e-9:
            raise PrismError(
                f"{source}: the lr rule ({self.source}) was fitted on d_model {lo:g}-{hi:g}, but the grid spans "
                f"{min(widths):g}-{max(widths):g}, more than tune.margin {self.margin:g} decades beyond it; "
                "sweep sizes that span the grid (tune.sizes) or widen tune.margin"
            )

    def describe(self) -> str:
        """One line naming the rule and where it comes from."""
        law = f"lr = {self.c:.3g} x (d_model/{D_REF})^-{self.p:.3g}"
        if self.q_slope and self.q_widths:
            lo, hi = self.q_widths
            sign = "-" if self.q_slope < 0 else "+"
            law += (f" x (tokens/{self.tokens_ref:.3g})^-q, q = {self.q:.3g} {sign} {abs(self.q_slope):.3g} "
                    f"ln(d_model/{math.sqrt(lo * hi):.3g}), d_model held in {lo:g}-{hi:g}")  # fmt: skip
        elif self.q:
            law += f" x (tokens/{self.tokens_ref:.3g})^-{self.q:.3g}"
        return f"lr rule {self.kind}: {law} ({self.source})"

    def to_json(self) -> dict:
        return asdict(self)


def given_rule(c: float, p: float, q: float) -> LrRule:
    return LrRule("given", c, p, q, source="given in config tune: lr_c, lr_p, lr_q; not measured")


def read_rule(path: str | Path) -> LrRule:
    """A fitted rule file written by `prism isoflop tune`; one clear line when it is missing or not one."""
    path = Path(path)
    if not path.is_file():
        raise PrismError(f"lr rule {path}: no such file (the tuning stage writes it: `prism isoflop tune`)")
    try:
        data = json.loads(path.read_text())
        pairs = {k: tuple(data[k]) if data.get(k) else None for k in PAIRS}
        cov = tuple(tuple(r) for r in data["cov"]) if data.get("cov") else None
        rest = {k: v for k, v in data.items() if k not in (*PAIRS, "cov")}
        return LrRule(**rest, **pairs, cov=cov)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise PrismError(f"lr rule {path}: not a rule file ({err}); write it again with `prism isoflop tune`") from None
