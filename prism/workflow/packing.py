"""Packs: runs that need one device go many to a node, as one scheduler job each pack.

A node has `slots` devices (cluster.ranks_per_node: 12 tiles on Aurora). A run placed on one
device shares its node with others: a pack is one scheduler job of one node whose runs each hold
one slot at a time (prism.launch.slots pins them), at most `slots` running at once. A wsd
trajectory (its segments one after another, then its branches) is one unit of a pack: it runs
inside one job, its parts in series. Units that need several devices or nodes are packs of their
own (one job each, as before).

A pack's walltime is what its units need in series over its slots (longest processing time
first, each unit on the least-loaded slot) times the safety factor; the fewest packs whose
walltimes all fit the queue's limit are made, so a study that a queue cannot hold in one job is
split into more. Pure functions on plain records: no scheduler is asked anything.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Unit:
    """What must run inside one job in series: one run, or a wsd trajectory's segments and branches.

    `jobs`: the Snakemake jobs' keys (their run id or segment id); `seconds`: the estimate on its
    devices (None: unknown); `devices`: the devices it trains on (1: packable); `nodes`: its job's nodes.
    """

    key: str
    jobs: tuple[str, ...]
    seconds: float | None
    devices: int = 1
    nodes: int = 1


@dataclass
class Pack:
    """One scheduler job: its units, nodes, slots and the seconds its busiest slot needs."""

    name: str
    units: list[Unit] = field(default_factory=list)
    nodes: int = 1
    slots: int = 1
    seconds: float | None = 0.0

    @property
    def jobs(self) -> list[str]:
        return [job for unit in self.units for job in unit.jobs]


def packable(unit: Unit) -> bool:
    return unit.devices == 1 and unit.nodes == 1


def lpt(units: list[Unit], bins: int) -> list[list[Unit]]:
    """Longest processing time first: each unit (unknown estimates last) onto the least-loaded of `bins`."""
    heap = [(0.0, i) for i in range(bins)]
    out: list[list[Unit]] = [[] for _ in range(bins)]
    for unit in sorted(units, key=lambda u: -(u.seconds or 0.0)):
        load, i = heapq.heappop(heap)
        out[i].append(unit)
        heapq.heappush(heap, (load + (unit.seconds or 0.0), i))
    return out


def slot_seconds(units: list[Unit], slots: int) -> float | None:
    """Seconds the busiest of `slots` slots needs for `units` (LPT); None when an estimate is unknown."""
    if any(u.seconds is None for u in units):
        return None
    return max((sum(u.seconds for u in slot) for slot in lpt(units, slots)), default=0.0)


def split(units: list[Unit], slots: int, limit_s: float | None) -> list[list[Unit]]:
    """The fewest groups of `units` whose busiest slot needs at most `limit_s` seconds (None: one group).

    The units are dealt longest first over the groups' slots together (LPT over groups x slots), so the
    groups come out about equally long. Units longer than the limit share groups of their own, `slots` a
    group (each asks for the most walltime and resumes from its checkpoint when resubmitted).
    """
    if not units:
        return []
    known = [u.seconds for u in units if u.seconds is not None]
    if limit_s is None or len(known) < len(units):
        return [units]
    over = sorted((u for u in units if u.seconds > limit_s), key=lambda u: -u.seconds)
    rest = [u for u in units if u.seconds <= limit_s]
    groups = [over[i : i + slots] for i in range(0, len(over), slots)]
    n = max(1, math.ceil(sum(u.seconds for u in rest) / (slots * limit_s))) if rest else 0
    while rest:
        slot_lists = lpt(rest, n * slots)
        candidate = [[u for s in slot_lists[i * slots : (i + 1) * slots] for u in s] for i in range(n)]
        if all(max(sum(u.seconds for u in s) for s in slot_lists[i * slots : (i + 1) * slots]) <= limit_s
               for i in range(n)):  # fmt: skip
            groups += [g for g in candidate if g]
            break
        n += 1
    return groups


def make_packs(units: list[Unit], slots: int, limit_s: float | None, prefix: str = "pack") -> list[Pack]:
    """Packs of the one-device units (`slots` a node, each within `limit_s` of busiest-slot seconds) and one
    pack for each unit that needs more. Names are `prefix` and a number, in a stable order."""
    one = sorted((u for u in units if packable(u)), key=lambda u: u.key)
    packs = [
        Pack(name="", units=group, nodes=1, slots=slots, seconds=slot_seconds(group, slots))
        for group in split(one, slots, limit_s)
    ]
    packs += [
        Pack(name="", units=[u], nodes=u.nodes, slots=u.devices, seconds=u.seconds)
        for u in sorted(units, key=lambda u: u.key)
        if not packable(u)
    ]
    for i, pack in enumerate(packs):
        pack.name = f"{prefix}{i}"
    return packs


def summary(runs: int, packs: list[Pack]) -> str:
    """The plan's "R runs in J jobs on K nodes" (K: the nodes of all jobs together)."""
    return f"{runs} runs in {len(packs)} jobs on {sum(p.nodes for p in packs)} nodes"
