"""Each job's `prism` flags, one function per command: a new option of a command is one edit here.

Results-deciding flags are params of their rules (rerun triggers); how and where a job runs
(trackers, devices, nodes) are resources, which retrain nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prism.core.options import as_args
from prism.isoflop.design.placement import study_devices
from prism.isoflop.design.tuning import RULE_PREFIX, study_rule
from prism.isoflop.runs.launch import run_config, run_flags
from prism.train.config import RunConfig
from prism.workflow.probe import probe_file, probed
from prism.workflow.study import Study


def data_command(study: Study, family: str) -> list[str]:
    """`prism data` verb and flags of a family's data: its index where `data.shards` names a folder, else
    the offline build (only the flags that decide its bytes: rerun triggers)."""
    data = study.config["data"]
    shards = study.shards_dir(family)
    if shards:
        return ["index", shards, "--family", family, "--eval-fraction", str(data["eval_fraction"]),
                "--max-bad-fraction", str(data["max_bad_fraction"]), *study.spec_flags[family],
                *study.loader.index_args()]  # fmt: skip
    return ["build", "--family", family, "--seed", str(data["seed"]), "--lm-ratio", str(data["lm_ratio"]),
            *study.spec_flags[family]]  # fmt: skip


def data_threads(study: Study, family: str) -> int:
    """The index decodes shards in parallel; the build uses one process."""
    return 8 if study.shards_dir(family) else 1


def lr_tokens(study: Study) -> str:
    """The tokens a rule's lr is taken at: a size's mean under wsd (one lr per trajectory), else the run's.
    The hand rule has no tokens exponent: its runs' own."""
    return "size" if study.tune.rule != "hand" and study.train.schedule == "wsd" else "run"


def lr_rule_flags(study: Study, family: str) -> list[str]:
    """The plan's lr-rule flags: none for the hand rule (a default study's plan job is unchanged)."""
    tune = study.tune
    per_size = ["--lr-tokens", "size"] if lr_tokens(study) == "size" else []
    if tune.rule == "given":
        return [*as_args(tune, ("rule", "lr_c", "lr_p", "lr_q"), RULE_PREFIX), *per_size]
    if tune.rule == "fitted":
        rule_file = ["--lr-rule-file", study.lr_rule_file(family)]
        return [*as_args(tune, ("rule",), RULE_PREFIX), *rule_file, *as_args(tune, ("margin",), RULE_PREFIX), *per_size]
    return []


def plan_arguments(study: Study, family: str, read_rule: bool = True) -> dict[str, Any]:
    """The arguments of `plan_runs`; `plan_command` passes exactly these as flags (the lr rule as
    `lr_rule_flags`: without `read_rule`, a fitted rule's file is not read, it may not exist yet)."""
    return dict(
        family=family,
        budgets=[float(b) for b in study.budgets],
        calibration_dir=study.calibration_dir(),
        data=study.data_dir(family),
        options=study.plan,
        regime=study.regime,
        backbones=list(study.config["backbones"]),
        variants=list(study.config["variants"]),
        job_ranks=study.job_ranks,
        ranks_per_node=study.node_ranks,
        spec=study.specs[family],
        devices=study_devices(
            study.cluster, study.train.launcher, study.train.device, study.train.precision, study.train.strategy
        ),
        # Read here: a fitted rule's file is an input of the plan (the tuning stage writes it).
        lr_rule=study_rule(study.tune, study.lr_rule_file(family)) if read_rule else None,
        # A probed cluster study's plan prices its jobs by the probe's record (once it exists).
        probe=probe_file(study, family) if probed(study) else None,
        lr_tokens=lr_tokens(study),
        batch_law=study.tune.batch_law,
    )


