"""Collapse detection: stop a run whose loss or gradients went bad, and say why.

A collapsed run must never look finished-and-fine: the loop asks `check` after every
step and ends the run with `status: collapsed`, the reason and the step.

- a non-finite loss or gradient norm: at once;
- a loss spike: after warm-up, the loss above `spike_factor` x the running median
  of the last `window` losses for `patience` steps in a row (one noisy batch is not
  a collapse; a diverging run stays up);
- a collapsed gradient norm (the "intermittent backward collapse" seen on the
  cluster: gradients silently ~0 while the loss freezes): the norm below
  `grad_floor` x its running median, or exactly 0, for `patience` steps in a row.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field


@dataclass
class CollapseDetector:
    warmup: int = 0
    spike_factor: float = 3.0
    grad_floor: float = 1e-3
    window: int = 50
    patience: int = 3
    min_history: int = 10
    losses: deque = field(default_factory=deque)
    grad_norms: deque = field(default_factory=deque)
    spike_run: int = 0
    grad_run: int = 0

    def check(self, step: int, loss: float, grad_norm: float | None) -> str | None:
        """The reason the run collapsed at `step`, or None if it looks healthy."""
        if not math.isfinite(loss):
            return f"non-finite training loss ({loss})"
        if grad_norm is not None and not math.isfinite(grad_norm):
            return f"non-finite gradient norm ({grad_norm})"
        reason = None
        if step >= self.warmup and len(self.losses) >= self.min_history:
            median = statistics.median(self.losses)
            self.spike_run = self.spike_run + 1 if loss > self.spike_factor * median else 0
            if self.spike_run >= self.patience:
                reason = (
                    f"loss spike: {loss:.4g} > {self.spike_factor:g} x running median "
                    f"{median:.4g} for {self.spike_run} steps"
                )
        if grad_norm is not None:
            floor = (
                self.grad_floor * statistics.median(self.grad_norms)
                if len(self.grad_norms) >= self.min_history
                else 0.0
            )
            self.grad_run = self.grad_run + 1 if grad_norm <= floor else 0
            if self.grad_run >= self.patience and reason is None:
                reason = (
                    f"gradient norm collapsed: {grad_norm:.3g} <= {floor:.3g} "
                    f"({self.grad_floor:g} x running median) for {self.grad_run} steps"
                )
            self.grad_norms.append(grad_norm)
            if len(self.grad_norms) > self.window:
                self.grad_norms.popleft()
        self.losses.append(loss)
        if len(self.losses) > self.window:
            self.losses.popleft()
        return reason

    def state_dict(self) -> dict:
        return {
            "losses": list(self.losses),
            "grad_norms": list(self.grad_norms),
            "spike_run": self.spike_run,
            "grad_run": self.grad_run,
        }

    def load_state_dict(self, state: dict) -> None:
        self.losses = deque(state["losses"])
        self.grad_norms = deque(state["grad_norms"])
        self.spike_run, self.grad_run = state["spike_run"], state["grad_run"]
