"""The plan's rows, known while the DAG is built.

The workflow computes the plan itself, with the function `prism isoflop plan` writes to
plan.yaml (`plan_runs`) called on the same arguments (`commands.plan_arguments`): sizes without
a calibration file are counted in-process and their speed interpolated, so a dry run lists the
training jobs of any budgets. A run waits for the data first (its size gives the runs' epochs):
until it is built the plan is a checkpoint, the DAG below it known after it has run; a dry run
plans without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prism.core.errors import PrismError
from prism.core.studylayout import manifest_file
from prism.isoflop.design.gate import plan_notes, plan_stop, plan_summary
from prism.isoflop.design.ladder import union
from prism.isoflop.design.plan import NoBudget, make_plan, plan_runs, rule_sizes
from prism.isoflop.design.plantext import dropped_lines
from prism.isoflop.design.walltime import WallTime, wall_time
from prism.isoflop.planread import read_plan
from prism.isoflop.records import PlanRow
from prism.workflow.commands import plan_arguments
from prism.workflow.probe import probe_file, probed
from prism.workflow.study import Study

Rows = dict[str, PlanRow]


class WorkflowPlan:
    """plan.yaml as the workflow reads it (the rules' `PLAN`): the planned runs of each family, by run id,
    computed in-process while the plan job has not written them.

    `engine`: prism.workflow.engine.Engine (or a stand-in); `wait_for_plan(family)`: the path of the
    plan job's plan.yaml, which makes the caller wait for that job while it has not run (Snakemake's
    `checkpoints.plan.get`); `requested(family, rows)`: the line saying what the rows' training jobs
    request (the schedule knows its jobs).
    """

    def __init__(self, study: Study, engine: Any, wait_for_plan: Callable[[str], str],
                 requested: Callable[[str, Rows], str]) -> None:  # fmt: skip
        self.study = study
        self.engine = engine
        self.wait_for_plan = wait_for_plan
        self.requested = requested
        self._plans: dict[Any, Rows | None] = {}
        self._checked: set[str] = set()

    def backbones(self, family: str) -> list[str]:
        """The config's backbones and, with `plan.sizes_per_budget`, the shape rule's sizes the plan picks
        (the same function the plan calls, on the config alone: the DAG lists their calibrations)."""
        study = self.study
        by_budget = rule_sizes(family, [float(b) for b in study.budgets], study.plan, regime=study.regime,
                               variants=list(study.config["variants"]), out=study.plan_file(family),
                               spec=study.specs[family])  # fmt: skip
        return list(dict.fromkeys(list(study.config["backbones"]) + union(by_budget)))

    def input_files(self, family: str) -> list[str]:
        """What the plan reads: the data (its training split's size gives each run's epochs), every
        candidate's calibration, its measured speed when the config measures it, and a fitted lr rule."""
        study = self.study
        pairs = [(b, v) for b in self.backbones(family) for v in study.config["variants"]]
        files = [study.data_dir(family)] + [study.calibration_file(family, b, v, study.regime) for b, v in pairs]
        if study.calibrate.measure_throughput:
            files += [study.speed_file(family, b, v, study.regime) for b, v in pairs]
        if study.tune.fitted:  # the tuning stage's rule (rules/tune.smk)
            files.append(study.lr_rule_file(family))
        if probed(study):  # a cluster study is priced by its probe: the plan, and every job after it, waits
            files.append(probe_file(study, family))
        return files

    def arguments(self, family: str) -> dict[str, Any]:
        """`plan_arguments` for the plan computed here: without the data while it is not built, at the hand rule's
        lr while the tuning stage's rule is not there (both only in a dry run)."""
        args = plan_arguments(self.study, family, read_rule=not self.rule_pending(family))
        return args | ({} if self.study.data_built(family) else {"data": None})

    def rule_pending(self, family: str) -> bool:
        """Whether the plan waits for the tuning stage's lr rule (tune.rule fitted, its file not written yet)."""
        return self.study.tune.fitted and not Path(self.study.lr_rule_file(family)).is_file()

    def computed_rows(self, family: str) -> Rows | None:
        """The plan's rows computed here, or None in a run while the data is not built (or it cannot plan:
        then the plan job runs and its log says why).

        Where Snakemake itself runs (not in a cluster job), a plan that cannot answer its question (a
        refused budget, an UNDETERMINED forecast, without plan.allow_undetermined) is None too: the DAG
        then waits for the plan job, which fails with the same one line, so no training job is submitted.
        """
        study = self.study
        if (not study.data_built(family) or self.rule_pending(family)) and not self.engine.dryrun:
            self.stop_unplannable(family)
            return None
        if self.rule_pending(family):
            self.engine.say_once(f"lr rule of {family}: this dry run lists the runs at the hand rule's lr; the tuning "
                                 f"stage's rule ({study.lr_rule_file(family)}) sets them")  # fmt: skip
        # Calibrations and speeds are a cache: whatever exists of them is read, the rest counted.
        key = self._key(family)
        if key not in self._plans:
            try:
                rows: Rows | None = self._planned(family)
            except NoBudget as err:  # no job can change it: stop before any (the data's build included)
                self.engine.stop(f"plan {family}: {err}")
                raise
            except PrismError as err:  # the plan job fails with the same line; a dry run says it now
                self.engine.say_once(f"plan {family}: {err}")
                rows = None
            if rows is not None and not self.engine.in_job:
                rows = rows if self.may_train(family, rows) else None
            self._plans[key] = rows
        return self._plans[key]

    def _key(self, family: str) -> tuple:
        """The plan's inputs as they are now (path, modification time): a computed plan is reused until one changes."""
        data = self.study.data_dir(family)
        stamps = [manifest_file(f) if f == data else Path(f) for f in self.input_files(family)]
        return (family, tuple((str(p), p.stat().st_mtime_ns) for p in stamps if p.is_file()))

    def pricing_rows(self, family: str) -> Rows | None:
        """The plan's rows as far as they price the jobs that run before the plan job: the lr sweep's, whose
        fitted rule the plan waits for. Computed here as a dry run computes them (at the hand rule's lr while
        the rule is pending: a size's seconds a sample do not depend on its lr; without the data while it is
        not built), never waiting for the plan job, so the sweep's packs are submitted with the walltime the
        dry run printed, not the cap. None where the sizes cannot be planned (the plan job then says why)."""
        key = ("pricing", *self._key(family))
        if key not in self._plans:
            try:
                self._plans[key] = self._planned(family)
            except PrismError:
                self._plans[key] = None
        return self._plans[key]

    def _planned(self, family: str, **changed: Any) -> Rows:
        """The plan computed here, its rows by run id (`changed`: arguments other than the study's)."""
        return {row.run_id: row for row in plan_runs(**self.arguments(family) | changed).runs}

    def stop_unplannable(self, family: str) -> None:
        """Stop a run whose every budget is refused before its data is built (the data only adds refusals):
        the plan is computed once here without it, as a dry run computes it."""
        if self.engine.in_job or family in self._checked:
            return
        self._checked.add(family)
        try:
            self._planned(family, data=None)
        except NoBudget as err:
            self.engine.stop(f"plan {family}: {err}")
        except PrismError:  # anything else the plan job says in its own log
            pass

    def may_train(self, family: str, rows: Rows) -> bool:
        """Print the plan's summary and what its jobs request (or the line that stops it); whether it may train."""
        logger = self.engine.logger
        try:
            plan = make_plan(**self.arguments(family), cooldown_fraction=self.study.train.cooldown_fraction)
        except PrismError as err:
            logger.error(f"plan {family}: {err}")
            return False
        stop = plan_stop(plan)
        if stop and not self.study.plan.allow_undetermined:
            if self.engine.dryrun:  # otherwise the plan job runs and prints it
                logger.info(plan_summary(plan))  # what the budgets would cost, then why they do not train
                for line in dropped_lines(plan):
                    logger.info(line)
                logger.error(stop)
            return False
        for line in plan_notes(plan, self.study.data_built(family)):
            logger.warning(line)
        logger.info(plan_summary(plan, self.wall_time(plan), cluster=self.engine.submits))
        for line in dropped_lines(plan):
            logger.info(line)
        logger.info(self.requested(family, rows))
        return True

    def slots(self) -> int:
        """Training jobs that run at once on this machine: the cores over each job's `train.threads`."""
        return max(1, int(self.engine.cores) // max(1, int(self.study.train.threads)))

    def wall_time(self, plan: dict) -> WallTime | None:
        """The study's expected wall time on this machine (None where jobs go to a cluster, or a run has no
        time estimate): what a user plans by, not the runs' times added up."""
        if self.engine.submits:
            return None
        train = self.study.train
        return wall_time(plan.get("runs") or [], train.schedule, self.slots(), train.cooldown_fraction,
                         self.study.plan.min_steps)  # fmt: skip

    def rows(self, family: str) -> Rows:
        """The planned runs of `family`, by run id.

        Computed here when the calibrations exist; otherwise `wait_for_plan` makes the caller wait for
        the plan job (Snakemake re-evaluates the DAG once it exists). Either way plan.yaml is no input
        of training: adding a budget re-plans, but runs whose plan rows did not change are not retrained.
        """
        rows = self.computed_rows(family)
        if rows is not None:
            return rows
        plan_file = self.wait_for_plan(family)
        return read_plan(plan_file, fix=f"`snakemake plan_{family} --forcerun` makes it again").rows

    def row(self, wildcards: Any) -> PlanRow:
        """The plan row of a job's `family` and `run_id` wildcards."""
        rows = self.rows(wildcards.family)
        if wildcards.run_id not in rows:
            raise ValueError(
                f"run {wildcards.run_id!r} is not in {self.study.plan_file(wildcards.family)}; "
                f"planned: {', '.join(rows) or 'none'}"
            )
        return rows[wildcards.run_id]

    def run_metrics(self, family: str) -> list[str]:
        """metrics.json of every planned run of `family` (waits for the plan)."""
        return [self.study.run_metrics(family, run_id) for run_id in self.rows(family)]
