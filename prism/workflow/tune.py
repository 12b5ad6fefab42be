"""The tuning stage's jobs (rules/tune.smk): a short peak-lr sweep at a few widths, then the fitted rule.

Each sweep run is an ordinary training job (the same `prism train` flags and resources as the
grid's runs, so it runs on the cluster profile like them), of `tune.steps` steps at the study's
smallest budget's run id, in STUDY/FAMILY/tune/RUN_ID/lrLR/. Which widths and lrs:
prism.isoflop.design.tuning.
"""

from __future__ import annotations

from typing import Any

from prism.ids import run_id
from prism.isoflop.design.tuning import lr_label, sweep_lrs, sweep_sizes
from prism.model.config import backbone_config
from prism.workflow import resources
from prism.workflow.commands import training_command
from prism.workflow.plan import StudyPlan
from prism.workflow.schedule import Schedule
from prism.workflow.study import Study


class TuneStage:
    """The sweep runs of each family and the fit of their rule."""

    def __init__(self, study: Study, plan: StudyPlan, schedule: Schedule) -> None:
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

    def runs(self, family: str) -> list[tuple[dict[str, Any], float]]:
        """(row, lr) of every sweep run."""
        tune, widths = self.study.tune, self.widths(family)
        out = []
        for backbone in sweep_sizes(widths, tune.sizes):
            row = self.row(family, backbone)
            out += [(row, lr) for lr in sweep_lrs(widths[backbone], tune.lr_points, tune.lr_step)]
        return out

    def run_dir(self, family: str, run_id: str, lr: str) -> str:
        return f"{self.study.tune_dir(family)}/{run_id}/lr{lr}"

    def metrics(self, wildcards: Any) -> list[str]:
        """The tune job's inputs: every sweep run's metrics.json."""
        family, tune_dir = wildcards.family, self.study.tune_dir(wildcards.family)
        ids = [(run_id(r["backbone"], r["variant"], r["regime"], r["budget"]), lr) for r, lr in self.runs(family)]
        return [f"{tune_dir}/{rid}/{lr_label(lr)}/metrics.json" for rid, lr in ids]

    def _row_of(self, wildcards: Any) -> dict[str, Any]:
        return self.row(wildcards.family, resources.backbone_of(wildcards))

    def run_inputs(self, wildcards: Any) -> dict[str, str]:
        row, study = self._row_of(wildcards), self.study
        calibration = study.calibration_file(wildcards.family, row["backbone"], row["variant"], row["regime"])
        return {"data": study.data_dir(wildcards.family), "calibration": calibration}

    def run_args(self, wildcards: Any, input: Any) -> str:
        """The sweep run's `prism train` flags: its row at `lr`, `tune.steps` steps, the study's warm-up."""
        out = self.run_dir(wildcards.family, wildcards.run_id, wildcards.lr)
        return training_command(self.study, self._row_of(wildcards), input.data, out, input.calibration,
                                lr=float(wildcards.lr), max_steps=self.study.tune.steps,
                                warmup=self.study.warmup)  # fmt: skip

    def run_body(self, wildcards: Any) -> str:
        return f"{self.run_dir(wildcards.family, wildcards.run_id, wildcards.lr)}/launch.sh"

    def run_resources(self) -> dict[str, Any]:
        """A training job's resources, its walltime the cap of its backbone (no plan estimate)."""
        return self.schedule.resources(retrain=self.retrain) | {"walltime": self.walltime, "runtime": self.runtime}

    def walltime(self, wildcards: Any) -> str:
        return resources.train_walltime(self.study.cluster, None, resources.backbone_of(wildcards))

    def runtime(self, wildcards: Any) -> int:
        return resources.walltime_minutes(self.walltime(wildcards))

    def retrain(self, wildcards: Any) -> str:
        out = f"{self.run_dir(wildcards.family, wildcards.run_id, wildcards.lr)}/metrics.json"
        return self.schedule.retrain_flag("tune_run", out)

    def fit_args(self, wildcards: Any) -> list[str]:
        """`prism isoflop tune` flags (the bootstrap's and the margin's): rerun triggers of the rule."""
        tune = self.study.tune
        return ["--bootstrap", str(tune.bootstrap), "--seed", str(tune.seed), "--margin", str(tune.margin)]
