"""Optimizer and learning-rate schedule, with hyperparameters that follow model width.

- AdamW, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on matrices (ndim >= 2:
  linear weights and embeddings) and none on gains and biases (nanoGPT/Llama habit).
- Peak learning rate `lr = BASE_LR * D_REF / d_model` (BASE_LR = 3e-3 at D_REF = 128):
  the muP-flavoured rule that Adam's per-coordinate update must shrink as 1/width
  for hidden matrices to keep the same change of activations. The small ladder
  (d_model 32..192) gets 1.2e-2..2e-3, which learns in a few hundred steps; the real
  sizes get 1.9e-4 (1b, d=2048) and 7.5e-5 (32b, d=5120), the usual range for them.
  `--lr` overrides it.
- Linear warm-up over `warmup` steps (default 5% of the run, at least 1), then
  `cosine`: decay to 10% of the peak at the last step; or
  `wsd` (warm-up, stable, decay): the peak until the cooldown, the last
  `cooldown_fraction` of the steps (default 0.2), which decays towards 0 with the
  (1 - sqrt) shape (`linear` available). A constant learning rate with such a
  cooldown matches cosine at every length (Hägele et al. 2024), and its stable
  part is the same whatever the run's length, so one stable trajectory can serve
  several budgets: a run that ends later branches its cooldown off later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

BASE_LR = 3e-3
D_REF = 128
BETAS = (0.9, 0.95)
EPS = 1e-8
WEIGHT_DECAY = 0.1
WARMUP_FRACTION = 0.05
FINAL_LR_FRACTION = 0.1
SCHEDULES = ("cosine", "wsd")
COOLDOWN_SHAPES = ("sqrt", "linear")
COOLDOWN_FRACTION = 0.2


def default_lr(d_model: int) -> float:
    return BASE_LR * D_REF / d_model


def default_warmup(steps: int) -> int:
    return max(1, min(steps, round(WARMUP_FRACTION * steps)))


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Multiplier of the peak lr for the update made at `step` (0-based)."""
    if step < warmup:
        return (step + 1) / warmup
    span = max(1, total - 1 - warmup)
    progress = min(1.0, (step - warmup) / span)
    return FINAL_LR_FRACTION + (1 - FINAL_LR_FRACTION) * 0.5 * (1 + math.cos(math.pi * progress))


def cooldown_steps(total: int, warmup: int, fraction: float) -> int:
    """Steps of a wsd cooldown: `fraction` of the run, at least 1, never into the warm-up."""
    return max(1, min(total - warmup, round(fraction * total)))


def wsd_factor(step: int, warmup: int, total: int, cooldown: int, shape: str = "sqrt") -> float:
    """Multiplier of the peak lr for the update made at `step` (0-based) under warm-up, stable, decay.

    The cooldown's k-th update (k = 0 .. cooldown-1) has progress k / cooldown, so the
    factor would reach 0 only after the last update: no step is spent at lr 0.
    """
    if step < warmup:
        return (step + 1) / warmup
    start = total - cooldown
    if step < start:
        return 1.0
    progress = min(1.0, (step - start) / cooldown)
    return 1.0 - (math.sqrt(progress) if shape == "sqrt" else progress)


@dataclass(frozen=True)
class Schedule:
    """The learning-rate schedule of a run: peak-lr multiplier per (0-based) update."""

    kind: str
    warmup: int
    total: int
    cooldown_fraction: float = COOLDOWN_FRACTION
    cooldown_shape: str = "sqrt"

    @property
    def cooldown(self) -> int:
        """wsd: the cooldown's steps (0 for cosine)."""
        return cooldown_steps(self.total, self.warmup, self.cooldown_fraction) if self.kind == "wsd" else 0

    @property
    def cooldown_start(self) -> int | None:
        """wsd: the step at which the cooldown starts (where a branch leaves a stable trajectory)."""
        return self.total - self.cooldown if self.kind == "wsd" else None

    def factor(self, step: int) -> float:
        if self.kind == "wsd":
            return wsd_factor(step, self.warmup, self.total, self.cooldown, self.cooldown_shape)
        return lr_factor(step, self.warmup, self.total)


# The builders import torch when called: RunConfig (and so the CLI) reads this module's names
# and must start without torch.


def build_optimizer(params: list[torch.nn.Parameter], lr: float) -> torch.optim.AdamW:
    import torch  # noqa: PLC0415 lazy: torch

    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    # fused: one kernel over all parameters (CPU, CUDA, XPU; DTensor too), faster than foreach.
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=BETAS, eps=EPS, fused=True)


def build_scheduler(optimizer: torch.optim.Optimizer, schedule: Schedule) -> torch.optim.lr_scheduler.LambdaLR:
    import torch  # noqa: PLC0415 lazy: torch

    # A lambda, not the Schedule itself: LambdaLR saves (and on load restores) the attributes of
    # callable objects, which would give a run resumed from another run's checkpoint that run's
    # schedule; the schedule is always this run's.
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: schedule.factor(step))
