"""`StudyWorkflow`: the one object the Snakefile and rules/*.smk read, built once from Snakemake's
config and workflow. Its functions take a job's `wildcards` (and `input`) as Snakemake passes them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prism.core.errors import PrismError
from prism.data.index import find_shards
from prism.isoflop.fit.fit import too_few_budgets
from prism.isoflop.runs.table import table_problem
from prism.launch.registry import get
from prism.workflow import commands, probe, resources
from prism.workflow.engine import UNRECORDED, Unrecorded
from prism.workflow.jobs import JobSchedule, make_schedule
from prism.workflow.planfile import WorkflowPlan
from prism.workflow.study import Study, budget_str
from prism.workflow.tune import TuneStage


class StudyWorkflow:
    """The study (`study`), its plan (`plan`), its schedule's jobs (`schedule`) and the input and params
    functions of the rules every schedule shares.

    `engine`: prism.workflow.engine.Engine; `wait_for_plan(family)`: plan.yaml's path once the plan job
    has run (`checkpoints.plan.get`); `ancient`: Snakemake's marker for inputs whose age is no trigger.
    """

    def __init__(self, config: dict, engine: Any, wait_for_plan: Callable[[str], str],
                 ancient: Callable[[str], Any] = str) -> None:  # fmt: skip
        try:
            self.study = Study(config)
        except PrismError as err:  # a config the schema allows but the library refuses (a shape, a tokenizer)
            raise SystemExit(str(err)) from None
        # Settings a finished study cannot reuse stop here in one line, before anything trains.
        conflict = self.study.conflict()
        if conflict:
            raise SystemExit(conflict)
        self.engine = engine
        self.say_placeholders()
        self.plan = WorkflowPlan(
            self.study, engine, wait_for_plan, lambda family, rows: self.schedule.requested(family, rows)
        )
        self.schedule: JobSchedule = make_schedule(self.study, self.plan, engine, ancient)
        # The lr sweep before the grid and its fitted rule (rules/tune.smk), when tune.rule is fitted.
        self.tune = TuneStage(self.study, self.plan, self.schedule)

    def say_placeholders(self) -> None:
        """A cluster study whose account is still config/aurora.yaml's placeholder says so on every call, the
        dry run's included: PBS refuses every job of it (`qsub -A`), after the local jobs have run."""
        account = str(self.study.cluster.get("account") or "")
        if get(self.study.train.launcher).cluster and "FILL_IN" in account:
            self.engine.say_once(
                f"config cluster.account: {account} is a placeholder: set your project (qsub -A) before "
                "submitting; PBS refuses every job with it (prism cluster check says so too)"
            )

    # ---- data -------------------------------------------------------------------

    def data_inputs(self, wildcards: Any) -> list[str]:
        """The user's shards folder when indexed (its modification time changes when a shard is added),
        and the tokenizer file (`spec_inputs`).

        A folder that does not exist (config/aurora.yaml's placeholder) is no input, so a dry run still
        shows the study; it says so in one line, and the data job refuses it before anything else runs.
        """
        shards = self.study.shards_dir(wildcards.family)
        if shards and not Path(shards).is_dir():
            self.engine.say_once(
                f"config data.shards.{wildcards.family}: {shards} is not a folder: set it to the folder of your "
                "webdataset shards (docs/own-data.md), or remove the key to build the offline data; "
                f"the data job for {wildcards.family} refuses it"
            )
            return self.spec_inputs(wildcards)
        if shards and not self.engine.in_job:
            try:  # a folder with no shards in it: said now, not when its index fails after the dry run
                find_shards(Path(shards))
            except PrismError as err:
                self.engine.stop(f"config data.shards.{wildcards.family}: {err} (docs/own-data.md)")
        return ([shards] if shards else []) + self.spec_inputs(wildcards)

    def spec_inputs(self, wildcards: Any) -> list[str]:
        """The files the family's samples depend on: its tokenizer file (none for bytes). An input of the
        data, calibrate and speed jobs, so a tokenizer edited in place retrains what used it."""
        vocab = self.study.specs[wildcards.family].vocab
        return [] if vocab.is_bytes else [vocab.file]

    def data_args(self, wildcards: Any) -> list[str]:
        return commands.data_command(self.study, wildcards.family)

    def data_threads(self, wildcards: Any) -> int:
        return commands.data_threads(self.study, wildcards.family)

    # ---- calibrate ------------------------------------------------------------------

    def spec_args(self, wildcards: Any) -> str | Unrecorded:
        """The family's shape and tokenizer flags, shell-quoted, each after a space; for the laptop's shape
        none, and unrecorded, so a default study's calibrate jobs (and the runs that read them) are the
        ones they always were, command and params."""
        flags = self.study.spec_flags[wildcards.family]
        return "".join(" " + shlex.quote(flag) for flag in flags) if flags else UNRECORDED

    def speed_args(self, wildcards: Any) -> list[str]:
        return commands.calibrate_flags(self.study, wildcards.family)

    def speed_resources(self) -> dict[str, Any]:
        """A speed job's resources: under a cluster profile it is a short job on a compute node; with
        cluster.pack all of a study's speed jobs are one job, each on its own device of the node."""
        cluster = self.study.cluster
        job = {**resources.speed_job(cluster, self.study.dir), "pin": ""}
        node_devices = None
        if cluster.get("pack"):
            slots = int(cluster["ranks_per_node"])

            def pack(wildcards: Any) -> dict[str, Any]:  # a family's speed jobs: one a candidate size and variant
                jobs = len(self.plan.backbones(wildcards.family)) * len(self.study.config["variants"])
                return resources.speed_pack(cluster, jobs, slots, self.study.dir)

            keys = ("nodes", "walltime", "runtime", "queue")
            job |= {key: lambda w, key=key: pack(w)[key] for key in keys}
            job["pin"] = resources.pin_prefix(slots, self.study.train.device)
            node_devices = slots
        threads = self.study.train.threads
        return {
            **resources.slurm_names(
                job, self.study.train.device, cluster.get("mem_mb"), threads=threads, node_devices=node_devices
            ),
            **resources.slurm_setup(cluster, self.study.dir, self.engine.runs_under_slurm),
        }

    def speed_group(self) -> Callable[[Any], str] | None:
        """The speed rule's `group:` with cluster.pack: one pack of a family's timed steps."""
        if not self.study.cluster.get("pack"):
            return None

        def group(wildcards: Any) -> str:
            self.engine.check_groups_run_at_once()
            name = f"{wildcards.family}-speed"
            self.engine.group_parent(name, resources.PACK_GROUP)
            return name

        return group

    def job_environment(self) -> dict[str, Any]:
        """What every cluster job sets up itself (set-up lines, caches, `qsub -v` names): resources."""
        return resources.environment(self.study.cluster, self.study.dir)

    # ---- the probe (rules/probe.smk) ----------------------------------------------

    def probe_args(self, wildcards: Any) -> list[str]:
        return probe.probe_args(self.study, self.plan.backbones(wildcards.family), wildcards.family)

    def probe_inputs(self, wildcards: Any) -> list[str]:
        return probe.probe_inputs(self.study, self.plan.backbones(wildcards.family), wildcards.family)

    def probe_resources(self) -> dict[str, Any]:
        return probe.probe_resources(self.study)

    # ---- the plan -----------------------------------------------------------------

    def plan_inputs(self, wildcards: Any) -> list[str]:
        return self.plan.input_files(wildcards.family)

    def plan_args(self, wildcards: Any) -> list[str]:
        return commands.plan_command(self.study, wildcards.family)

    # ---- collect, fit, plot ---------------------------------------------------------

    def planned_metrics(self, wildcards: Any) -> list[str]:
        """What collect aggregates: every planned run of the family (the plan names them)."""
        return self.plan.run_metrics(wildcards.family)

    def fit_inputs(self, wildcards: Any) -> str:
        """The runs table; a plan that cannot be fitted, or a table changed by hand, stops the workflow
        here, while its DAG is built: a fit job failing on them would first have lost the previous fit."""
        study, family = self.study, wildcards.family
        csv = study.runs_csv(family)
        line = too_few_budgets(family, study.budgets)  # fewer in the config than a fit needs: said before the plan
        if not line:
            rows = self.plan.rows(family)
            line = too_few_budgets(family, sorted({budget_str(row.budget) for row in rows.values()}, key=float))
            line = line or table_problem(csv, {run_id: study.run_metrics(family, run_id) for run_id in rows})
        if line:
            self.engine.stop(line)
        return csv

    def family_dir(self, wildcards: Any) -> str:
        return self.study.family_dir(wildcards.family)

    def runs_dir(self, wildcards: Any) -> str:
        return f"{self.study.family_dir(wildcards.family)}/runs"

    def data_dir(self, wildcards: Any) -> str:
        return self.study.data_dir(wildcards.family)

    def plot_dir(self, wildcards: Any) -> str:
        return self.study.plot_dir(wildcards.family, wildcards.regime)

    # ---- named targets ------------------------------------------------------------

    def targets(self, family: str) -> list[str]:
        """What `all` needs of a family: the fit, its figures, the plan and runs table, every run."""
        study = self.study
        return (
            study.fit_outputs(family)
            + study.plot_outputs(family)
            + study.study_records(family)
            + self.schedule.study_metrics(family)
        )
