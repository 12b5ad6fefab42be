"""A run's identity: every value that decides what it computes, defaults resolved; nothing cosmetic."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from prism.train import lr_schedule
from prism.train.config import RunConfig
from prism.train.identity import NOT_IDENTITY, identity_changes, run_hash, run_identity

RUN = RunConfig(family="text_image", backbone="n16e3", variant="BASE", regime="e2e", budget=1.5e11, data="d", out="o")


def test_the_hash_is_the_same_in_another_process():
    """The workflow's trigger is compared across Snakemake calls: no per-process hashing may leak in."""
    code = (
        "from prism.train.config import RunConfig; from prism.train.identity import run_hash; "
        "print(run_hash(RunConfig(family='text_image', backbone='n16e3', variant='BASE', regime='e2e', "
        "budget=1.5e11, data='d', out='o')))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "123"}
    )
    assert other.stdout.strip() == run_hash(RUN)


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 1},
        {"global_batch": 64},
        {"budget": 3e11},
        {"lr": 0.002},
        {"warmup": 7},
        {"precision": "bf16"},
        {"eval_samples": 128},
        {"final_eval_samples": 512},
        {"layout": "packed"},
        {"schedule": "wsd"},
    ],
)
def test_a_setting_that_changes_the_numbers_changes_the_hash(change):
    assert run_hash(dataclasses.replace(RUN, **change)) != run_hash(RUN)


@pytest.mark.parametrize(
    ("constant", "value", "named"),
    [
        ("BASE_LR", 4e-3, "lr"),
        ("WARMUP_FRACTION", 0.1, "warmup_fraction"),
        ("FINAL_LR_FRACTION", 0.05, "final_lr_fraction"),
        ("WEIGHT_DECAY", 0.0, "weight_decay"),
    ],
)
def test_a_changed_library_default_changes_the_hash_and_is_named(monkeypatch, constant, value, named):
    before, before_hash = run_identity(RUN), run_hash(RUN)
    monkeypatch.setattr(lr_schedule, constant, value)
    assert run_hash(RUN) != before_hash
    assert [change.split(":")[0] for change in identity_changes(before, run_identity(RUN))] == [named]


def test_a_library_default_the_run_does_not_use_changes_nothing(monkeypatch):
    """A given lr and warm-up do not depend on the rule's constants; a wsd run has no cosine floor and a
    cosine run no cooldown."""
    given = dataclasses.replace(RUN, lr=0.01, warmup=5)
    wsd = dataclasses.replace(given, schedule="wsd")
    before = run_hash(given), run_hash(wsd)
    monkeypatch.setattr(lr_schedule, "WARMUP_FRACTION", 0.1)
    assert run_hash(given) == before[0]
    monkeypatch.setattr(lr_schedule, "BASE_LR", 4e-3)
    assert run_hash(given) == before[0]
    monkeypatch.setattr(lr_schedule, "FINAL_LR_FRACTION", 0.05)
    assert run_hash(wsd) == before[1]
    assert run_hash(dataclasses.replace(RUN, cooldown_fraction=0.5, cooldown_shape="linear")) == run_hash(RUN)


def test_a_default_given_explicitly_is_the_same_run():
    resolved = run_identity(RUN)["lr"]
    assert run_hash(dataclasses.replace(RUN, lr=resolved, global_batch=32, layout="padded")) == run_hash(RUN)


COSMETIC = {
    "data": "elsewhere/data",
    "out": "elsewhere/run",
    "calibration": "c.json",
    "strategy": "ddp",
    "replicate": 2,
    "shard": 2,
    "device": "cpu",
    "compile": "none",
    "grad_checkpoint": 1,
    "micro_batch": 8,
    "threads": 3,
    "log_every": 1,
    "checkpoint_every": 5,
    "trackers": "tensorboard",
    "tracker_dir": "t",
    "tracker_group": "g",
    "tracker_project": "p",
}


@pytest.mark.parametrize("name", sorted(COSMETIC))
def test_where_and_how_a_run_computes_changes_nothing(name):
    assert run_hash(dataclasses.replace(RUN, **{name: COSMETIC[name]})) == run_hash(RUN)


def test_every_field_left_out_is_a_field_and_says_why():
    names = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(NOT_IDENTITY) <= names and all(NOT_IDENTITY.values())
    assert set(COSMETIC) | {"calibration_dir"} == set(NOT_IDENTITY)  # each one tested above
    assert not set(NOT_IDENTITY) & set(run_identity(RUN))


def test_the_changes_name_each_value():
    before = run_identity(RUN)
    after = run_identity(dataclasses.replace(RUN, seed=2))
    assert identity_changes(before, after) == ["seed: 0 -> 2"]
