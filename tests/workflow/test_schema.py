"""config/schema.yaml against the code: option sections are the option dataclasses, enums are the
registries, defaults are config/config.yaml's values, and paths and budgets are range-checked (fast)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml
from jsonschema import Draft202012Validator

from prism.families import FAMILIES
from prism.isoflop.calibrate import CalibrateOptions
from prism.isoflop.collect import CollectOptions
from prism.isoflop.fit import METHODS as FIT_METHODS
from prism.isoflop.fit import FitOptions
from prism.isoflop.options import PlotOptions
from prism.isoflop.plan import PlanOptions
from prism.launch import STORAGES
from prism.model.config import BACKBONES, REGIMES, VARIANTS
from prism.model.sizes import RULE_NAME_PATTERN, VARIANT_NAME_PATTERN
from prism.options import from_mapping
from prism.train.config import DEVICES, STRATEGIES
from prism.train.schedule import SCHEDULES

from .wfhelpers import REPO

SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
SECTIONS = {"calibrate": CalibrateOptions, "plan": PlanOptions, "collect": CollectOptions, "fit": FitOptions,
            "plot": PlotOptions}


@pytest.mark.parametrize(("section", "cls"), SECTIONS.items())
def test_option_sections_are_the_dataclasses(section, cls):
    props = SCHEMA["properties"][section]["properties"]
    assert list(props) == [f.name for f in dataclasses.fields(cls)], section
    assert list(CONFIG[section]) == list(props), f"config.yaml {section}: same keys in the same order"
    from_mapping(cls, CONFIG[section], f"config {section}")  # config.yaml's values are valid options
    for f in dataclasses.fields(cls):
        if f.metadata.get("choices"):
            assert tuple(props[f.name]["enum"]) == tuple(f.metadata["choices"])


def _defaults(schema: dict, config: dict, where: str):
    for key, prop in schema.get("properties", {}).items():
        if key in config and "default" in prop:
            if isinstance(config[key], dict) and prop.get("type") == "object" and "properties" in prop:
                _defaults(prop, config[key], f"{where}.{key}")
            else:
                yield f"{where}.{key}", prop["default"], config[key]


def test_schema_defaults_are_config_yaml_values():
    """Deleting a key from config.yaml changes nothing: the schema fills in the same value."""
    wrong = [(k, d, c) for k, d, c in _defaults(SCHEMA, CONFIG, "config") if d != c and not (
        isinstance(c, float) and d == pytest.approx(c))]
    # the default study's own choices (budgets, backbones) have no default: they are required
    assert wrong == []


def test_schema_enums_are_the_registries():
    d = SCHEMA["definitions"]
    assert set(d["family"]["enum"]) == set(FAMILIES)
    backbone, variant = (dict(kv for alt in d[key]["anyOf"] for kv in alt.items()) for key in ("backbone", "variant"))
    assert set(backbone["enum"]) == set(BACKBONES)
    assert backbone["pattern"] == f"^{RULE_NAME_PATTERN}$"
    assert set(variant["enum"]) == set(VARIANTS)
    assert variant["pattern"] == f"^{VARIANT_NAME_PATTERN}$"
    assert set(d["regime"]["enum"]) == set(REGIMES)
    train = SCHEMA["properties"]["train"]["properties"]
    assert tuple(train["strategy"]["enum"]) == STRATEGIES
    assert tuple(train["device"]["enum"]) == DEVICES
    assert tuple(train["schedule"]["enum"]) == SCHEDULES
    assert tuple(train["storage"]["enum"]) == STORAGES
    assert tuple(SCHEMA["properties"]["sweep"]["properties"]["storage"]["enum"]) == STORAGES
    assert tuple(SCHEMA["properties"]["fit"]["properties"]["method"]["enum"]) == FIT_METHODS


def _errors(override: dict) -> list[str]:
    config = {**CONFIG, **override}
    return [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(SCHEMA).iter_errors(config)]


@pytest.mark.parametrize("path", ["/", "//", "", "-rf", "--out", "a b", "x;y"])
@pytest.mark.parametrize("key", ["study_dir", "previous_round", "sweep.outputs"])
def test_bad_paths_are_refused_naming_the_key(key, path):
    override = {"plan": {**CONFIG["plan"], "previous_round": path}} if key == "previous_round" else (
        {"sweep": {**CONFIG["sweep"], "outputs": path}} if key == "sweep.outputs" else {key: path})
    errors = _errors(override)
    assert errors and key.split(".")[-1] in errors[0]


@pytest.mark.parametrize("path", ["scaling-study", "/lus/flare/projects/x/study", "../round1/text_image", "a/b.c_d"])
def test_absolute_and_relative_paths_are_allowed(path):
    assert _errors({"study_dir": path, "plan": {**CONFIG["plan"], "previous_round": path}}) == []


@pytest.mark.parametrize("budget", ["0e0", "1e400", "1e2", "0.5e12", "-1e10", "1e31", 0, 1e31, float("inf"), "lots"])
def test_budgets_out_of_range_are_refused(budget):
    errors = _errors({"budgets": ["1e12", budget]})
    assert errors and errors[0].startswith("['budgets', 1]")


@pytest.mark.parametrize("budget", ["1e3", "2.5e17", "1E+12", "1e30", 3e11, 1000])
def test_budgets_in_range_are_accepted(budget):
    assert _errors({"budgets": [budget]}) == []


def test_every_config_key_is_used_by_a_rule():
    """Two hops: a key is a field of its section's dataclass, or a name the rules read."""
    rules = "\n".join(p.read_text() for p in sorted((REPO / "rules").glob("*.smk"))) + (REPO / "Snakefile").read_text()
    for section, value in CONFIG.items():
        if section in SECTIONS:
            assert re.search(rf'config\["{section}"\]', rules), section
            continue
        assert re.search(rf'config\["{section}"\]', rules), f"config key {section} is read by no rule"
        if isinstance(value, dict) and section not in ("cluster",):
            for key in value:
                assert f'["{key}"]' in rules, f"config key {section}.{key} is read by no rule"


def test_aurora_config_is_valid_over_the_default():
    """config/aurora.yaml as `--configfile` merges it over config.yaml (PyYAML reads 5e15 as a string:
    numbers need a dot or an exponent sign, e.g. 5.03e+15)."""
    from snakemake.utils import update_config

    merged = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    update_config(merged, yaml.safe_load((REPO / "config" / "aurora.yaml").read_text()))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(SCHEMA).iter_errors(merged)]
    assert errors == []
