"""Names every stage agrees on: how a budget is spelled and what a run is called.

A run id names a run directory, a Snakemake wildcard, a plan row and a PBS job, so
the plan, the trainer, the workflow and collect must all spell it the same way;
they all build it here. Pure Python (no torch, no numpy).
"""

from __future__ import annotations

import math
import re

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
