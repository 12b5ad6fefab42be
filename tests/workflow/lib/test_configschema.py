"""config/schema.yaml is generated from the option dataclasses: a field is a key, with nothing else to edit."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from prism.core.configtypes import problem
from prism.core.errors import PrismError
from prism.core.options import add_arguments, from_mapping, option
from prism.isoflop.fit.fit import FitOptions
from prism.workflow.configschema import SECTIONS, Section, schema, schema_yaml, section_schema

CONFIG_DIR = Path(__file__).resolve().parents[3] / "config"


def test_the_schema_file_is_current():
    assert schema_yaml() == (CONFIG_DIR / "schema.yaml").read_text(), (
        "config/schema.yaml is out of date: python tools/config_reference.py --write"
    )


@dataclass(frozen=True)
class _NewOptions:
    ratio: float = option(0.5, "a share of something", minimum=0, exclusive_maximum=1)
    name: str | None = option(None, "a name", choices=("a", "b"), doc="The name, described for the config.")
    sizes: tuple[int, ...] = option((1, 2), "sizes", schema={"type": "array", "items": {"type": "integer"}})
    table: dict[str, int] = option({}, "a mapping", schema={"type": "object", "default": {"x": 1}})


def test_a_new_field_is_a_new_key_with_its_type_bounds_choices_and_default():
    props = section_schema(Section("new", _NewOptions, "A new section."))["properties"]
    assert props["ratio"] == {
        "description": "a share of something",
        "type": "number",
        "minimum": 0,
        "exclusiveMaximum": 1,
        "default": 0.5,
    }
    assert props["name"] == {
        "description": "The name, described for the config.",
        "type": ["string", "null"],
        "enum": ["a", "b"],
        "default": None,
    }
    assert props["sizes"]["default"] == [1, 2] and props["sizes"]["type"] == "array"
    # the workflow's own default, with the library's beside it
    assert props["table"]["default"] == {"x": 1} and props["table"]["x-library-default"] == {}


def test_every_section_is_an_options_class_and_required_keys_have_no_default():
    generated = schema()
    assert [s.key for s in SECTIONS] == [k for k, p in generated["properties"].items() if "properties" in p]
    assert generated["required"] == ["backbones", "budgets"]
    for section in SECTIONS:
        assert list(generated["properties"][section.key]["properties"]) == [f.name for f in section.fields()]
        assert all(f.default is not MISSING or f.default_factory is not MISSING for f in section.fields())


def _merged(*names: str) -> dict:
    config = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
    for name in names:
        update_config(config, yaml.safe_load((CONFIG_DIR / name).read_text()))
    return config


@pytest.mark.parametrize("over", [(), ("aurora.yaml",), ("smoke.yaml",)])
def test_the_shipped_configs_are_valid(over):
    assert problem(_merged(*over), schema()) is None


@pytest.mark.parametrize(
    ("section", "value", "said"),
    [
        ("plan", {"mfu": 1.5}, "config: plan.mfu = 1.5 is not allowed; allowed: number, > 0, <= 1"),
        ("train", {"cooldown_fraction": 0}, "config: train.cooldown_fraction = 0 is not allowed"),
        ("train", {"launcher": "torchrun"}, 'config: train.launcher = "torchrun" is not allowed'),
        ("train", {"threads": None}, "config: train.threads = null is not allowed; allowed: integer, >= 1"),
        ("data", {"shards": {"text_image": "relative/path"}}, "config: data.shards.text_image"),
        ("cluster", {"ranks_per_node": 13}, "config: cluster.ranks_per_node = 13 is not allowed"),
        ("sweep", {"outputs": "/"}, 'config: sweep.outputs = "/" is not allowed; allowed: a folder'),
        ("plot", {"dpi": 601}, "config: plot.dpi = 601 is not allowed; allowed: integer, >= 50, <= 600"),
    ],
)
def test_bad_values_are_refused_in_one_line(section, value, said):
    config = _merged()
    config[section] = {**config.get(section, {}), **value}
    line = problem(config, schema())
    assert line is not None and line.startswith(said) and "\n" not in line


def test_the_old_name_of_a_renamed_key_is_refused_naming_the_new_one():
    config = _merged()
    config["fit"] = {k: v for k, v in config["fit"].items() if k != "span"} | {"window": "auto"}
    assert problem(config, schema()) == "config: fit.window is now fit.span (the same values); rename the key"
    with pytest.raises(PrismError, match=r"^config fit: window is now span \(the same values\); rename the key$"):
        from_mapping(FitOptions, {"window": "full"}, "config fit")


def test_the_old_flag_of_a_renamed_option_is_refused_naming_the_new_one(capsys):
    parser = argparse.ArgumentParser(prog="prism isoflop fit")
    add_arguments(parser, FitOptions)
    assert parser.parse_args(["--span", "full"]).span == "full"
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--window", "full"])
    assert stop.value.code == 2
    said = capsys.readouterr().err
    assert said == "prism isoflop fit: error: --window is now --span (the same values); give --span\n"
    assert "--window" not in parser.format_help()
