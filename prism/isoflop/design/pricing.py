"""What the probe's record (`prism cluster probe`, prism/launch/probe.py) changes in a plan's price.

The speed jobs time one rank on synthetic batches: no loader, no collectives between a node's
ranks. The probe ran the real job body for the study's largest size, so its samples/s per rank
over the speed job's of the same size is what the loader and the collectives leave of the timed
speed; the plan multiplies every size's speed by it. Without speed jobs the probe's FLOP/s per
node replaces the assumed MFU of the vendor's peak. Until the probe has run, the plan says that
its node-hours leave both out. Pure functions on plain records.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from prism.errors import PrismError

NOT_PROBED = "the loader, the collectives and start-up assumed away (no probe record yet: snakemake probe_FAMILY)"


def read_probe(path: str | Path | None) -> dict | None:
    """The probe's record, or None where there is none (yet)."""
    if not path or not Path(path).is_file():
        return None
    try:
        record = json.loads(Path(path).read_text())
    except ValueError as err:
        raise PrismError(f"{path}: not a probe record ({err}); delete it and run the probe again") from None
    return record


def probe_body(record: dict) -> dict:
    """The measured body the study's jobs run as: compiled where the probe chose compiling, else eager."""
    return record["compiled" if record.get("compile") == "static" else "eager"]


def probe_factor(record: dict, speeds: dict[str, float]) -> float | None:
    """The probe's samples/s per rank over the speed job's for the same size (None without both)."""
    measured = probe_body(record).get("samples_per_s_per_rank")
    timed = speeds.get(record["backbone"])
    return measured / timed if measured and timed else None


def measured_peak(cost: Any, record: dict) -> Any:
    """`cost` whose MFU is quoted of the node peak the probe measured (prism.peak on a compute node's rank x
    its ranks), where it measured one: one denominator for the plan and the runs' own MFU."""
    peak = record.get("peak_flops_per_rank")
    if not peak or not cost.ranks_per_node:
        return cost
    return replace(
        cost,
        node_peak_flops=peak * cost.ranks_per_node,
        peak_label=f"the measured node peak ({cost.ranks_per_node} x prism.peak's {record.get('peak_key', '')})",
    )


def priced(cost: Any, path: str | Path | None, candidates: list) -> Any:
    """`cost` (prism.isoflop.design.plan.Cost) with the probe's record applied, and its label saying so."""
    if path is None:
        return cost
    record = read_probe(path)
    if record is None:
        return replace(cost, probe_note=NOT_PROBED)
    speeds = {c.backbone: c.samples_per_s for c in candidates if c.samples_per_s and not c.speed_interpolated}
    where = f"the probe ({path}, {record.get('measured_at', 'undated')})"
    cost = measured_peak(cost, record)
    factor = probe_factor(record, speeds)
    if factor is not None:
        note = f"x {factor:.2f}: the loader and the collectives of {record['backbone']}'s real job body, by {where}"
        return replace(cost, factor=factor, probe_note=note)
    fps = next((c.flops_per_sample for c in candidates if c.backbone == record["backbone"]), None)
    rate = probe_body(record).get("samples_per_s_per_rank")
    if fps and rate and cost.ranks_per_node:
        node_flops = fps * rate * cost.ranks_per_node
        note = f"measured: {record['backbone']}'s FLOP/s a node in its real job body, by {where}"
        return replace(cost, node_flops=node_flops, node_source=note, probe_note="")
    return replace(cost, probe_note=f"{where} measured no speed of {record['backbone']}")
