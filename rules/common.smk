# Python helpers of the workflow: config access, wildcard constraints, and the
# input/params functions that know the plan. No rules here.

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from prism.errors import PrismError
from prism.train.rundir.finished import study_conflict
from prism.families import FAMILIES, study_specs
from prism.calibration import calibration_filename
from prism.ids import format_budget
from prism.isoflop.design.calibrate import CalibrateOptions, speed_filename
from prism.isoflop.runs.collect import CollectOptions
from prism.isoflop.fit.fit import FitOptions, too_few_budgets
from prism.isoflop.runs.status import lost_finals
from prism.isoflop.runs.table import table_problem
from prism.isoflop.design.gate import plan_notes, plan_stop, plan_summary
from prism.isoflop.runs.launch import run_args
from prism.isoflop.present.options import PlotOptions
from prism.isoflop.design.ladder import union
from prism.isoflop.design.plan import PlanOptions, make_plan, plan_runs, rule_sizes
from prism.isoflop.design.trajectories import plan_warmup
from prism.launch.ranks import cluster_ranks
from prism.launch.walltime import pieces, requested_seconds, run_estimate_s, walltime_seconds, walltime_text
from prism.model.config import BACKBONES, REGIMES, VARIANTS
from prism.model.sizes import RULE_NAME_PATTERN, VARIANT_NAME_PATTERN
from prism.options import as_args, from_mapping
from prism.train.options import TrainOptions
from prism.data.options import loader_options
from prism.worker import ENV as WORKER_ENV
from snakemake.logging import logger

# Rules call `prism`: find the one installed beside the Python running Snakemake
# (`.venv/bin/snakemake` works without activating the venv, here and in PBS jobs).
shell.prefix(f'set -euo pipefail; export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"; ')

STUDY = config["study_dir"].rstrip("/")
REGIME = config["regime"]

# Each config section of a verb's options is that verb's dataclass (prism.options): a key is
# a field, and the section becomes the verb's flags with `as_args`. No flag is spelt here.
CALIBRATE_OPTIONS = from_mapping(CalibrateOptions, config["calibrate"], "config calibrate")
PLAN_OPTIONS = from_mapping(PlanOptions, config["plan"], "config plan")
COLLECT_OPTIONS = from_mapping(CollectOptions, config["collect"], "config collect")
FIT_OPTIONS = from_mapping(FitOptions, config["fit"], "config fit")
PLOT_OPTIONS = from_mapping(PlotOptions, config["plot"], "config plot")
# The training runs' shared settings (prism.train.options): rules read them here, not the section.
TRAIN_OPTIONS = from_mapping(TrainOptions, config["train"], "config train")
# How the training runs read their split (prism.data.options): keys of the `data:` section.
LOADER_OPTIONS = loader_options(config["data"])
# Processes per node of a training job, and the ranks every run's global batch divides among.
RANKS_PER_NODE, JOB_RANKS = cluster_ranks(TRAIN_OPTIONS.launcher, config["cluster"])

# Each family's shape and the captions' tokenizer (`shapes`, `data.tokenizer`), installed for the
# plan counted here, and as each family's flags of its data, calibrate, speed and plan jobs.
try:
    SPEC_FLAGS = study_specs(config["shapes"], config["data"]["tokenizer"])
except PrismError as err:
    raise SystemExit(f"config: {err}")

# Settings a finished study cannot reuse stop here in one line, before anything trains.
_conflict = study_conflict(STUDY, config["families"], TRAIN_OPTIONS.schedule, TRAIN_OPTIONS.cooldown_fraction)
if _conflict:
    raise SystemExit(_conflict)


def budget_str(value):
    """The canonical spelling of a budget, as run ids use it: 3e11, 1e12, 2.5e17 (the planner's own)."""
    return format_budget(float(value))


BUDGETS = sorted({budget_str(b) for b in config["budgets"]}, key=float)

# The warm-up of every run of the study, whatever its schedule: half the plan's shortest run,
# never set by its budgets, so a cosine and a wsd study of one grid differ only after it.
WARMUP = plan_warmup(PLAN_OPTIONS.min_steps)



