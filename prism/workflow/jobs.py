"""The learning-rate schedule of a study's runs, decided once (`make_schedule`), as the jobs it implies.

- cosine: one `train` job per planned run (rules/train.smk);
- wsd: per model one constant-rate trajectory cut at its branch points (`wsd_segment` jobs, each
  ending in a kept checkpoint) and one cooldown branch per planned run off it (`wsd_branch`),
  rules/wsd.smk (prism.isoflop.design.trajectories).

Either way a planned run's job writes STUDY/F/runs/RUN_ID/metrics.json, so collect, fit and plot
need nothing special. Everything else that differs (the rules file, the rule whose forcing
retrains a run, each job's inputs, flags, estimate and priority, what a lost file means) is a
method here; nothing outside this module asks which schedule a study has.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prism.core.errors import PrismError
from prism.core.studylayout import StudyLayout, run_config
from prism.isoflop.design.trajectories import Trajectory, plan_trajectories
from prism.isoflop.records import PlanRow
from prism.isoflop.runs.launch import run_flags
from prism.isoflop.runs.status import lost_finals
from prism.launch.walltime import run_estimate_s
from prism.train.config import RunConfig
from prism.train.identity import run_hash
from prism.train.rundir.layout import kept_checkpoint, kept_origin
from prism.train.rundir.runfiles import RunConfigUnreadable, read_run_config
from prism.workflow import probe, resources
from prism.workflow.commands import tracker_command, training_run
from prism.workflow.engine import pending_or
from prism.workflow.packing import Pack, Unit
from prism.workflow.packs import PackOf, Packs
from prism.workflow.planfile import Rows, WorkflowPlan
from prism.workflow.study import Study, budget_str

Estimate = Callable[[Any], float | None]  # a training job's wildcards -> its estimated seconds (None: unknown)


class JobSchedule(Packs):
    """A study's training jobs under its lr schedule (the rules' `SCHEDULE`; the schedule of one run's
    learning rate is prism.train.lr_schedule.Schedule). What every schedule shares: retraining, a run's
    files, a training job's resources, packs (`Packs`)."""

    name = ""
    rules_file = ""
    run_rule = ""  # the rule whose job writes a planned run's metrics.json
    rules: frozenset[str] = frozenset()

    def __init__(self, study: Study, plan: WorkflowPlan, engine: Any, ancient: Callable[[str], Any] = str) -> None:
        self.study = study
        self.plan = plan
        self.engine = engine
        self.ancient = ancient
        self._packs: dict[str, tuple[Any, dict[str, Pack]]] = {}

    # ---- retraining -----------------------------------------------------------
    # `--config retrain=true` retrains every training job of the targets, whatever the schedule:
    # each training rule is forced as `--forcerun RULE` would be, and (wsd) a segment's or branch's
    # start point is a plain input, so the jobs after a retrained segment rerun too. The same holds
    # when a training rule is forced by name (`--forcerun train`, `wsd_segment`, `wsd_branch`).

    def retraining(self) -> bool:
        """Whether this call retrains (retrain=true, --forceall, or a training rule forced)."""
        forced = self.engine.forced_targets()
        return bool(self.study.config["retrain"]) or bool(forced & (TRAINING_RULES | {"--forceall"}))

    def force_if_retraining(self, rule_name: str) -> None:
        """Under retrain=true, make every job of `rule_name` rerun (called while the DAG is built)."""
        if self.study.config["retrain"]:
            self.engine.force_rule(rule_name)

    def retrain_flag(self, rule: str, output: str) -> str:
        """'1' when this call retrains (see `retraining`), or when this job's `output` was forced explicitly,
        else '0' (a resource: never a rerun trigger). `rule`: the job's rule, for `--forcerun RULE`."""
        return "1" if self.retraining() or self.engine.forced_targets() & {rule, output} else "0"

    def run_retrain(self, wildcards: Any) -> str:
        """The PRISM_RETRAIN flag of a planned run's job."""
        return self.retrain_flag(self.run_rule, self.study.run_metrics(wildcards.family, wildcards.run_id))

    # ---- a planned run --------------------------------------------------------

    def run_dir(self, wildcards: Any) -> str:
        return self.study.run_dir(wildcards.family, wildcards.run_id)

    def run_body(self, wildcards: Any) -> str:
        """The job body `prism train --dry-run` writes into the run directory, then runs."""
        return f"{self.run_dir(wildcards)}/launch.sh"

    def row_value(self, key: str) -> Callable[[Any], Any]:
        """A params function returning one field of this run's plan row (a rerun trigger when it changes)."""
        return lambda wildcards: getattr(self.plan.row(wildcards), key)

    def run_budget(self, wildcards: Any) -> str:
        return budget_str(self.plan.row(wildcards).budget)

    @staticmethod
    def identity_param(
        run_of: Callable[[Any, Any], RunConfig], inputs_of: Callable[[Any], dict[str, Any]]
    ) -> Callable[[Any], str]:
        """A params function of the wildcards alone: the identity hash (prism.train.identity) of the run that
        `run_of(wildcards, input)` builds from the job's inputs (`inputs_of`). It holds every value that decides
        what the run computes, defaults included, so a changed library default reruns the job. Snakemake
        compares only params that do not read a job's input, so this one must not: the flags (`run`) do, and
        are not a rerun trigger."""
        return lambda wildcards: run_hash(run_of(wildcards, JobInputs(inputs_of(wildcards))))

    # ---- resources of a training job (no rerun triggers) -----------------------

    def nodes(self, wildcards: Any) -> int:
        return resources.backbone_nodes(self.study.cluster, resources.backbone_of(wildcards))

    def job_estimate_s(self, wildcards: Any) -> float | None:
        """The plan's estimate of this training job's steps in seconds; None while the plan is pending or has none."""
        return pending_or(None, lambda: self.estimate_s(wildcards))

    def queue(self, wildcards: Any, estimate_s: Estimate | None = None) -> str:
        """cluster.queue, or with cluster.queues the queue this job's nodes and walltime fit."""
        walltime_s = resources.walltime_seconds(self.walltime(wildcards, estimate_s))
        return resources.queue_for(self.study.cluster, self.nodes(wildcards), walltime_s)[0]

    def walltime(self, wildcards: Any, estimate_s: Estimate | None = None) -> str:
        startup_s, _ = probe.job_startup(self.study, wildcards.family)
        estimate = (estimate_s or self.job_estimate_s)(wildcards)
        return resources.train_walltime(self.study.cluster, estimate, resources.backbone_of(wildcards), startup_s)

    def compile(self, wildcards: Any, estimate_s: Estimate | None = None) -> str:
        """` --compile MODE` as the probe's figures decide it for this job's length (a resource: compiling
        changes no result), "" unprobed."""
        estimate = (estimate_s or self.job_estimate_s)(wildcards)
        return probe.compile_flag(self.study, wildcards.family, self.nodes(wildcards), estimate)

    def runtime(self, wildcards: Any, estimate_s: Estimate | None = None) -> int:
        return resources.walltime_minutes(self.walltime(wildcards, estimate_s))

    def trackers(self, wildcards: Any) -> str:
        return tracker_command(self.study, wildcards.family)

    def resources(
        self, retrain: Callable[[Any], str], estimate_s: Estimate | None = None, pack_of: PackOf | None = None
    ) -> dict[str, Any]:
        """The resources of a training job; `retrain` is the rule's PRISM_RETRAIN function. A job none of the
        plan's runs (the lr sweep's) gives its own `estimate_s` and, with cluster.pack, `pack_of` (its pack);
        by default the plan's estimate and the grid's packs."""
        study = self.study
        return {
            **resources.slurm_names(self._resources(retrain, estimate_s, pack_of), study.train.device,
                                    study.cluster.get("mem_mb"), threads=study.train.threads,
                                    node_devices=int(study.cluster["ranks_per_node"]) if self.packing else None),
            **resources.slurm_setup(study.cluster, study.dir, self.engine.runs_under_slurm),
        }  # fmt: skip

    def _resources(
        self, retrain: Callable[[Any], str], estimate_s: Estimate | None = None, pack_of: PackOf | None = None
    ) -> dict[str, Any]:
        study, train, cluster = self.study, self.study.train, self.study.cluster
        return {
            "nodes": self.nodes,
            "procs_per_node": study.ranks_per_node,
            "walltime": lambda w: self.walltime(w, estimate_s),
            "runtime": lambda w: self.runtime(w, estimate_s),
            "launcher": train.launcher,
            "storage": train.storage,
            "strategy": train.strategy,
            "device": train.device,
            "account": cluster["account"],
            "queue": (lambda w: self.queue(w, estimate_s)) if cluster.get("queues") else cluster["queue"],
            "filesystems": cluster["filesystems"],
            "place": cluster["place"],
            "retrain": retrain,
            "track": self.trackers,
            "compile": lambda w: self.compile(w, estimate_s),
            **resources.environment(cluster, study.dir),
            "pin": "",
            **(self.pack_resources(retrain, pack_of) if self.packing else {}),
        }

    def requested(self, family: str, rows: Rows) -> str:
        """The plan's line on its training jobs: what they request of a cluster, or where they run here."""
        if not self.engine.submits and not self.packing:  # cluster.pack: packs are cluster jobs
            return self.local_text(family, rows)
        cluster, startup = self.study.cluster, probe.job_startup(self.study, family)
        try:
            if self.packing:
                packs = list({id(p): p for p in self.packs_by_job(family, rows).values()}.values())
                once_s, _, said = probe.pack_startup(self.study, family)
                efficiency = probe.pack_efficiency(self.study, family)
                return resources.packs_text(cluster, family, len(rows), packs, once_s, said, efficiency)
            for backbone, nodes, estimate in self.training_jobs(rows):  # each job's queue holds it
                resources.queue_for(cluster, nodes, resources.request_s(cluster, estimate, backbone, startup[0]))
        except PrismError as err:  # a job no queue holds: refused before anything is submitted
            self.engine.stop(f"plan {family}: {err}")
        return resources.requested_text(cluster, family, self.training_jobs(rows), startup)

    def local_text(self, family: str, rows: Rows) -> str:
        """The plan's line where jobs run on this machine: how many, how many at once, what a wsd run's parts
        are, and why Snakemake's "of N steps" grows now (a checkpoint's jobs are counted once it has run)."""
        jobs = len(self.training_jobs(rows))
        parts = ""
        if jobs != len(rows):
            parts = (
                f" ({jobs - len(rows)} trajectory segments and {len(rows)} cooldown branches: a run is done when "
                "its branch is)"
            )
        grows = (
            ""
            if self.engine.dryrun
            else "; Snakemake's count of steps now includes them, so its 'of N steps' grows once the plan is known"
        )
        return (
            f"plan {family}: {jobs} training jobs{parts} run on this machine, {self.plan.slots()} at a time "
            f"({self.engine.cores} cores, train.threads {self.study.train.threads} a job){grows}"
        )

    def device_seconds(self, hours_per_node: float | None, hours_here: float | None, devices: int) -> float | None:
        """Seconds of work on `devices` of a node: node-hours x the node's devices over the run's, else time here."""
        if hours_per_node:
            return hours_per_node * 3600.0 * int(self.study.cluster["ranks_per_node"]) / max(devices, 1)
        return hours_here * 3600.0 if hours_here else None

    # ---- what the named targets need -------------------------------------------

    def study_metrics(self, family: str, wildcards: Any = None) -> list[str]:
        """metrics.json of every planned run of `family` (waits for the plan): what the named targets need.

        A finished run's file that is gone and that nothing reruns is said in one line (see `lost_points`).
        """
        if not self.retraining():
            for path in self.lost_points(family):
                self.engine.say_once(
                    f"{path} is gone: the runs after it are finished, so nothing needs it now; `snakemake {path}` "
                    "puts it back (from its segment's final/, else by training that segment again), and so does "
                    "any new job that starts from it",
                    warning=True,
                )
            # a finished run's weights gone: nothing reruns it, so say it
            for line in lost_finals(self.study.family_dir(family), self.plan.rows(family), self.name):
                self.engine.say_once(line, warning=True)
        return self.plan.run_metrics(family)

    # ---- what each schedule defines --------------------------------------------

    def estimate_s(self, wildcards: Any) -> float | None:
        raise NotImplementedError

    def training_jobs(self, rows: Rows) -> list[resources.Job]:
        """(backbone, nodes, estimated seconds) of every training job of the plan's `rows`."""
        raise NotImplementedError

    def lost_points(self, family: str) -> list[str]:
        """Files gone that no job of the targets puts back (only wsd segments' points can be)."""
        return []

    def units(self, rows: Rows, startup_s: float = 0.0) -> list[Unit]:
        """What runs in series inside one job (prism.workflow.packing), with its seconds on its devices, each
        Snakemake job's start-up (`startup_s`: set-up, imports, first batch) included."""
        raise NotImplementedError


