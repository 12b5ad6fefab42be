"""How the plan prices a run: its node-hours (`Cost`), the plan's totals, and what the probe's record
(`prism cluster probe`, prism/launch/probe.py) changes in them.

Node-hours come from the calibration's measured speed of one rank where a node's ranks are known,
else from a stated node throughput (the vendor's peak x an assumed MFU).

The speed jobs time one rank on synthetic batches: no loader, no collectives between a node's
ranks, their own batch. The probe ran the real job body for the study's largest size that fits a
node and, in a packed study, a pack's one-tile runs of its smallest and largest one-tile sizes at
their planned micro-batches with the streamed loader: each measured size's samples/s per rank over
its speed job's is what the loader, the micro-batch, the neighbours on the node and the collectives
leave of the timed speed. Each size's speed is scaled by the factor of the measured size nearest to
it in FLOPs per sample (a pack's measurement where a size has both), and the plan says which size
priced which. Without speed jobs the probe's FLOP/s per node replaces the assumed MFU of the
vendor's peak. Until the probe has run, the plan says that its node-hours leave both out. Pure
functions on plain records.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from prism.core.errors import PrismError
from prism.isoflop.design.candidates import INTERPOLATED, Candidate
from prism.isoflop.design.planoptions import PlanOptions
from prism.isoflop.records import PlanRow

# By measured size: (its FLOPs per sample, the probe's rate over its speed job's, the body that measured it).
Factors = dict[str, tuple[float, float, str]]

NOT_PROBED = "the loader, the collectives and start-up assumed away (no probe record yet: snakemake probe_FAMILY)"


@dataclass(frozen=True)
class Cost:
    """How the plan turns a run into cluster node-hours: the speed the calibration measured on one rank
    of a node (`ranks_per_node` of them; what a cluster study's timed steps are), else a stated node
    throughput (the peak x an assumed MFU)."""

    node_flops: float | None = None  # sustained FLOP/s of one cluster node (peak x MFU), assumed
    node_source: str = ""
    ranks_per_node: int | None = None  # measured samples/s are one rank's of a node's this many
    node_peak_flops: float | None = None  # what a measured speed's MFU is of
    # Which peak that is: the vendor's figure (plan.node_peak_flops) until the probe measured one (prism.runtime.peak).
    peak_label: str = "the vendor's node peak plan.node_peak_flops"
    # The probe's samples/s per rank over the speed job's, by measured size (`Factors`).
    factors: Factors = field(default_factory=dict)
    probe_note: str = ""

    @classmethod
    def from_options(cls, options: PlanOptions, ranks_per_node: int | None = None) -> Cost:
        if options.node_peak_flops is None:
            return cls(ranks_per_node=ranks_per_node)
        return cls(
            options.node_peak_flops * options.mfu,
            f"estimate: assumed MFU {options.mfu:g} (plan.mfu, not measured) x the vendor's node peak "
            f"{options.node_peak_flops:.3g} FLOP/s (plan.node_peak_flops)",
            ranks_per_node,
            options.node_peak_flops,
        )

    def measured(self, speed_sources: list[str]) -> bool:
        """Whether node-hours come from measured speeds (ranks known and some size timed)."""
        return bool(self.ranks_per_node and speed_sources)

    def measured_source(self, runs: list[PlanRow], speed_sources: list[str], interpolated: list[str]) -> str:
        """The label of node-hours from measured speeds, with the MFU they imply of the stated node peak."""
        text = (
            f"measured: samples/s of one rank (`prism isoflop calibrate --measure-throughput` on "
            f"{', '.join(speed_sources)}) x {self.ranks_per_node} ranks a node (cluster.ranks_per_node); "
            "the steps alone: start-up, evaluations and the collectives between ranks not counted"
        )
        if self.node_peak_flops:
            mfus = [r.flops / (r.node_hours * 3600.0) / self.node_peak_flops for r in runs if r.node_hours]
            if mfus:
                text += f"; MFU {min(mfus):.2f}-{max(mfus):.2f} of {self.peak_label} {self.node_peak_flops:.3g}"
        if interpolated:
            text += f"; the speed of {', '.join(interpolated)} {INTERPOLATED}"
        return text + (f"; {self.probe_note}" if self.probe_note else "")

    def assumed_source(self) -> str:
        """The label of node-hours without measured speeds (with the probe's word, where there is one)."""
        text = self.node_source or "not estimated (set plan.node_peak_flops, and plan.mfu)"
        return text + (f"; {self.probe_note}" if self.probe_note and self.node_source else "")

    def nearest(self, cand: Candidate) -> str | None:
        """The measured size nearest to `cand` in FLOPs per sample (log scale), None before the probe."""
        if not self.factors:
            return None
        return min(self.factors, key=lambda b: abs(math.log(self.factors[b][0] / cand.flops_per_sample)))

    def factor(self, cand: Candidate) -> float:
        """What the probe's nearest measured size leaves of `cand`'s timed speed (1 before the probe)."""
        nearest = self.nearest(cand)
        return 1.0 if nearest is None else self.factors[nearest][1]

    def node_hours(self, cand: Candidate, samples: int, flops: float) -> float | None:
        """A run's node-hours: at its measured (or interpolated) speed where the ranks are known, else
        at the assumed node throughput; None when neither is."""
        if self.ranks_per_node and cand.samples_per_s:
            return samples / (cand.samples_per_s * self.factor(cand) * self.ranks_per_node) / 3600.0
        return flops / self.node_flops / 3600.0 if self.node_flops else None


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


def probe_rates(record: dict) -> dict[str, tuple[float, str]]:
    """The probe's measured samples/s per rank by size, with the body that measured it: the node's body of
    its size (compiled where it chose compiling), then a pack's one-tile runs, which stand for their size
    where both measured one (the grid trains that size as a pack's run)."""
    rates = {}
    measured = probe_body(record).get("samples_per_s_per_rank")
    if measured:
        ranks = record.get("ranks_per_node")
        rates[record["backbone"]] = (measured, f"{ranks}-rank node body" if ranks else "node body")
    for backbone, body in (record.get("packed") or {}).items():
        if body.get("samples_per_s_per_rank"):
            micro = body.get("micro_batch")
            rates[backbone] = (body["samples_per_s_per_rank"], f"packed one-tile run, micro-batch {micro}")
    return rates


def probe_factors(record: dict, candidates: list[Candidate]) -> Factors:
    """By measured size: (its FLOPs per sample, the probe's samples/s per rank over its speed job's, the
    body that measured it), for the sizes with both a probe rate and a timed (not interpolated) speed."""
    timed = {c.backbone: c for c in candidates if c.samples_per_s and not c.speed_interpolated}
    return {
        b: (timed[b].flops_per_sample, rate / timed[b].samples_per_s, body)
        for b, (rate, body) in probe_rates(record).items()
        if b in timed
    }


def factor_note(cost: Cost, candidates: list[Candidate], where: str) -> str:
    """Which measured size priced which sizes, and by what factor."""
    factors = cost.factors
    priced_by: dict[str, list[str]] = {b: [] for b in factors}
    for cand in candidates:
        nearest = cost.nearest(cand)
        if nearest is not None and cand.backbone not in priced_by[nearest]:
            priced_by[nearest].append(cand.backbone)
    parts = [
        f"x {factors[b][1]:.2f} for {', '.join(sizes)} (nearest measured: {b}'s {factors[b][2]})"
        for b, sizes in priced_by.items()
        if sizes
    ]
    return f"the loader, micro-batch and collectives of the real job body, by {where}: " + "; ".join(parts)


def measured_peak(cost: Cost, record: dict) -> Cost:
    """`cost` whose MFU is quoted of the node peak the probe measured (prism.runtime.peak on a compute node's rank x
    its ranks), where it measured one: one denominator for the plan and the runs' own MFU."""
    peak = record.get("peak_flops_per_rank")
    if not peak or not cost.ranks_per_node:
        return cost
    return replace(
        cost,
        node_peak_flops=peak * cost.ranks_per_node,
        peak_label=f"the measured node peak ({cost.ranks_per_node} x `prism bench peak`'s "
        f"{record.get('peak_key', '')})",
    )


def priced(cost: Cost, path: str | Path | None, candidates: list[Candidate]) -> Cost:
    """`cost` with the probe's record applied, and its label saying so."""
    if path is None:
        return cost
    record = read_probe(path)
    if record is None:
        return replace(cost, probe_note=NOT_PROBED)
    where = f"the probe ({path}, {record.get('measured_at', 'undated')})"
    cost = measured_peak(cost, record)
    factors = probe_factors(record, candidates)
    if factors:
        cost = replace(cost, factors=factors)
        return replace(cost, probe_note=factor_note(cost, candidates, where))
    fps = next((c.flops_per_sample for c in candidates if c.backbone == record["backbone"]), None)
    rate = probe_body(record).get("samples_per_s_per_rank")
    if fps and rate and cost.ranks_per_node:
        node_flops = fps * rate * cost.ranks_per_node
        note = f"measured: {record['backbone']}'s FLOP/s a node in its real job body, by {where}"
        return replace(cost, node_flops=node_flops, node_source=note, probe_note="")
    return replace(cost, probe_note=f"{where} measured no speed of {record['backbone']}")


def _total(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(values)


def cost_summary(runs: list[PlanRow], cost: Cost, speed_sources: list[str], interpolated: list[str] = ()) -> dict:
    """Totals of the estimated wall time here and node-hours on the cluster, each with its source."""
    guessed = sorted({r.backbone for r in runs if r.backbone in set(interpolated)}, key=list(interpolated).index)
    source = (
        "estimate of the training steps alone (start-up and evaluations not included): samples/s "
        "measured by `prism isoflop calibrate --measure-throughput` on " + ", ".join(speed_sources)
        if speed_sources
        else "not measured (no calibration/*.speed.json; config calibrate.measure_throughput)"
    )
    if guessed:
        source += f"; {len(guessed)} size(s) not measured yet, their speed {INTERPOLATED}: {', '.join(guessed)}"
    return {
        "hours_here_total": _total([r.hours_here for r in runs]),
        "hours_here_source": source,
        "hours_here_interpolated": guessed,
        "node_hours_total": _total([r.node_hours for r in runs]),
        "node_hours_source": (
            cost.measured_source(runs, speed_sources, guessed)
            if cost.measured(speed_sources)
            else cost.assumed_source()
        ),
    }