def plan_command(study: Study, family: str) -> list[str]:
    """`plan_arguments` as `prism isoflop plan` flags (but --family, a wildcard in the rule)."""
    args = plan_arguments(study, family, read_rule=False)
    return [
        "--budgets", ",".join(study.budgets),
        "--calibration-dir", args["calibration_dir"],
        "--data", args["data"],
        "--regime", args["regime"],
        # None: the rule's sizes only (an empty value would not survive the shell quoting).
        *(["--backbones", ",".join(args["backbones"])] if args["backbones"] else []),
        "--variants", ",".join(args["variants"]),
        *as_args(args["options"]),
        *(["--job-ranks", str(study.job_ranks)] if study.job_ranks > 1 else []),
        # Node-hours from the measured speed of one of a node's ranks (a cluster study that times its steps).
        *(["--ranks-per-node", str(study.node_ranks)] if study.node_ranks else []),
        *(["--probe", args["probe"]] if args["probe"] else []),
        # What the grid costs as wsd trajectories (plan.yaml `schedules`); no run depends on it.
        "--cooldown-fraction", str(study.train.cooldown_fraction),
        # The family's shape and tokenizer (`spec`) where not the laptop's (`shapes`, `data.tokenizer`).
        *study.spec_flags[family],
        # Where each run trains (the devices' memory, the nodes a run may take): none for a local study.
        *args["devices"].flags(),
        *lr_rule_flags(study, family),
        # The critical-batch law, only where the study chooses it (tune.batch_rule compute).
        *(["--batch-law", *map(str, args["batch_law"])] if args["batch_law"] else []),
    ]  # fmt: skip


def training_run(
    study: Study, row: Mapping[str, Any], data: str, out: str, calibration: str, **settings: Any
) -> RunConfig:
    """A training job's run: its plan row (or a wsd segment's), with the settings of the study's `train:`
    that decide its numbers and the job's own `settings` over them. Its flags (`run_flags`) and its identity
    hash (`prism.train.identity.run_hash`) are params: rerun triggers (the loader's settings too: they decide
    the sample order). Where and how the job runs are its resources (`tracker_command`, rules/training.smk)."""
    shared = {**study.train.run_settings(), **study.loader.run_settings()}
    return run_config(row, data=data, out=out, calibration=calibration, **{**shared, **settings})


def training_command(
    study: Study, row: Mapping[str, Any], data: str, out: str, calibration: str, **settings: Any
) -> str:
    """`training_run`'s `prism train` flags."""
    return run_flags(training_run(study, row, data, out, calibration, **settings))


def tracker_command(study: Study, family: str) -> str:
    """The trackers' `prism train` flags: a resource, not a param, so turning them on retrains nothing.

    Every run of a study logs into STUDY/tracking under one group, STUDY-FAMILY-REGIME.
    """
    train = study.train
    if not train.trackers:
        return ""
    group = f"{Path(study.dir).resolve().name}-{family}-{study.regime}"
    return shlex.join(["--trackers", train.trackers, "--tracker-dir", f"{study.dir}/tracking",
                       "--tracker-group", group, "--tracker-project", train.tracker_project])  # fmt: skip


def calibrate_flags(study: Study, family: str) -> list[str]:
    """`prism isoflop calibrate` flags of the speed job (the timed steps, in the runs' precision), with the
    family's shape flags; `auto` precision is the flag's default, so a default study's jobs are unchanged."""
    precision = [] if study.train.precision == "auto" else ["--precision", study.train.precision]
    return as_args(study.calibrate) + precision + study.spec_flags[family]


def collect_flags(study: Study) -> list[str]:
    return as_args(study.collect)


def fit_flags(study: Study) -> list[str]:
    return as_args(study.fit)


def plot_flags(study: Study) -> list[str]:
    return as_args(study.plot)


def summary_command(study: Study) -> str | None:
    """The end-of-run summary of every fitted family (it only reads files), or None when none is fitted."""
    dirs = study.fitted_family_dirs()
    return "prism isoflop summary " + " ".join(shlex.quote(d) for d in dirs) if dirs else None
