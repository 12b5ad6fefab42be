"""What a fit method is: the interface Approach 2, Approach 3 and any later method sit behind.

A method takes the kept runs (`MethodInput`: their arrays, plus the grid every method shares,
Approach 2's per-budget parabolas, whose residuals measure the noise) and returns a `MethodFit`:
its estimate of a and interval, its own section of the result, the moves of a under the
choices a reader would question, and its lack-of-fit test. `judge` is its part of the verdict.
The methods are registered in prism.isoflop.fit.methods; the fit asks them there and never by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from prism.isoflop.records import RunRecord

Interval = tuple[float, float]

# `--method both`: the two approaches of Hoffmann et al., the default since the first round.
BOTH = ("approach2", "approach3")


def chosen(method: str) -> tuple[str, ...]:
    """The methods `method` (the option's value: one method's name, or "both") fits."""
    return BOTH if method == "both" else (method,)


@dataclass(frozen=True)
class MethodInput:
    """The runs a method fits and what every method shares: the grid (an `Approach2Result`: the
    per-budget parabolas the noise and the diagnostics rest on), the noise with its degrees of
    freedom, the noise the lack-of-fit tests use (`tested`), and the fit's options (`FitOptions`)."""

    records: list[RunRecord]
    n: np.ndarray
    d: np.ndarray
    loss: np.ndarray
    budget: np.ndarray
    grid: Any
    sigma: float
    dof: int
    within_dof: int
    tested: tuple[float, int]
    options: Any


@dataclass(frozen=True)
class MethodFit:
    """One method's answer: a and its interval (None when it gave none, `reason` says why).

    `section` names the FitResult field the method's `summary` fills (the two approaches' own
    sections, whose JSON keys older readers know); without one, the result lists the method
    under `methods`. `parts` are what the prediction model takes from it (keyword arguments of
    `backtest.prediction_model`)."""

    name: str
    a: float | None
    a_ci: Interval | None
    interval_method: str = ""
    reason: str = ""
    summary: Any = None
    section: str | None = None
    moves: list = field(default_factory=list)
    goodness: Any = None
    parts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Judged:
    """A method's part of the verdict: its failures, its evidence, and the interval it offers with its source."""

    failures: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    interval: Interval | None = None
    source: str = ""


@runtime_checkable
class FitMethod(Protocol):
    """A fit method. `grid_bootstrap`: it reads the grid's within-budget bootstrap (drawn only then)."""

    name: str
    label: str
    grid_bootstrap: bool

    def fit(self, data: MethodInput) -> MethodFit: ...

    def judge(self, fit: MethodFit, good: list[str], n_runs: int) -> Judged: ...


def interval_judged(label: str, fit: MethodFit) -> Judged:
    """The plain rule for a method with no rule of its own: its interval, or the failure that it gave none."""
    if fit.a_ci is None:
        return Judged(failures=[f"{label} gave no interval of a" + (f": {fit.reason}" if fit.reason else "")])
    return Judged(interval=fit.a_ci, source=f"{label}: {fit.interval_method or 'its interval'}")
