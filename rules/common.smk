# Python helpers of the workflow: config access, wildcard constraints, and the
# input/params functions that read the plan (a checkpoint). No rules here.

import shlex
import sys
from pathlib import Path

import yaml

from prism.families import FAMILIES
from prism.ids import format_budget
from prism.model.config import BACKBONES, REGIMES, VARIANTS

# Rules call `prism`: find the one installed beside the Python running Snakemake
# (`.venv/bin/snakemake` works without activating the venv, here and in PBS jobs).
shell.prefix(f'set -euo pipefail; export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"; ')

STUDY = config["study_dir"].rstrip("/")
REGIME = config["regime"]


def budget_str(value):
    """The canonical spelling of a budget, as run ids use it: 3e11, 1e12, 2.5e17 (the planner's own)."""
    return format_budget(float(value))


BUDGETS = sorted({budget_str(b) for b in config["budgets"]}, key=float)


def _alternatives(names):
    return "|".join(sorted(names, key=len, reverse=True))


# Wildcards can only ever be these names: a run id or a family cannot smuggle
# anything into a command line (and values are shell-quoted as well).
wildcard_constraints:
    family=_alternatives(FAMILIES),
    backbone=_alternatives(BACKBONES),
    variant=_alternatives(VARIANTS),
    regime=_alternatives(REGIMES),
    budget=r"[0-9]+(\.[0-9]+)?e[0-9]+",
    run_id=r"[0-9a-z]+-[A-Z0-9]+-[a-z0-9_]+-C[0-9]+(\.[0-9]+)?e[0-9]+",


# ---- paths -------------------------------------------------------------------


def data_dir(family):
    return f"{STUDY}/data/{family}"


def calibration_file(family, backbone, variant, regime):
    return f"{STUDY}/calibration/{family}__{backbone}__{variant}__{regime}.json"


def study_calibrations(wildcards):
    """Every candidate's calibration: the plan chooses among them."""
    return [
        calibration_file(wildcards.family, b, v, REGIME)
        for b in config["backbones"]
        for v in config["variants"]
    ]


def logfile(*parts):
    return str(Path(STUDY, "logs", *parts)) + ".log"


# ---- the plan (a checkpoint) -------------------------------------------------


def plan_options():
    """The planner flags the config sets, as an argument list (quoted one by one in the shell)."""
    flags = {
        "global_batch": "--global-batch",
        "prior_a": "--prior-a",
        "prior_k": "--prior-k",
        "window": "--window",
        "min_steps": "--min-steps",
        "previous_round": "--scaling-study-dir",
    }
    args = []
    for key, flag in flags.items():
        value = config["plan"][key]
        if value is not None:
            args += [flag, str(value)]
    return args


def plan_rows(family):
    """The planned runs of `family`, by run id.

    Calling `checkpoints.plan.get` makes the caller wait for the plan (Snakemake
    re-evaluates the DAG once it exists) without making plan.yaml an input: adding
    a budget re-plans, but runs whose plan rows did not change are not retrained.
    """
    plan_file = checkpoints.plan.get(family=family).output.plan
    with open(plan_file) as f:
        plan = yaml.safe_load(f) or {}
    return {row["run_id"]: row for row in plan.get("runs") or []}


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
    return {
        "data": data_dir(wildcards.family),
        "calibration": calibration_file(wildcards.family, row["backbone"], row["variant"], row["regime"]),
    }


def row_value(key):
    """A params function returning one field of this run's plan row (a rerun trigger when it changes)."""

    def get(wildcards):
        return plan_row(wildcards)[key]

    return get


def study_metrics(family, wildcards=None):
    """metrics.json of every planned run of `family` (waits for the plan)."""
    return [f"{STUDY}/{family}/runs/{run_id}/metrics.json" for run_id in plan_rows(family)]


def train_priority(wildcards):
    """Longer runs first (their planned steps); 0 while the plan is not there yet."""
    try:
        return int(plan_row(wildcards)["steps"])
    except Exception:  # noqa: BLE001 - the checkpoint is still pending: any order will do
        return 0


def planned_metrics(wildcards):
    """What collect aggregates: every planned run of the family."""
    return study_metrics(wildcards.family)


# ---- resources of training jobs (PBS on the cluster) --------------------------


def _backbone_of(wildcards):
    # From the run id, so resources never wait on the plan (Snakemake cannot evaluate
    # resources of a job whose checkpoint is pending).
    return wildcards.run_id.split("-", 1)[0]


def train_nodes(wildcards):
    cluster = config["cluster"]
    return int(cluster["nodes_by_backbone"].get(_backbone_of(wildcards), cluster["nodes"]))


def train_walltime(wildcards):
    cluster = config["cluster"]
    return cluster["walltimes"].get(_backbone_of(wildcards), cluster["walltime"])


def walltime_minutes(walltime):
    hours, minutes, seconds = (int(x) for x in walltime.split(":"))
    return hours * 60 + minutes + (1 if seconds else 0)


# ---- named targets -------------------------------------------------------------


def fit_outputs(family):
    return [f"{STUDY}/{family}/fit/{REGIME}.json", f"{STUDY}/{family}/fit/{REGIME}.md"]


def plot_outputs(family):
    return [f"{STUDY}/{family}/plots/{REGIME}"]