def _alternatives(names):
    return "|".join(sorted(names, key=len, reverse=True))


# Wildcards can only ever be these names: a run id or a family cannot smuggle
# anything into a command line (and values are shell-quoted as well).
wildcard_constraints:
    family=_alternatives(FAMILIES),
    backbone=f"{_alternatives(BACKBONES)}|{RULE_NAME_PATTERN}",
    variant=f"{_alternatives(VARIANTS)}|{VARIANT_NAME_PATTERN}",
    regime=_alternatives(REGIMES),
    budget=r"[0-9]+(\.[0-9]+)?e[0-9]+",
    run_id=r"[0-9a-z]+-[A-Z0-9]+-[a-z0-9_]+-C[0-9]+(\.[0-9]+)?e[0-9]+",


# ---- paths -------------------------------------------------------------------


def data_dir(family):
    return f"{STUDY}/data/{family}"


def shards_dir(family):
    """The folder of the user's own shards for `family` (`data.shards`), or None: the offline build."""
    return config["data"]["shards"].get(family)


def data_inputs(wildcards):
    """The user's shards folder when indexed (its modification time changes when a shard is added).

    A folder that does not exist (config/aurora.yaml's placeholder) is no input, so a dry run still
    shows the study; it says so in one line, and the data job refuses it before anything else runs.
    """
    shards = shards_dir(wildcards.family)
    if shards and not Path(shards).is_dir():
        say_once(f"config data.shards.{wildcards.family}: {shards} is not a folder: set it to the folder of your "
                 "webdataset shards (docs/own-data.md), or remove the key to build the offline data; "
                 f"the data job for {wildcards.family} refuses it")
        return []
    return [shards] if shards else []


def data_threads(wildcards):
    return 8 if shards_dir(wildcards.family) else 1


_SAID = set()


def say_once(text, warning=False):
    """An error (or warning) line on the terminal where Snakemake itself runs (not in cluster jobs), once."""
    if text not in _SAID and not (workflow.remote_exec or workflow.subprocess_exec):
        _SAID.add(text)
        (logger.warning if warning else logger.error)(text)


def terse_terminal():
    """With the profiles' `quiet: [rules]` a run prints progress, not job blocks: but Snakemake drops
    its failed-job blocks with them, so print those (rule, log path, the log's tail) here; a dry run
    keeps its job blocks (what would run and why is what it is for)."""
    import logging

    from snakemake.logging import DefaultFormatter, LogEvent, get_event
    from snakemake.settings.enums import Quietness

    settings = workflow.output_settings
    quiet = settings.quiet
    if not quiet or Quietness.RULES not in quiet or Quietness.ALL in quiet:
        return
    if workflow.remote_exec or workflow.subprocess_exec:
        return
    if settings.dryrun:
        quiet.discard(Quietness.RULES)  # the very set Snakemake's log filter reads
        return
    errors = (LogEvent.JOB_ERROR, LogEvent.GROUP_ERROR)
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(lambda record: get_event(record) in errors)
    handler.setFormatter(DefaultFormatter(quiet, settings.show_failed_logs))
    logger.addHandler(handler)
    # The scheduler's two lines per job say nothing the progress lines do not.
    chatter = re.compile(r"(Select jobs to execute|Execute \d+ jobs)\.\.\.$")
    logger.addFilter(lambda record: not (isinstance(record.msg, str) and chatter.match(record.msg)))


def data_args(wildcards):
    """`prism data` verb and flags of a family's data: its index where `data.shards` names a folder, else
    the offline build (only the flags that decide its bytes: rerun triggers)."""
    family, data = wildcards.family, config["data"]
    shards = shards_dir(family)
    if shards:
        return ["index", shards, "--family", family, "--eval-fraction", str(data["eval_fraction"]),
                "--max-bad-fraction", str(data["max_bad_fraction"]), *SPEC_FLAGS[family],
                *LOADER_OPTIONS.index_args()]
    return ["build", "--family", family, "--seed", str(data["seed"]), "--lm-ratio", str(data["lm_ratio"]),
            *SPEC_FLAGS[family]]


