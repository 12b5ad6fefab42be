"""The tuning stage's jobs (rules/tune.smk): a short peak-lr sweep at a few widths, then the fitted rule.

Each sweep run is an ordinary training job (the same `prism train` flags and resources as the
grid's runs, so it runs on the cluster profile like them), of `tune.steps` steps (the smallest
widths' also of `tune.long_steps`) at the study's smallest budget's run id, in
STUDY/FAMILY/tune/sSTEPS/RUN_ID/lrLR/. Which widths and lrs: prism.isoflop.design.tuning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prism.core.ids import run_id
from prism.core.options import as_args
from prism.isoflop.design.tuning import FIT_FLAGS, lr_label, sweep_lrs, sweep_sizes
from prism.isoflop.runs.launch import run_flags
from prism.model.config import backbone_config
from prism.train.config import RunConfig
from prism.workflow import probe, resources
from prism.workflow.commands import training_run
from prism.workflow.engine import pending_or
from prism.workflow.jobs import JobSchedule
from prism.workflow.packing import Pack, Unit, make_packs
from prism.workflow.planfile import WorkflowPlan
from prism.workflow.study import Study


class TuneStage:
    """The sweep runs of each family and the fit of their rule."""

    def __init__(self, study: Study, plan: WorkflowPlan, schedule: JobSchedule) -> None:
        self.study, self.plan, self.schedule = study, plan, schedule

    def widths(self, family: str) -> dict[str, int]:
        """{backbone: d_model} of the plan's candidates."""
        return {b: backbone_config(b).d_model for b in self.plan.backbones(family)}

    def row(self, family: str, backbone: str) -> dict[str, Any]:
        """A sweep run's row: the backbone at the smallest budget's id, the plan's batch (32 when it chooses)."""
        study = self.study
        return {"family": family, "backbone": backbone, "variant": study.config["variants"][0],
                "regime": study.regime, "budget": float(study.budgets[0]),
                "global_batch": study.plan.global_batch or 32}  # fmt: skip

    def runs(self, family: str) -> list[tuple[dict[str, Any], float, int]]:
        """(row, lr, steps) of every sweep run: each width at `tune.steps`, the first `tune.long_sizes` also at
        `tune.long_steps` (TuneOptions.lengths)."""
        tune, widths = self.study.tune, self.widths(family)
        out = []
        for backbone, lengths in tune.lengths(sweep_sizes(widths, tune.sizes)).items():
            row = self.row(family, backbone)
            for steps, points in lengths:
                out += [(row, lr, steps) for lr in sweep_lrs(widths[backbone], points, tune.lr_step)]
        return out

    def run_dir(self, family: str, steps: str, run_id: str, lr: str) -> str:
        return self.study.tune_run_dir(family, steps, run_id, lr)

    def _dir(self, wildcards: Any) -> str:
        return self.run_dir(wildcards.family, wildcards.steps, wildcards.run_id, wildcards.lr)

    def metrics(self, wildcards: Any) -> list[str]:
        """The tune job's inputs: every sweep run's metrics.json."""
        family = wildcards.family
        return [f"{self.run_dir(family, str(steps), self._id(r), lr_label(lr)[2:])}/metrics.json"
                for r, lr, steps in self.runs(family)]  # fmt: skip

    @staticmethod
    def _id(row: dict[str, Any]) -> str:
        return run_id(row["backbone"], row["variant"], row["regime"], row["budget"])

    def _row_of(self, wildcards: Any) -> dict[str, Any]:
        return self.row(wildcards.family, resources.backbone_of(wildcards))

    def run_inputs(self, wildcards: Any) -> dict[str, str]:
        """The data and the size's calibration; on a cluster study also its speed and the probe's record, which
        price the sweep's packs (`run_seconds`): priced before them, at an assumed MFU and start-up, a pack
        could ask a fraction of its time and be killed at its walltime; and a broken job body shows in the
        probe's two short jobs, not in a node of sweep runs."""
        row, study, family = self._row_of(wildcards), self.study, wildcards.family
        keys = (family, row["backbone"], row["variant"], row["regime"])
        inputs = {"data": study.data_dir(family), "calibration": study.calibration_file(*keys)}
        if study.calibrate.measure_throughput and self.schedule.packing:
            inputs["speed"] = study.speed_file(*keys)
        if probe.probed(study):
            inputs["probe"] = probe.probe_file(study, family)
        return inputs

    def run_args(self, wildcards: Any, input: Any) -> str:
        """The sweep run's `prism train` flags."""
        return run_flags(self.sweep_run(wildcards, input))

    def sweep_run(self, wildcards: Any, input: Any) -> RunConfig:
        """The sweep run: its row at `lr`, its steps, the study's warm-up."""
        return training_run(self.study, self._row_of(wildcards), input.data, self._dir(wildcards),
                            input.calibration, lr=float(wildcards.lr), max_steps=int(wildcards.steps),
                            warmup=self.study.warmup)  # fmt: skip

    def run_body(self, wildcards: Any) -> str:
        return f"{self._dir(wildcards)}/launch.sh"

    def run_resources(self) -> dict[str, Any]:
        """A sweep run's resources: a training job's, with no estimate (the plan has none of a sweep run: its
        walltime is its backbone's cap) and, with cluster.pack, the sweep's own packs of one-device runs."""
        return self.schedule.resources(retrain=self.retrain, estimate_s=lambda wildcards: None, pack_of=self.pack_of)

    # ---- packs (cluster.pack) ------------------------------------------------------

    def run_seconds(self, family: str, row: dict[str, Any], steps: int, start_s: float) -> float | None:
        """A sweep run's seconds on one device: its samples at the plan's seconds per sample of its
        backbone on one device, plus its start-up; None where the plan has no estimate of it. The plan's rows
        as computed here (`pricing_rows`): the plan job waits for this sweep, so its plan.yaml cannot price it."""
        rows = pending_or(None, lambda: self.plan.pricing_rows(family))
        if rows is None:
            return None
        for r in (r for r in rows.values() if r.backbone == row["backbone"] and r.samples):
            seconds = self.schedule.device_seconds(r.node_hours, r.hours_here, 1)
            if seconds is not None:
                return seconds / r.samples * steps * row["global_batch"] + start_s
        return None

    def packs(self, family: str) -> dict[str, Pack]:
        """{run key: its pack} of the family's sweep, as the grid's runs are packed (longest first over a
        node's devices, split where a pack would exceed the cap)."""
        cluster, start_s = self.study.cluster, probe.pack_startup(self.study, family)[1]
        units = []
        for row, lr, steps in self.runs(family):
            key = f"s{steps}/{self._id(row)}/{lr_label(lr)}"
            units.append(Unit(key, (key,), self.run_seconds(family, row, steps, start_s)))
        packs = make_packs(units, int(cluster["ranks_per_node"]), resources.pack_limit_s(cluster), f"{family}-tune")
        return {job: pack for pack in packs for job in pack.jobs}

    def pack_of(self, wildcards: Any) -> Pack:
        return self.packs(wildcards.family)[f"s{wildcards.steps}/{wildcards.run_id}/lr{wildcards.lr}"]

    def group(self) -> Callable[[Any], str | None] | None:
        """tune_run's `group:` (None without cluster.pack): a sweep run's pack, one scheduler job."""
        return self.schedule.group(self.pack_of)

    def retrain(self, wildcards: Any) -> str:
        out = f"{self._dir(wildcards)}/metrics.json"
        return self.schedule.retrain_flag("tune_run", out)

    def fit_args(self, wildcards: Any) -> list[str]:
        """`prism isoflop tune` flags (the bootstrap's and the margin's): rerun triggers of the rule."""
        return as_args(self.study.tune, FIT_FLAGS)
