"""A run's identity: every value that decides what it computes, defaults resolved, as one record and a hash.

A run's command leaves out every setting at its default, so the command alone cannot tell a
run trained under one library default (the learning-rate rule, the warm-up fraction, the
optimizer's constants) from one trained under the next. The identity can: it holds each
setting's value whether given or defaulted, a derived default resolved to its value where that
needs no input (the lr rule at the run's width) or to the rule's constant where it needs one (the
warm-up is a fraction of steps that the calibration decides), and the constants of the maths that
no setting names. Its hash is the workflow's rerun trigger (a `params:` value of every training
rule) and the record is kept in the run directory (`config.yaml`'s `resolved.identity`,
`final/finished.json`), so a run whose identity changed is trained again, neither restored nor
resumed.

What does not change the numbers is left out (`NOT_IDENTITY`): where the run's files are (their
content is the input fingerprint, `prism.train.rundir.resume.input_fingerprint`), where and how it
runs (device, parallel layout, compilation, threads) and what it reports on the way (logging and
checkpoint cadence, trackers). So moving, parallelising or watching a run retrains nothing.

Pure Python: the workflow computes it for every job while building its DAG.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from typing import Any

from prism.core.atomic import json_safe
from prism.model.config import backbone_config
from prism.train import lr_schedule
from prism.train.config import EVALS_PER_RUN, RunConfig

# The RunConfig fields that are not part of a run's identity, and why. Every other field is, so a
# field added to RunConfig counts until it is named here.
NOT_IDENTITY = {
    "data": "a path; the shards' content is the run's input fingerprint",
    "out": "where the run's files are",
    "calibration": "a path; the record's content is the run's input fingerprint",
    "calibration_dir": "a path; the record's content is the run's input fingerprint",
    "strategy": "how the ranks share the work, not what they compute",
    "replicate": "how the ranks share the work",
    "shard": "how the ranks share the work",
    "device": "where the run computes; the precision it resolves to is checked when a checkpoint is read",
    "compile": "the same maths, compiled or not",
    "grad_checkpoint": "the same maths, activations recomputed instead of kept",
    "micro_batch": "the same update, accumulated over micro-batches",
    "threads": "how many cores compute it",
    "log_every": "how often perf.jsonl gets a row",
    "checkpoint_every": "where a killed run can resume from",
    "trackers": "where the scalars are also sent",
    "tracker_dir": "where the scalars are also sent",
    "tracker_group": "where the scalars are also sent",
    "tracker_project": "where the scalars are also sent",
}
# The number of characters of the hash the workflow uses as its rerun trigger.
HASH_CHARS = 12


# The fields a schedule does not read: a cosine run has no cooldown.
UNUSED_BY_SCHEDULE = {"cosine": ("cooldown_fraction", "cooldown_shape"), "wsd": ()}


def identity_fields(config: RunConfig) -> tuple[str, ...]:
    """The RunConfig fields that are part of this run's identity."""
    unused = UNUSED_BY_SCHEDULE.get(config.schedule, ())
    return tuple(f.name for f in fields(RunConfig) if f.name not in NOT_IDENTITY and f.name not in unused)


def _resolved_defaults(config: RunConfig) -> dict[str, Any]:
    """The value (or, where the value needs an input, the rule's constant) of each setting left to its default."""
    out: dict[str, Any] = {}
    if config.lr is None:  # the hand rule at this width (prism.train.budget.step_budget uses the same)
        out["lr"] = lr_schedule.default_lr(backbone_config(config.backbone).d_model)
    if config.warmup is None:  # a fraction of the steps, which the calibration's FLOPs decide
        out["warmup_fraction"] = lr_schedule.WARMUP_FRACTION
    if config.eval_every is None:
        out["evals_per_run"] = EVALS_PER_RUN
    return out


def _constants(config: RunConfig) -> dict[str, Any]:
    """The constants of the run's maths that no setting names: the optimizer's, the cosine decay's floor."""
    out: dict[str, Any] = {
        "adamw_betas": list(lr_schedule.BETAS),
        "adamw_eps": lr_schedule.EPS,
        "weight_decay": lr_schedule.WEIGHT_DECAY,
    }
    if config.schedule == "cosine":
        out["final_lr_fraction"] = lr_schedule.FINAL_LR_FRACTION
    return out


def run_identity(config: RunConfig) -> dict[str, Any]:
    """The run's identity: its identity fields (defaults included), resolved defaults and constants, JSON-safe."""
    record = {name: getattr(config, name) for name in identity_fields(config)}
    record.update(_resolved_defaults(config))
    record.update(_constants(config))
    return json_safe(record)


def identity_hash(record: dict[str, Any]) -> str:
    """A short sha256 of an identity record as sorted JSON: the same in every process and on every host."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def run_hash(config: RunConfig) -> str:
    """`identity_hash` of the run's identity: the workflow's rerun trigger of a training job."""
    return identity_hash(run_identity(config))


def identity_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """`name: old -> new` for each value on which two identity records differ (one it lacks, too)."""
    names = list(new) + [name for name in old if name not in new]
    return [f"{name}: {old.get(name)!r} -> {new.get(name)!r}" for name in names if old.get(name) != new.get(name)]