def calibration_file(family, backbone, variant, regime):
    return f"{STUDY}/calibration/{calibration_filename(family, backbone, variant, regime)}"


def speed_file(family, backbone, variant, regime):
    return f"{STUDY}/calibration/{speed_filename(family, backbone, variant, regime)}"


def study_backbones(family):
    """The config's backbones and, with `plan.sizes_per_budget`, the shape rule's sizes the plan picks
    (the same function the plan calls, on the config alone: the DAG lists their calibrations)."""
    by_budget = rule_sizes(family, [float(b) for b in BUDGETS], PLAN_OPTIONS, regime=REGIME,
                           variants=list(config["variants"]), out=f"{STUDY}/{family}/plan.yaml")
    return list(dict.fromkeys(list(config["backbones"]) + union(by_budget)))


def plan_input_files(family):
    """What the plan reads: the data (its training split's size gives each run's epochs), every
    candidate's calibration, and its measured speed when the config measures it."""
    pairs = [(b, v) for b in study_backbones(family) for v in config["variants"]]
    files = [data_dir(family)] + [calibration_file(family, b, v, REGIME) for b, v in pairs]
    if CALIBRATE_OPTIONS.measure_throughput:
        files += [speed_file(family, b, v, REGIME) for b, v in pairs]
    return files


def study_calibrations(wildcards):
    return plan_input_files(wildcards.family)


def logfile(*parts):
    return str(Path(STUDY, "logs", *parts)) + ".log"


# ---- the plan -------------------------------------------------------------------
#
# The workflow computes the plan itself, with the function `prism isoflop plan` writes to
# plan.yaml (`plan_runs`) called on the same arguments: sizes without a calibration file are
# counted in-process and their speed interpolated, so a dry run lists the training jobs of any
# budgets. A run waits for the data first (its size gives the runs' epochs): until it is built
# the plan is a checkpoint, the DAG below it known after it has run; a dry run plans without it.


def plan_arguments(family):
    """The arguments of `plan_runs`; the plan rule's shell passes exactly these as flags."""
    return dict(
        family=family,
        budgets=[float(b) for b in BUDGETS],
        calibration_dir=f"{STUDY}/calibration",
        data=data_dir(family),
        options=PLAN_OPTIONS,
        regime=REGIME,
        backbones=list(config["backbones"]),
        variants=list(config["variants"]),
        job_ranks=JOB_RANKS,
    )


def plan_flags(family):
    """`plan_arguments` as `prism isoflop plan` flags (but --family, a wildcard in the rule)."""
    args = plan_arguments(family)
    return [
        "--budgets", ",".join(BUDGETS),
        "--calibration-dir", args["calibration_dir"],
        "--data", args["data"],
        "--regime", args["regime"],
        # None: the rule's sizes only (an empty value would not survive the shell quoting).
        *(["--backbones", ",".join(args["backbones"])] if args["backbones"] else []),
        "--variants", ",".join(args["variants"]),
        *as_args(args["options"]),
        *(["--job-ranks", str(JOB_RANKS)] if JOB_RANKS > 1 else []),
        # What the grid costs as wsd trajectories (plan.yaml `schedules`); no run depends on it.
        "--cooldown-fraction", str(TRAIN_OPTIONS.cooldown_fraction),
        *SPEC_FLAGS[family],
    ]


_PLANS = {}


def data_built(family):
    """Whether the family's data is complete (a directory output: its manifest is written last)."""
    return Path(data_dir(family), "manifest.json").is_file()


def computed_plan_arguments(family):
    """`plan_arguments` for the plan computed here: without the data while it is not built (a dry run)."""
    return plan_arguments(family) | ({} if data_built(family) else {"data": None})