class CosineSchedule(JobSchedule):
    """One `train` job per planned run, cosine decay over its steps."""

    name = "cosine"
    rules_file = "rules/train.smk"
    run_rule = "train"
    rules = frozenset({"train"})

    def train_inputs(self, wildcards: Any) -> dict[str, str]:
        """The data and this run's calibration; waits for the plan (to know the run) but does not depend on it."""
        row = self.plan.row(wildcards)
        self.force_if_retraining("train")
        study, family = self.study, wildcards.family
        return {
            "data": study.data_dir(family),
            "calibration": study.calibration_file(family, row.backbone, row.variant, row.regime),
        }

    def train_run(self, wildcards: Any, input: Any) -> RunConfig:
        """The run of its plan row (the same mapping `prism isoflop launch` uses)."""
        return training_run(self.study, self.plan.row(wildcards), input.data, self.run_dir(wildcards),
                            input.calibration, warmup=self.study.warmup)  # fmt: skip

    def train_args(self, wildcards: Any, input: Any) -> str:
        """The run's `prism train` flags."""
        return run_flags(self.train_run(wildcards, input))

    def priority(self, wildcards: Any) -> int:
        """Longer runs first (their planned steps); 0 while the plan is not there yet."""
        return pending_or(0, lambda: int(self.plan.row(wildcards).steps))

    def estimate_s(self, wildcards: Any) -> float | None:
        row = self.plan.row(wildcards)
        return run_estimate_s(row.node_hours, row.hours_here, self.nodes(wildcards))

    def training_jobs(self, rows: Rows) -> list[resources.Job]:
        cluster = self.study.cluster
        jobs = []
        for r in rows.values():
            nodes = resources.backbone_nodes(cluster, r.backbone)
            jobs.append((r.backbone, nodes, run_estimate_s(r.node_hours, r.hours_here, nodes)))
        return jobs

    def units(self, rows: Rows, startup_s: float = 0.0) -> list[Unit]:
        """One unit a run: on one device (packed) unless its plan row says more devices or nodes."""
        out = []
        for r in rows.values():
            devices, nodes = run_devices(r), resources.backbone_nodes(self.study.cluster, r.backbone)
            seconds = self.device_seconds(r.node_hours, r.hours_here, devices)
            seconds = None if seconds is None else seconds + startup_s
            out.append(Unit(r.run_id, (r.run_id,), seconds, devices, nodes if devices > 1 else 1))
        return out


