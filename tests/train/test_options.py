"""TrainOptions: the settings a study's runs share, defined once for RunConfig, `prism train` and the workflow."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

import prism.launch  # noqa: F401 - registers the launchers, the `launcher` option's choices
from prism.cli import build_parser
from prism.core.errors import PrismError
from prism.core.options import add_arguments, from_mapping
from prism.train.config import RunConfig
from prism.train.options import LAUNCH_SETTINGS, RESULT_SETTINGS, TrainOptions


def _train_parser():
    sub = next(a for a in build_parser()._actions if a.dest == "group")
    return sub.choices["train"]


def test_a_run_takes_the_shared_settings_from_the_options():
    """RunConfig's fields of the same names have the options' defaults, help and choices (one definition);
    the options that are no RunConfig field are `prism train`'s launching flags, with the options' defaults."""
    runs = {f.name: f for f in dataclasses.fields(RunConfig)}
    launch = {a.dest: a for a in _train_parser()._actions}
    for f in dataclasses.fields(TrainOptions):
        if f.name in LAUNCH_SETTINGS:
            assert f.name not in runs
            assert (launch[f.name].default, tuple(launch[f.name].choices)) == (f.default, tuple(f.metadata["choices"]))
            continue
        shared = runs[f.name]
        assert (shared.default, shared.metadata["help"]) == (f.default, f.metadata["help"]), f.name
        assert shared.metadata.get("choices") == f.metadata.get("choices"), f.name
        assert f"(default: {f.default})" in launch[f.name].help or f.default is None, f.name


def test_run_settings_are_what_decides_a_runs_numbers():
    """What the workflow puts in a run's command (its rerun trigger); a cosine run has no cooldown."""
    wsd = from_mapping(TrainOptions, {"schedule": "wsd", "seed": 3, "eval_samples": 64}, "config train")
    assert wsd.run_settings() == {
        "seed": 3,
        "schedule": "wsd",
        "cooldown_fraction": 0.2,
        "eval_samples": 64,
        "final_eval_samples": None,
        "precision": "auto",
    }
    assert set(wsd.run_settings()) == set(RESULT_SETTINGS)
    assert "cooldown_fraction" not in TrainOptions(cooldown_fraction=0.3).run_settings()
    RunConfig(
        family="text_image", backbone="30k", variant="BASE", regime="e2e", budget=3e11, data="d", out="o",
        **wsd.run_settings(),
    )  # fmt: skip


def test_a_trackers_list_is_the_flags_comma_separated_names():
    assert from_mapping(TrainOptions, {"trackers": ["tensorboard", "wandb"]}, "t").trackers == "tensorboard,wandb"
    assert from_mapping(TrainOptions, {"trackers": []}, "t").trackers is None
    with pytest.raises(PrismError, match="unknown tracker 'mlflow'"):
        from_mapping(TrainOptions, {"trackers": ["mlflow"]}, "config train")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"cooldown_fraction": 1.5}, "--cooldown-fraction must be <= 1"),
        ({"eval_samples": 0}, "--eval-samples must be >= 1"),
        ({"launcher": "lsf"}, "--launcher: 'lsf' is not one of local, torchrun, aurora, slurm"),
        ({"eval_sample": 64}, "config train: unknown key(s) eval_sample"),
    ],
)
def test_a_bad_section_is_one_line_naming_the_key(section, message):
    with pytest.raises(PrismError, match=re.escape(message)):
        from_mapping(TrainOptions, section, "config train")


def test_add_arguments_can_take_some_fields():
    parser = argparse.ArgumentParser()
    add_arguments(parser, TrainOptions, ("seed", "storage"))
    assert vars(parser.parse_args(["--storage", "daos"])) == {"seed": 0, "storage": "daos"}