def computed_plan_rows(family):
    """The plan's rows computed here, or None in a run while the data is not built (or it cannot plan:
    then the plan job runs and its log says why).

    Where Snakemake itself runs (not in a cluster job), a plan that cannot answer its question (a
    refused budget, an UNDETERMINED forecast, without plan.allow_undetermined) is None too: the DAG
    then waits for the plan job, which fails with the same one line, so no training job is submitted.
    """
    if not data_built(family) and not workflow.dryrun:
        return None
    # Calibrations and speeds are a cache: whatever exists of them is read, the rest counted.
    stamps = [Path(f, "manifest.json") if f == data_dir(family) else Path(f) for f in plan_input_files(family)]
    key = (family, tuple((str(p), p.stat().st_mtime_ns) for p in stamps if p.is_file()))
    if key not in _PLANS:
        try:
            study = plan_runs(**computed_plan_arguments(family))
            rows = {row.run_id: row.to_json() for row in study.runs}
        except PrismError as err:  # the plan job fails with the same line; a dry run says it now
            say_once(f"plan {family}: {err}")
            rows = None
        if rows is not None and not (workflow.remote_exec or workflow.subprocess_exec):
            rows = rows if plan_may_train(family, rows) else None
        _PLANS[key] = rows
    return _PLANS[key]


def plan_may_train(family, rows):
    """Print the plan's summary and what its training jobs request (or the line that stops it); whether it may train."""
    try:
        plan = make_plan(**computed_plan_arguments(family), cooldown_fraction=TRAIN_OPTIONS.cooldown_fraction)
    except PrismError as err:
        logger.error(f"plan {family}: {err}")
        return False
    stop = plan_stop(plan)
    if stop and not PLAN_OPTIONS.allow_undetermined:
        if workflow.dryrun:  # otherwise the plan job runs and prints it
            logger.info(plan_summary(plan))  # what the budgets would cost, then why they do not train
            logger.error(stop)
        return False
    for line in plan_notes(plan, data_built(family)):
        logger.warning(line)
    logger.info(plan_summary(plan))
    logger.info(requested_text(family, rows))
    return True


def plan_rows(family):
    """The planned runs of `family`, by run id.

    Computed here when the calibrations exist; otherwise `checkpoints.plan.get` makes the
    caller wait for the plan (Snakemake re-evaluates the DAG once it exists). Either way
    plan.yaml is no input of training: adding a budget re-plans, but runs whose plan rows
    did not change are not retrained.
    """
    from prism.train.planrow import check_row

    rows = computed_plan_rows(family)
    if rows is not None:
        return rows
    plan_file = checkpoints.plan.get(family=family).output.plan
    with open(plan_file) as f:
        plan = yaml.safe_load(f) or {}
    rows = [check_row(row, i, plan_file) for i, row in enumerate(plan.get("runs") or [])]
    return {row["run_id"]: row for row in rows}


def plan_row(wildcards):
    rows = plan_rows(wildcards.family)
    if wildcards.run_id not in rows:
        raise ValueError(
            f"run {wildcards.run_id!r} is not in {STUDY}/{wildcards.family}/plan.yaml; "
            f"planned: {', '.join(rows) or 'none'}"
        )
    return rows[wildcards.run_id]


def train_inputs(wildcards):
    """The data and this run's calibration; waits for the plan (to know the run) but does not depend on it."""
    row = plan_row(wildcards)
    force_if_retraining("train")
    return {
        "data": data_dir(wildcards.family),
        "calibration": calibration_file(wildcards.family, row["backbone"], row["variant"], row["regime"]),
    }


# `snakemake --forcerun train` (or --forcerun of a run's metrics.json, or --forceall) is an
# explicit retrain: `prism train` then trains a finished run from scratch instead of restoring
# its unchanged record from final/. The main process records the forced targets in the
# environment, which submitted cluster jobs inherit (qsub -V) and read when they evaluate
# this again without the flags.
FORCED_ENV = "PRISM_FORCED_TARGETS"


