"""Names every stage agrees on: how a budget is spelled and what a run is called.

A run id names a run directory, a Snakemake wildcard, a plan row and a PBS job, so
the plan, the trainer, the workflow and collect must all spell it the same way;
they all build it here, and every reader takes one apart here. Pure Python (no torch, no numpy).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from prism.core.errors import PrismError

RUN_ID_RE = re.compile(r"^[0-9a-z]+-[A-Z0-9]+-[a-z0-9_]+-C[0-9.]+e[0-9]+$")


def format_budget(budget: float) -> str:
    """A budget as in run ids and file names: `3e11`, `1e12`, `2.5e17` (no `+`, no padding)."""
    if not (budget > 0 and math.isfinite(budget)):
        raise ValueError(f"budget must be a positive finite number, got {budget!r}")
    mantissa, exponent = f"{budget:.6e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def run_id(backbone: str, variant: str, regime: str, budget: float) -> str:
    """`{backbone}-{variant}-{regime}-C{budget}`, checked against RUN_ID_RE."""
    rid = f"{backbone}-{variant}-{regime}-C{format_budget(budget)}"
    if not RUN_ID_RE.match(rid):
        raise PrismError(f"run id {rid!r} does not match {RUN_ID_RE.pattern}; check the backbone/variant names")
    return rid


# A run id taken apart: each part a group, the budget as the id spells it.
_RUN_ID_PARTS = re.compile(
    r"^(?P<backbone>[0-9a-z]+)-(?P<variant>[A-Z0-9]+)-(?P<regime>[a-z0-9_]+)-C(?P<budget>[0-9.]+e[0-9]+)$"
)


@dataclass(frozen=True)
class RunId:
    """A run id's parts: what the plan made it from, so no reader splits the string itself."""

    backbone: str
    variant: str
    regime: str
    budget: str  # as spelled in the id (`3e11`); `flops` is its value

    @property
    def flops(self) -> float:
        return float(self.budget)

    @property
    def stem(self) -> str:
        """The id without its budget: one model of the study, the same at every budget (`n32e3-BASE-e2e`)."""
        return f"{self.backbone}-{self.variant}-{self.regime}"

    def __str__(self) -> str:
        return f"{self.stem}-C{self.budget}"


def parse_run_id(rid: str) -> RunId:
    """The parts of a run id `run_id` built, or PrismError naming the pattern it misses."""
    match = _RUN_ID_PARTS.match(rid)
    if not match:
        raise PrismError(f"{rid!r} is not a run id ({RUN_ID_RE.pattern})")
    return RunId(**match.groupdict())


def id_backbone(rid: str) -> str:
    """The backbone a run id or a wsd trajectory's id (`n32e3-BASE-e2e-B48`) starts with: the part before its
    first `-`, asking no pattern, since a runs table given to the fit may hold ids the planner did not make."""
    return rid.split("-", 1)[0]


def split_budget(rid: str) -> tuple[str, str] | None:
    """(stem, budget) of any id that ends in `-C{budget}`, None for one that does not.

    Lenient where `parse_run_id` is strict: a runs table given to the fit may come from elsewhere, with ids
    the planner did not make.
    """
    stem, sep, budget = rid.rpartition("-C")
    return (stem, budget) if sep else None