class JobInputs(dict):
    """A job's named inputs as its params functions read them (`input.data`, `input.keys()`)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def run_devices(row: PlanRow) -> int:
    """The devices a plan row trains on (its `devices` once the plan places runs; 1 until then)."""
    return int(row.devices or 1)


def step_seconds(t: Trajectory, nodes: int) -> float | None:
    """Estimated seconds per step of trajectory `t` on `nodes` nodes, as `run_estimate_s` for a run; None if unknown."""
    if t.node_hours_per_step:
        return t.node_hours_per_step * 3600.0 / max(nodes, 1)
    if t.hours_per_step:
        return t.hours_per_step * 3600.0
    return None


def recorded_start(rundir: str) -> tuple[bool, str | None]:
    """The point a started segment was trained from: (True, point file or None), or (False, None) if never started."""
    if not run_config(rundir).is_file():
        return False, None
    try:
        recorded = read_run_config(rundir).settings
    except RunConfigUnreadable:
        return False, None
    if not recorded.get("init_from"):
        return True, None
    return True, kept_checkpoint(recorded["init_from"], recorded["init_step"])


class WsdSchedule(JobSchedule):
    """Per model one constant-rate trajectory cut at its branch points, and a cooldown branch per run."""

    name = "wsd"
    rules_file = "rules/wsd.smk"
    run_rule = "wsd_branch"
    rules = frozenset({"wsd_segment", "wsd_branch"})
    point_pattern = r"[0-9]{8}"
    traj_pattern = r"[0-9a-z]+-[A-Z0-9]+-[a-z0-9_]+-B[0-9]+"

    @property
    def cooldown_fraction(self) -> float:
        return self.study.train.cooldown_fraction

    def trajectories(self, rows: Rows) -> list[Trajectory]:
        """The trajectories of the plan's `rows`; the warm-up follows the plan's min_steps, never its budgets."""
        plan = {"runs": list(rows.values()), "min_steps": self.study.plan.min_steps}
        return plan_trajectories(plan, self.cooldown_fraction)

    def family_trajectories(self, family: str) -> dict[str, Trajectory]:
        """{traj_id: Trajectory} of the family's planned runs (waits for the plan as `rows` does)."""
        return {t.traj_id: t for t in self.trajectories(self.plan.rows(family))}

    def trajectory(self, wildcards: Any) -> Trajectory:
        trajs = self.family_trajectories(wildcards.family)
        if wildcards.traj not in trajs:
            raise ValueError(f"trajectory {wildcards.traj!r} is not in the plan; planned: {', '.join(trajs) or 'none'}")
        return trajs[wildcards.traj]

    def run_trajectory(self, wildcards: Any) -> Trajectory:
        """The trajectory a planned run branches off."""
        row = self.plan.row(wildcards)
        for t in self.family_trajectories(wildcards.family).values():
            if any(b.run_id == row.run_id for b in t.branches):
                return t
        raise ValueError(f"run {row.run_id} is in no trajectory")

    # ---- files ------------------------------------------------------------------

    def segment_dir(self, family: str, traj: str, end: Any) -> str:
        return f"{self.study.stable_dir(family, traj)}/to-{int(end):08d}"

    def point_file(self, family: str, traj: str, step: Any) -> str:
        return kept_checkpoint(self.segment_dir(family, traj, step), step)

    def segment_output(self) -> str:
        """The wsd_segment rule's output pattern: the kept checkpoint at its end."""
        return kept_checkpoint(f"{self.study.stable_dir('{family}', '{traj}')}/to-{{end}}", "{end}")

    def segment_body(self, wildcards: Any) -> str:
        return f"{self.segment_dir(wildcards.family, wildcards.traj, wildcards.end)}/launch.sh"

    def lost_points(self, family: str) -> list[str]:
        """Point files that are gone while every job starting from them is finished (its branches, the next
        segment): nothing makes Snakemake put them back (naming one as a target does, as does a new job
        that starts from it); making them again here would rerun every job after it (restored, not trained)."""
        study, lost = self.study, []
        for t in self.family_trajectories(family).values():
            for i, p in enumerate(t.points):
                after = [study.run_metrics(family, b.run_id) for b in t.branches if b.start == p]
                after += [f"{self.segment_dir(family, t.traj_id, q)}/metrics.json" for q in t.points[i + 1 : i + 2]]
                point = self.point_file(family, t.traj_id, p)
                if not Path(point).is_file() and all(Path(f).is_file() for f in after):
                    lost.append(point)
        return lost

    def start_input(self, point: str) -> Any:
        """A start point as an input: `ancient` (see rules/wsd.smk), but when retraining, when a rerun
        segment reruns what starts from it."""
        return point if self.retraining() else self.ancient(point)

    # ---- segments ---------------------------------------------------------------

    def segment_inputs(self, wildcards: Any) -> dict[str, Any]:
        t = self.trajectory(wildcards)
        family, study = wildcards.family, self.study
        inputs = {"data": study.data_dir(family),
                  "calibration": study.calibration_file(family, t.backbone, t.variant, t.regime)}  # fmt: skip
        started, start = recorded_start(self.segment_dir(family, wildcards.traj, wildcards.end))
        if not started:
            previous = t.previous_point(int(wildcards.end))
            start = self.point_file(family, t.traj_id, previous) if previous else None
        if start:
            inputs["start"] = self.start_input(start)
        self.force_if_retraining("wsd_segment")
        return inputs

    def segment_args(self, wildcards: Any, input: Any) -> str:
        """The segment's `prism train` flags."""
        return run_flags(self.segment_run(wildcards, input))

    def segment_run(self, wildcards: Any, input: Any) -> RunConfig:
        """The segment's run: constant rate after the warm-up to END, kept there."""
        t = self.trajectory(wildcards)
        end = int(wildcards.end)
        row = {"family": wildcards.family, "backbone": t.backbone, "variant": t.variant, "regime": t.regime,
               # a segment is a run of its whole prefix's FLOPs (its steps are --max-steps)
               "budget": float(budget_str(end * t.step_flops)), "global_batch": t.global_batch,
               "micro_batch": t.micro_batch, "accum_steps": t.accum_steps,
               "lr": t.lr, "lr_rule": t.lr_rule}  # fmt: skip
        init = {}
        if "start" in input.keys():
            init_from, init_step = kept_origin(input.start)
            init = {"init_from": init_from, "init_step": init_step}
        out = self.segment_dir(wildcards.family, wildcards.traj, end)
        return training_run(self.study, row, input.data, out, input.calibration,
                            cooldown_fraction=0.0, warmup=t.warmup, max_steps=end, checkpoint_at=str(end),
                            # A segment's own final loss is one more point of the stable curve, not a result
                            # the fit reads: the intermediate evaluations' sample count is enough for it.
                            final_eval_samples=self.study.train.eval_samples, **init)  # fmt: skip

    def traj_value(self, key: str) -> Callable[[Any], Any]:
        """A params function: one attribute of the segment's trajectory (a rerun trigger when it changes)."""
        return lambda wildcards: getattr(self.trajectory(wildcards), key)

    def segment_retrain(self, wildcards: Any) -> str:
        """'1' when retraining (retrain=true, a training rule forced, --forceall) or its point file was forced."""
        return self.retrain_flag("wsd_segment", self.point_file(wildcards.family, wildcards.traj, wildcards.end))

    def segment_priority(self, wildcards: Any) -> int:
        """Longest chain of work first (Trajectory.segment_priority); 0 while the plan is pending."""
        return pending_or(0, lambda: self.trajectory(wildcards).segment_priority(int(wildcards.end)))

    # ---- branches ---------------------------------------------------------------

    def branch_inputs(self, wildcards: Any) -> dict[str, Any]:
        t = self.run_trajectory(wildcards)
        self.force_if_retraining("wsd_branch")
        family, study = wildcards.family, self.study
        start = self.point_file(family, t.traj_id, t.branch(wildcards.run_id).start)
        return {"data": study.data_dir(family),
                "calibration": study.calibration_file(family, t.backbone, t.variant, t.regime),
                "start": self.start_input(start)}  # fmt: skip

    def branch_args(self, wildcards: Any, input: Any) -> str:
        """The branch's `prism train` flags."""
        return run_flags(self.branch_run(wildcards, input))

    def branch_run(self, wildcards: Any, input: Any) -> RunConfig:
        """The branch's run: its plan row as a wsd run, from the point at its cooldown start."""
        t = self.run_trajectory(wildcards)
        init_from, init_step = kept_origin(input.start)
        init = {"warmup": t.warmup, "init_from": init_from, "init_step": init_step}
        row = self.plan.row(wildcards)
        return training_run(self.study, row, input.data, self.run_dir(wildcards), input.calibration, **init)

    def branch_warmup(self, wildcards: Any) -> int:
        return self.run_trajectory(wildcards).warmup

    def branch_priority(self, wildcards: Any) -> int:
        return pending_or(0, lambda: self.run_trajectory(wildcards).branch_priority(self.plan.row(wildcards).run_id))

    # ---- estimates --------------------------------------------------------------

    def _steps_estimate(self, t: Trajectory, steps: int) -> float | None:
        per_step = step_seconds(t, resources.backbone_nodes(self.study.cluster, t.backbone))
        return None if per_step is None else steps * per_step

    def estimate_s(self, wildcards: Any) -> float | None:
        """A segment's stable steps (from the point it starts at) or a branch's cooldown steps, in seconds."""
        if getattr(wildcards, "traj", None):
            t = self.trajectory(wildcards)
            end = int(wildcards.end)
            return self._steps_estimate(t, end - t.previous_point(end))
        t = self.run_trajectory(wildcards)
        return self._steps_estimate(t, t.branch(wildcards.run_id).cooldown)

    def training_jobs(self, rows: Rows) -> list[resources.Job]:
        """Every segment and branch job of the plan's `rows`."""
        jobs = []
        for t in self.trajectories(rows):
            nodes = resources.backbone_nodes(self.study.cluster, t.backbone)
            jobs += [(t.backbone, nodes, self._steps_estimate(t, seg.end - seg.start)) for seg in t.segments]
            jobs += [(t.backbone, nodes, self._steps_estimate(t, b.cooldown)) for b in t.branches]
        return jobs

    def units(self, rows: Rows, startup_s: float = 0.0) -> list[Unit]:
        """One unit a trajectory: its segments one after another, then its branches, inside one job."""
        out = []
        for t in self.trajectories(rows):
            devices = max(run_devices(rows[b.run_id]) for b in t.branches)
            nodes = resources.backbone_nodes(self.study.cluster, t.backbone) if devices > 1 else 1
            per_step = self.device_seconds(t.node_hours_per_step, t.hours_per_step, devices)
            seconds = None if per_step is None else per_step * t.steps
            jobs = tuple(f"{t.traj_id}/to-{s.end:08d}" for s in t.segments) + tuple(b.run_id for b in t.branches)
            seconds = None if seconds is None else seconds + startup_s * len(jobs)
            out.append(Unit(t.traj_id, jobs, seconds, devices, nodes))
        return out

    # ---- the agreement check (a wsd study against a cosine one) -------------------

    def agreement_inputs(self, wildcards: Any) -> dict[str, str]:
        other = self.study.config["compare_with"]
        if not other:
            raise ValueError("agreement: set compare_with=<the study dir of a cosine study of the same grid>")
        family, regime = wildcards.family, wildcards.regime
        return {
            "fit": self.study.fit_file(family, regime, "json"),
            "csv": self.study.runs_csv(family),
            "other": StudyLayout(other).fit_file(family, regime, "json"),
        }

    def compared_study(self, wildcards: Any = None) -> str:
        return str(self.study.config["compare_with"] or "").rstrip("/")


SCHEDULES: dict[str, type[JobSchedule]] = {"cosine": CosineSchedule, "wsd": WsdSchedule}
# Every rule that trains, whatever the schedule: `--forcerun` of any of them retrains.
TRAINING_RULES = frozenset().union(*(s.rules for s in SCHEDULES.values()))


def make_schedule(study: Study, plan: WorkflowPlan, engine: Any, ancient: Callable[[str], Any] = str) -> JobSchedule:
    """The one place a study's `train.schedule` is read."""
    return SCHEDULES[study.train.schedule](study, plan, engine, ancient)