def forced_targets():
    """What this Snakemake call forces (`--forcerun` rules and files, `--forceall`).

    Recorded in FORCED_ENV by the main process once its DAG is built, so that cluster jobs
    (`qsub -V`) see it too.
    """
    settings = getattr(workflow, "dag_settings", None)  # set once the DAG is built, not while parsing
    if settings is not None and (settings.forceall or settings.forcerun):
        os.environ[FORCED_ENV] = "\n".join(["--forceall"] * bool(settings.forceall) + sorted(map(str, settings.forcerun)))
    return set(os.environ.get(FORCED_ENV, "").split("\n")) - {""}


# `--config retrain=true` retrains every training job of the targets, whatever the schedule:
# each training rule is forced as `--forcerun RULE` would be, and (wsd) a segment's or branch's
# start point is a plain input, so the jobs after a retrained segment rerun too. The same holds
# when a training rule is forced by name (`--forcerun train`, `wsd_segment`, `wsd_branch`).
TRAINING_RULES = {"train", "wsd_segment", "wsd_branch"}


def retraining():
    """Whether this call retrains (retrain=true, --forceall, or a training rule forced)."""
    return bool(config["retrain"]) or bool(forced_targets() & (TRAINING_RULES | {"--forceall"}))


def force_if_retraining(rule_name):
    """Under retrain=true, make every job of `rule_name` rerun (called while the DAG is built)."""
    dag = getattr(workflow, "dag", None) if config["retrain"] else None
    if dag is not None:
        dag.forcerules.add(workflow.get_rule(rule_name))


def retrain_flag(rule, output):
    """'1' when this call retrains (see `retraining`), or when this job's `output` was forced explicitly,
    else '0' (a resource: never a rerun trigger). `rule`: the job's rule, for `--forcerun RULE`."""
    return "1" if retraining() or forced_targets() & {rule, output} else "0"


def train_retrain(wildcards):
    """The flag of a planned run's job (`train`, or `wsd_branch` in a wsd study)."""
    name = "wsd_branch" if TRAIN_OPTIONS.schedule == "wsd" else "train"
    return retrain_flag(name, f"{STUDY}/{wildcards.family}/runs/{wildcards.run_id}/metrics.json")


def row_value(key):
    """A params function returning one field of this run's plan row (a rerun trigger when it changes)."""

    def get(wildcards):
        return plan_row(wildcards)[key]

    return get


def study_metrics(family, wildcards=None):
    """metrics.json of every planned run of `family` (waits for the plan): what the named targets need.

    In a wsd study a finished segment's point file that is gone is said in one line: nothing the targets
    need waits on it, so Snakemake leaves it (naming it as a target puts it back, as does a new job that
    starts from it); making it again here would rerun every job after it (restored, not trained).
    """
    if TRAIN_OPTIONS.schedule == "wsd" and not retraining():
        for path in wsd_lost_points(family):  # rules/wsd_common.smk
            say_once(f"{path} is gone: the runs after it are finished, so nothing needs it now; `snakemake {path}` "
                     "puts it back (from its segment's final/, else by training that segment again), and so does "
                     "any new job that starts from it", warning=True)
    if not retraining():  # a finished run's weights gone: nothing reruns it, so say it
        for line in lost_finals(f"{STUDY}/{family}", plan_rows(family), TRAIN_OPTIONS.schedule):
            say_once(line, warning=True)
    return run_metrics(family)


def run_metrics(family):
    """metrics.json of every planned run of `family` (waits for the plan)."""
    return [f"{STUDY}/{family}/runs/{run_id}/metrics.json" for run_id in plan_rows(family)]


def stop(line):
    """Stop the workflow with one line: Snakemake prints a SystemExit's text while it builds the DAG,
    but drops it while jobs run (a checkpoint's re-evaluation), so it is logged there first."""
    if workflow.scheduler is not None:
        logger.error(line)
    raise SystemExit(line)


def fit_inputs(wildcards):
    """The runs table; a plan that cannot be fitted, or a table changed by hand, stops the workflow
    here, while its DAG is built: a fit job failing on them would first have lost the previous fit."""
    family = wildcards.family
    csv = f"{STUDY}/{family}/runs.csv"
    line = too_few_budgets(family, BUDGETS)  # fewer in the config than a fit needs: said before the plan exists
    if not line:
        rows = plan_rows(family)
        line = too_few_budgets(family, sorted({budget_str(row["budget"]) for row in rows.values()}, key=float))
        line = line or table_problem(csv, {run_id: f"{STUDY}/{family}/runs/{run_id}/metrics.json" for run_id in rows})
    if line:
        stop(line)
    return csv


