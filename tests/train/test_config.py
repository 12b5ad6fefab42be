"""RunConfig: flags and YAML say the same things; unknown keys and bad values are named."""

from __future__ import annotations

import pytest

from prism.core.errors import PrismError
from prism.train.config import RunConfig, compile_mode, merge

BASE = dict(family="text_image", backbone="30k", variant="BASE", regime="e2e", budget=3e11, data="d", out="o")


def test_yaml_round_trip_keeps_every_field(tmp_path):
    config = RunConfig(**BASE, strategy="hsdp", replicate=2, seed=3, lr=1e-3, max_steps=7, layout="packed")
    config.to_yaml(tmp_path / "run.yaml", resolved={"steps": 7})
    assert RunConfig.from_yaml(tmp_path / "run.yaml") == config


def test_run_id_follows_the_plan_convention():
    assert RunConfig(**BASE).run_id == "30k-BASE-e2e-C3e11"
    assert (
        RunConfig(**{**BASE, "budget": 2.5e17, "backbone": "1b", "regime": "projector_only"}).run_id
        == "1b-BASE-projector_only-C2.5e17"
    )


def test_flags_override_the_file_and_the_file_fills_the_rest(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "family: text_image\nbackbone: 30k\nvariant: BASE\nregime: e2e\nbudget: 3e11\n"
        "data: d\nout: o\nseed: 4\nglobal_batch: 16\n"
    )
    config = merge(str(path), {"seed": 9, "lr": None, "strategy": None})
    assert (config.seed, config.global_batch, config.budget, config.lr) == (9, 16, 3e11, None)


def test_unknown_key_in_the_file_is_named(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("family: text_image\nglobal_bacth: 16\n")
    with pytest.raises(PrismError, match=r"run.yaml: unknown key 'global_bacth'"):
        merge(str(path), {})


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("global_batch", "many", "key 'global_batch' must be int"),
        ("global_batch", 0, "global_batch must be >= 1, got 0"),
        ("budget", -1, "budget must be > 0, got -1"),
        ("strategy", "zero3", "unknown strategy 'zero3'"),
        ("backbone", "5m", "unknown backbone '5m'"),
        ("lr", "nan", "lr: nan is not finite"),
        ("lr", 0, "lr must be > 0, got 0"),
    ],
)
def test_bad_values_are_user_errors(key, value, needle):
    with pytest.raises(PrismError, match=needle):
        RunConfig.from_dict({**BASE, key: value})


def test_missing_required_settings_are_listed():
    with pytest.raises(PrismError, match="missing --budget, --data"):
        merge(None, {"family": "text_image", "backbone": "30k", "variant": "BASE", "regime": "e2e", "out": "o"})


def test_result_mismatch_lists_only_result_changing_fields():
    a = RunConfig(**BASE)
    b = RunConfig(**{**BASE, "seed": 1, "eval_every": 5, "device": "cpu"})
    assert b.result_mismatch(a) == ["seed: 0 -> 1"]


@pytest.mark.parametrize(
    ("setting", "device", "mode"),
    [("auto", "cuda", "static"), ("auto", "xpu", "static"), ("auto", "cpu", "none"), ("dynamic", "cpu", "dynamic")],
)
def test_compile_auto_is_static_on_an_accelerator_and_off_on_a_cpu(setting, device, mode):
    assert compile_mode(setting, device) == mode
