"""config/schema.yaml against the code: option sections are the option dataclasses, enums are the
registries, defaults are config/config.yaml's values, and paths and budgets are range-checked (fast)."""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys

import pytest
import yaml
from jsonschema import Draft202012Validator

from prism.cli import build_parser
from prism.core.families import FAMILIES
from prism.core.options import from_mapping
from prism.data.options import LoaderOptions
from prism.isoflop.design.calibrate import CalibrateOptions
from prism.isoflop.design.planoptions import PlanOptions
from prism.isoflop.design.tuning import TuneOptions
from prism.isoflop.fit.fit import METHODS as FIT_METHODS
from prism.isoflop.fit.fit import FitOptions
from prism.isoflop.present.options import PlotOptions
from prism.isoflop.runs.collect import CollectOptions
from prism.launch import LAUNCHERS, STORAGES
from prism.model.config import BACKBONES, REGIMES, VARIANTS
from prism.model.sizes import RULE_NAME_PATTERN, VARIANT_NAME_PATTERN
from prism.train.lr_schedule import SCHEDULES
from prism.train.options import DEVICES, STRATEGIES, TrainOptions

from .wfhelpers import REPO

SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
SECTIONS = {
    "calibrate": CalibrateOptions,
    "plan": PlanOptions,
    "collect": CollectOptions,
    "fit": FitOptions,
    "plot": PlotOptions,
    "train": TrainOptions,
    "tune": TuneOptions,
}


@pytest.mark.parametrize(("section", "cls"), SECTIONS.items())
def test_option_sections_are_the_dataclasses(section, cls):
    props = SCHEMA["properties"][section]["properties"]
    assert list(props) == [f.name for f in dataclasses.fields(cls)], section
    assert list(CONFIG[section]) == list(props), f"config.yaml {section}: same keys in the same order"
    from_mapping(cls, CONFIG[section], f"config {section}")  # config.yaml's values are valid options
    for f in dataclasses.fields(cls):
        if f.metadata.get("choices"):
            # A schema may allow fewer values than the library where it records the library's and says why.
            enum, said = props[f.name]["enum"], props[f.name].get("x-library-choices", props[f.name]["enum"])
            assert tuple(said) == tuple(f.metadata["choices"]) and set(enum) <= set(said), f"{section}.{f.name}"


def _defaults(schema: dict, config: dict, where: str):
    """(key, schema default, config.yaml value) of every key both give, nested sections walked key by key."""
    for key, prop in schema.get("properties", {}).items():
        if key in config and "default" in prop:
            if isinstance(config[key], dict) and prop.get("type") == "object" and "properties" in prop:
                yield from _defaults(prop, config[key], f"{where}.{key}")
            else:
                yield f"{where}.{key}", prop["default"], config[key]


def _same(a, b) -> bool:
    return a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == pytest.approx(b))


def _cli_defaults(*words: str) -> dict:
    """The defaults of `prism WORDS...`'s flags, by destination."""
    parser = build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {a.dest: a.default for a in parser._actions}


def library_defaults() -> dict[str, object]:
    """What `prism` does when a flag is not given, for every schema key that is one of its flags."""
    out = {f"data.{k}": v for k, v in _cli_defaults("data", "build").items() if k in ("seed", "lm_ratio")}
    index = _cli_defaults("data", "index")
    out.update({f"data.{k}": index[k] for k in ("eval_fraction", "max_bad_fraction")})
    out.update({f"data.{f.name}": f.default for f in dataclasses.fields(LoaderOptions)})
    for section, cls in SECTIONS.items():
        out.update({f"{section}.{f.name}": f.default for f in dataclasses.fields(cls)})
    sweep = _cli_defaults("sweep", "run")
    out.update({f"sweep.{k}": sweep[k] for k in ("storage", "outputs")})
    return out


def _prop(key: str) -> dict:
    node = SCHEMA
    for part in key.split("."):
        node = node["properties"][part]
    return node


def test_schema_defaults_are_the_librarys():
    """A key config.yaml leaves out means what the flag left out means, unless the schema says why not
    (`x-library-default` records the library's value beside the workflow's)."""
    wrong = []
    for key, library in library_defaults().items():
        prop = _prop(key)
        said = prop.get("x-library-default", prop.get("default"))
        if "default" not in prop or not _same(said, library):
            wrong.append((key, prop.get("default", "<no default>"), library))
    assert wrong == []


def test_a_nested_disagreement_is_seen():
    """The walk reaches nested keys (a generator that recursed without `yield from` compared none)."""
    found = dict((k, (d, c)) for k, d, c in _defaults(SCHEMA, {"plan": {"window": 9.0}}, "config"))
    assert found == {"config.plan.window": (_prop("plan.window")["default"], 9.0)}