def train_priority(wildcards):
    """Longer runs first (their planned steps); 0 while the plan is not there yet."""
    try:
        return int(plan_row(wildcards)["steps"])
    except Exception:  # noqa: BLE001 - the checkpoint is still pending: any order will do
        return 0


def planned_metrics(wildcards):
    """What collect aggregates: every planned run of the family (the plan names them)."""
    return run_metrics(wildcards.family)


# ---- resources of training jobs (PBS on the cluster) --------------------------
#
# Each training job requests the walltime its plan estimate needs (prism.launch.walltime):
# the estimate x cluster.walltime_factor, whole minutes, at least cluster.min_walltime, at
# most the cap (cluster.walltimes[backbone], else cluster.walltime: the queue's limit). A job
# whose estimate exceeds the cap requests the cap and resumes from its checkpoint when resubmitted.


def _backbone_of(wildcards):
    # From the run id (or a wsd segment's trajectory id, which starts alike), so the node count
    # never waits on the plan (Snakemake cannot evaluate resources of a job whose checkpoint
    # is pending).
    return (getattr(wildcards, "run_id", None) or wildcards.traj).split("-", 1)[0]


def backbone_nodes(backbone):
    cluster = config["cluster"]
    return int(cluster["nodes_by_backbone"].get(backbone, cluster["nodes"]))


def backbone_cap(backbone):
    cluster = config["cluster"]
    return cluster["walltimes"].get(backbone, cluster["walltime"])


def train_nodes(wildcards):
    return backbone_nodes(_backbone_of(wildcards))


def job_estimate_s(wildcards):
    """The plan's estimate of this training job's steps in seconds; None while the plan is pending or has none."""
    try:
        if TRAIN_OPTIONS.schedule == "wsd":
            return wsd_job_estimate_s(wildcards)  # rules/wsd_common.smk
        return run_estimate_s(plan_row(wildcards), train_nodes(wildcards))
    except Exception:  # noqa: BLE001 - the checkpoint is pending: the job is evaluated again after it
        return None


def request_s(estimate_s, backbone):
    cluster = config["cluster"]
    return requested_seconds(estimate_s, cluster["walltime_factor"], cluster["min_walltime"], backbone_cap(backbone))


def training_args(row, data, out, calibration, **settings):
    """A training job's run, as `prism train` flags: its plan row (or a wsd segment's), with the settings
    of TRAIN_OPTIONS that decide its numbers and the job's own `settings` over them. A param: a rerun
    trigger. Where and how the job runs are its resources (rules/training.smk), which retrain nothing."""
    return run_args(row, data=data, out=out, calibration=calibration,
                    **{**TRAIN_OPTIONS.run_settings(), **LOADER_OPTIONS.run_settings(), **settings})


def tracker_args(wildcards):
    """The trackers' `prism train` flags: a resource, not a param, so turning them on retrains nothing.

    Every run of a study logs into STUDY/tracking under one group, STUDY-FAMILY-REGIME.
    """
    if not TRAIN_OPTIONS.trackers:
        return ""
    group = f"{Path(STUDY).resolve().name}-{wildcards.family}-{REGIME}"
    return shlex.join(["--trackers", TRAIN_OPTIONS.trackers, "--tracker-dir", f"{STUDY}/tracking",
                       "--tracker-group", group, "--tracker-project", TRAIN_OPTIONS.tracker_project])


def train_walltime(wildcards):
    return walltime_text(request_s(job_estimate_s(wildcards), _backbone_of(wildcards)))


