"""Packs (cluster.pack): a study's one-device training jobs many to a node, one Snakemake group and one
scheduler job each, with the node, queue, walltime and device pinning the group's jobs share.

The pack half of `prism.workflow.jobs.JobSchedule`: its attributes (`study`, `plan`, `engine`, the
cache `_packs`) and `units` are the schedule's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from prism.workflow import probe, resources
from prism.workflow.engine import pending_or
from prism.workflow.packing import Pack, Unit, make_packs, packable, widths
from prism.workflow.planfile import Rows

PackOf = Callable[[Any], Pack]  # a training job's wildcards -> its pack


class Packs:
    """Which pack each training job is in, and the resources of a packed job."""

    @property
    def packing(self) -> bool:
        return bool(self.study.cluster.get("pack"))

    def packs_by_job(self, family: str, rows: Rows | None = None) -> dict[str, Pack]:
        """{job key: its pack} of the family's plan (computed once per plan)."""
        rows = self.plan.rows(family) if rows is None else rows
        cached = self._packs.get(family)
        if cached is None or cached[0] is not rows:
            cluster = self.study.cluster
            units = [replace(u, widths=self.widths(rows, u)) for u in self.units(rows, probe.pack_startup(
                self.study, family)[1])]  # fmt: skip
            efficiency = probe.pack_efficiency(self.study, family)[0] if self.spreading else None
            packs = make_packs(units, int(cluster["ranks_per_node"]), resources.pack_limit_s(cluster),
                               prefix=f"{family}-pack", efficiency=efficiency)  # fmt: skip
            cached = (rows, {job: pack for pack in packs for job in pack.jobs})
            self._packs[family] = cached
        return cached[1]

    @property
    def spreading(self) -> bool:
        """Whether a pack's long units may spread over several of its devices (prism.workflow.probe.spreads)."""
        return probe.spreads(self.study)

    def widths(self, rows: Rows, unit: Unit) -> tuple[int, ...]:
        """The device counts `unit` may spread over: those that keep every run of it at its batch and micro-batch."""
        if not self.spreading or not packable(unit):
            return (1,)
        most = min(int(self.study.cluster["pack_spread"]), int(self.study.cluster["ranks_per_node"]))
        runs = [rows[job] for job in unit.jobs if job in rows]
        counts = [set(widths(int(r.global_batch), int(r.accum_steps or 1), most)) for r in runs]
        return tuple(sorted(set.intersection(*counts))) if counts else (1,)

    def job_key(self, wildcards: Any) -> str:
        """A training job's key in its pack: its run id, or a wsd segment's `TRAJ/to-END`."""
        if getattr(wildcards, "traj", None):
            return f"{wildcards.traj}/to-{int(wildcards.end):08d}"
        return wildcards.run_id

    def pack_of(self, wildcards: Any) -> Pack:
        return self.packs_by_job(wildcards.family)[self.job_key(wildcards)]

    def group(self, pack_of: PackOf | None = None) -> Callable[[Any], str | None] | None:
        """The training rules' `group:` (None without cluster.pack): a job's pack (`pack_of`, the grid's by
        default), one scheduler job."""
        if not self.packing:
            return None
        pack_of = pack_of or self.pack_of

        def group(wildcards: Any) -> str | None:
            self.engine.check_groups_run_at_once()
            name = pending_or(None, lambda: pack_of(wildcards).name)
            if name is not None:
                self.engine.group_parent(name, resources.PACK_GROUP)
            return name

        return group

    def pack_resources(self, retrain: Callable[[Any], str], pack_of: PackOf | None = None) -> dict[str, Any]:
        """A packed job's resources: its pack's node, queue and walltime (the same text for every job of a
        pack, as Snakemake requires of a group), one rank pinned to a free slot when it needs one device.
        `pack_of`: the job's pack, the grid's by default (the lr sweep's jobs are in packs of their own)."""
        pack_of = pack_of or self.pack_of

        def request(wildcards: Any) -> tuple[str, int]:
            once_s = probe.pack_startup(self.study, wildcards.family)[0]
            cap = self.study.cluster["queue"], resources.walltime_seconds(self.study.cluster["walltime"])
            return pending_or(cap, lambda: resources.pack_request(self.study.cluster, pack_of(wildcards), once_s))

        def shared(wildcards: Any) -> bool:
            return pending_or(True, lambda: pack_of(wildcards).shared)

        def devices(wildcards: Any) -> int:
            """The devices of its pack the job runs on: 1 unless its unit spreads."""
            return pending_or(1, lambda: pack_of(wildcards).devices_of(self.job_key(wildcards)))

        def spreads(wildcards: Any) -> bool:
            """Whether the job's pack holds a unit spread over several devices."""
            return pending_or(False, lambda: any(u.devices > 1 for u in pack_of(wildcards).units))

        slots, device, strategy = (
            int(self.study.cluster["ranks_per_node"]),
            self.study.train.device,
            self.study.train.strategy,
        )
        return {
            "nodes": lambda w: "1" if shared(w) else str(pack_of(w).nodes),
            # a run of a pack: one rank on each device it holds
            "procs_per_node": lambda w: devices(w) if shared(w) else self.study.ranks_per_node,
            "walltime": lambda w: resources.walltime_text(request(w)[1]),
            "runtime": lambda w: -(-request(w)[1] // 60),
            "queue": lambda w: request(w)[0],
            # the devices a job claims are its ranks (PRISM_SLOT_DEVICES, rules/training.smk): Snakemake wants the
            # text resources of a group's jobs equal
            "pin": lambda w: resources.pin_prefix(slots, device) if shared(w) else "",
            # a pack of one-rank runs: nothing to shard or replicate; with spread runs the study's strategy
            # (a one-rank body trains unwrapped whatever it says: prism.launch.aurora)
            "strategy": lambda w: strategy if not shared(w) or spreads(w) else "none",
            "retrain": lambda w: int(retrain(w)),
        }
