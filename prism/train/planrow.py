"""A plan row checked before a training job is made from it: every bad value named with its row.

A hand-edited `plan.yaml` row with an unknown backbone or a non-numeric `steps`
used to be ignored without a word (or to fail later in a traceback); the workflow
checks every row when it reads the plan, and the message names the file, the row
and the key. Pure Python (no torch).
"""

from __future__ import annotations

import math
from typing import Any

from prism.errors import PrismError
from prism.families import FAMILIES
from prism.model.config import REGIMES, is_backbone, projector_variant

NAMES = ("family", "backbone", "variant", "regime")
POSITIVE_NUMBERS = ("budget",)
POSITIVE_INTS = ("global_batch", "steps")


def check_row(row: Any, index: int, source: str = "plan.yaml") -> dict[str, Any]:
    """`row` when it is a valid planned run; a PrismError naming `source`, the row and the key otherwise."""
    if not isinstance(row, dict):
        raise PrismError(f"{source}: runs[{index}] is not a mapping of run settings: {row!r}")
    where = f"{source}: runs[{index}] ({row.get('run_id', 'no run_id')})"
    if not isinstance(row.get("run_id"), str) or not row["run_id"]:
        raise PrismError(f"{where}: no run_id")
    registries = {"family": FAMILIES, "regime": REGIMES}
    for key in ("family", "regime"):
        if row.get(key) not in registries[key]:
            raise PrismError(f"{where}: {key} {row.get(key)!r} is not one of {', '.join(registries[key])}")
    if not isinstance(row.get("backbone"), str) or not is_backbone(row["backbone"]):
        raise PrismError(
            f"{where}: backbone {row.get('backbone')!r} is neither a registry backbone "
            "(`prism model list`) nor a rule size (e.g. n32e3)"
        )
    try:
        projector_variant(str(row.get("variant")))
    except PrismError as err:
        raise PrismError(f"{where}: {err}") from None
    for key in POSITIVE_NUMBERS + POSITIVE_INTS:
        if key not in row:
            continue
        value = row[key]
        number = _number(value)
        if number is None or number <= 0 or (key in POSITIVE_INTS and not float(number).is_integer()):
            kind = "a positive integer" if key in POSITIVE_INTS else "a positive number"
            raise PrismError(f"{where}: {key} must be {kind}, got {value!r}")
    return row


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None
