"""Loss spikes that a run survived: flagged, so nobody trusts the point without looking.

The collapse detector stops a run whose training loss stays blown up; a run whose
evaluation loss jumped and came back (5.5 -> 45.6 -> 3.4 at a too-high learning
rate) still ends `ok`, and its final loss may sit off the curve. `eval_warnings`
reads the run's evaluations in step order and names every evaluation whose loss
rose more than `SPIKE_RISE` (relative) above the lowest loss seen before it; the
run's metrics.json carries the result as `warnings` (a list of strings, empty when
the run was smooth) and the fit report shows it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

# An eval loss more than 50% above the best one before it: far beyond the evaluation's noise
# (a fixed held-out subset, so consecutive evaluations differ by the model only).
SPIKE_RISE = 0.5


def eval_warnings(rows: Iterable[dict[str, Any]], rise: float = SPIKE_RISE) -> list[str]:
    """One warning per loss spike in `rows` (eval.jsonl rows with `step` and `loss`)."""
    points = sorted(
        (int(r["step"]), _float(r.get("loss")))
        for r in rows
        if isinstance(r.get("step"), int) and _float(r.get("loss")) is not None
    )
    warnings: list[str] = []
    best: tuple[int, float] | None = None
    in_spike = False
    for step, loss in points:
        if best is not None and loss > best[1] * (1.0 + rise) and best[1] > 0:
            if not in_spike:
                warnings.append(
                    f"eval loss spike at step {step}: {loss:.4g} is {loss / best[1]:.2f}x the "
                    f"minimum {best[1]:.4g} (step {best[0]}) before it"
                )
            in_spike = True
            continue
        in_spike = False
        if best is None or loss < best[1]:
            best = (step, loss)
    return warnings


def _float(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None