def _comment_above(text: str, key: str) -> str:
    """The comment lines above `key` (dotted, under `config.`) in config.yaml's text, over the sibling
    keys between them (`prior_k` shares `prior_a`'s comment); empty where there is none."""
    lines, start, indent = text.splitlines(), 0, ""
    for part in key.removeprefix("config.").split("."):
        start = next(i for i in range(start, len(lines)) if lines[i].startswith(f"{indent}{part}:"))
        start, indent = start + 1, indent + "  "
    i, found = start - 2, []
    while i >= 0 and lines[i].startswith(indent[:-2]) and not lines[i][len(indent) - 2 :].startswith(" "):
        if lines[i].lstrip().startswith("#"):
            found.insert(0, lines[i].strip())
        elif found or not lines[i].strip():
            break
        i -= 1
    return "\n".join(found)


def test_config_yaml_says_why_where_it_differs_from_the_default():
    """config.yaml is the default study's choice; where it differs from the library's default, its own
    comment above the key says why (the library's descriptions say what a choice trades, not one study's
    value). Keys without a default (budgets, backbones) are the study's alone."""
    text = (REPO / "config" / "config.yaml").read_text()
    unexplained = [
        (k, d, c) for k, d, c in _defaults(SCHEMA, CONFIG, "config") if not _same(d, c) and not _comment_above(text, k)
    ]
    assert unexplained == []


def test_a_key_without_a_comment_is_seen():
    text = "plan:\n  # why a\n  a: 1\n  b: 2\n\n  c: 3\ntrain:\n  d: 4\n"
    assert _comment_above(text, "config.plan.a") == _comment_above(text, "config.plan.b") == "# why a"
    assert _comment_above(text, "config.plan.c") == _comment_above(text, "config.train.d") == ""


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
    assert set(train["launcher"]["enum"]) < set(LAUNCHERS)
    assert tuple(SCHEMA["properties"]["sweep"]["properties"]["storage"]["enum"]) == STORAGES
    assert tuple(SCHEMA["properties"]["fit"]["properties"]["method"]["enum"]) == tuple(FIT_METHODS)


def _errors(override: dict) -> list[str]:
    config = {**CONFIG, **override}
    return [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(SCHEMA).iter_errors(config)]


@pytest.mark.parametrize("path", ["/", "//", "", "-rf", "--out", "a b", "x;y"])
@pytest.mark.parametrize("key", ["study_dir", "previous_round", "sweep.outputs"])
def test_bad_paths_are_refused_naming_the_key(key, path):
    override = (
        {"plan": {**CONFIG["plan"], "previous_round": path}}
        if key == "previous_round"
        else ({"sweep": {**CONFIG["sweep"], "outputs": path}} if key == "sweep.outputs" else {key: path})
    )
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
    """Two hops: a key is a field of its section's dataclass, or a name the rules read. An option section is
    parsed once (its dataclass, in prism/workflow/study.py) and read nowhere else: one parse, one default."""
    workflow = [
        *sorted((REPO / "rules").glob("*.smk")),
        REPO / "Snakefile",
        *sorted((REPO / "prism" / "workflow").glob("*.py")),
    ]
    rules = "\n".join(p.read_text() for p in workflow)
    for section, value in CONFIG.items():
        if section in SECTIONS:
            reads = re.findall(rf'.*config\["{section}"\].*', rules)
            assert len(reads) == 1 and "from_mapping" in reads[0], (section, reads)
            continue
        assert re.search(rf'config\["{section}"\]', rules), f"config key {section} is read by no rule"
        if isinstance(value, dict) and section not in ("cluster",):
            loader = {f.name for f in dataclasses.fields(LoaderOptions)} if section == "data" else set()
            assert not loader or 'loader_options(config["data"])' in rules, "data's loader keys are read by no rule"
            for key in set(value) - loader:
                assert f'["{key}"]' in rules, f"config key {section}.{key} is read by no rule"


def test_aurora_config_is_valid_over_the_default():
    """config/aurora.yaml as `--configfile` merges it over config.yaml (PyYAML reads 5e15 as a string:
    numbers need a dot or an exponent sign, e.g. 5.03e+15)."""
    from snakemake.utils import update_config

    merged = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    update_config(merged, yaml.safe_load((REPO / "config" / "aurora.yaml").read_text()))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(SCHEMA).iter_errors(merged)]
    assert errors == []


def test_the_configuration_reference_is_current():
    """docs/configuration.md is what tools/config_reference.py prints from the schema and config.yaml."""
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / "config_reference.py")], capture_output=True, text=True, check=True
    )
    assert result.stdout == (REPO / "docs" / "configuration.md").read_text(), (
        "docs/configuration.md is out of date: python tools/config_reference.py > docs/configuration.md"
    )