def walltime_minutes(walltime):
    return -(-walltime_seconds(walltime) // 60)


def training_jobs(family, rows):
    """(backbone, nodes, estimated seconds) of every training job of the plan's `rows`."""
    if TRAIN_OPTIONS.schedule == "wsd":
        return wsd_training_jobs(family, rows)  # rules/wsd_common.smk
    return [(r["backbone"], backbone_nodes(r["backbone"]), run_estimate_s(r, backbone_nodes(r["backbone"])))
            for r in rows.values()]


def requested_text(family, rows):
    """One line: node-hours the training jobs request on a cluster beside those estimated, and the jobs over the cap."""
    jobs = training_jobs(family, rows)
    cluster = config["cluster"]
    requested = sum(n * request_s(est, b) for b, n, est in jobs) / 3600
    known = [n * est for b, n, est in jobs if est is not None]
    estimated = f"{sum(known) / 3600:.3g}" if len(known) == len(jobs) else "unknown"
    over = [pieces(est, backbone_cap(b)) for b, n, est in jobs if pieces(est, backbone_cap(b)) > 1]
    text = (
        f"plan {family}: {len(jobs)} training jobs request {requested:.3g} node-hours as cluster jobs for "
        f"{estimated} node-hours estimated (walltime = estimate x {cluster['walltime_factor']:g}, "
        f">= {cluster['min_walltime']}, <= {cluster['walltime']}"
        + (f" or cluster.walltimes" if cluster["walltimes"] else "") + ")"
    )
    if over:
        text += (f"; {len(over)} job(s) need up to {max(over)} walltimes each, resumed from their checkpoints "
                 f"(retries: 1 gives 2 a call: add --retries {max(over) - 1})")
    return text


# ---- named targets -------------------------------------------------------------


def fit_outputs(family):
    return [f"{STUDY}/{family}/fit/{REGIME}.{ext}" for ext in ("json", "md", "html")]


def study_records(family):
    """The plan and the runs table: safe to delete, made again by the targets that name them."""
    return [f"{STUDY}/{family}/plan.yaml", f"{STUDY}/{family}/runs.csv"]


PLOT_FILES = ("isoflop_curves.png", "scaling_laws.png", "approach3_fit.png", "training_curves.png", "answer.html")


def plot_outputs(family):
    """Every file the plot job writes (rules/plot.smk), each one an output of its own."""
    return [f"{STUDY}/{family}/plots/{REGIME}/{name}" for name in PLOT_FILES]


def plot_figure(name, caption):
    """One figure of the plot job as a report item of Results > Plots."""
    return report(
        f"{STUDY}/{{family}}/plots/{{regime}}/{name}.png",
        caption=caption,
        category="Plots",
        subcategory="{family}",
        labels={"family": "{family}", "regime": "{regime}", "figure": name},
    )


def fitted_family_dirs():
    """Family folders with a fit: what the end-of-run summary reads."""
    return [f"{STUDY}/{family}" for family in FAMILIES if Path(STUDY, family, "fit").is_dir()]


# ---- the worker -----------------------------------------------------------------

WORKER = {}


def start_worker():
    """Jobs that run here get one `prism worker serve`: their `prism` commands run in children
    forked from it, torch imported once per invocation instead of once per job (prism/worker.py).
    A job that cannot reach it runs in its own process, as on a cluster, where none is started."""
    if not config["worker"] or not workflow.local_exec:
        return
    folder = Path(tempfile.mkdtemp(prefix="prism-worker-"))  # short: a Unix socket path has ~100 bytes
    Path(logfile("worker")).parent.mkdir(parents=True, exist_ok=True)
    with open(logfile("worker"), "a") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "prism", "worker", "serve", "--socket", str(folder / "socket"),
             "--parent", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    WORKER.update(process=process, folder=folder)
    # Jobs start once it listens (its imports take seconds), so that the first ones use it too.
    deadline = time.monotonic() + 60
    while not (folder / "socket").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.environ[WORKER_ENV] = str(folder / "socket")


def stop_worker():
    """Stop the worker (its running children finish on their own) and remove its socket."""
    os.environ.pop(WORKER_ENV, None)
    process = WORKER.pop("process", None)
    if process is not None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    folder = WORKER.pop("folder", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
