"""config/schema.yaml, generated from the option dataclasses: one definition per config key.

Each section of a study's config is the fields of one dataclass (`SECTIONS`), and the
top-level keys are the fields of `StudyOptions`. A field's entry in the schema is its
type (`int | None` is an integer or null), `choices` (an enum), bounds and default,
described by its `doc` (else its `help`), with the field's `schema` keywords over them
(prism.core.options.option). Where the schema's default or choices differ from the field's
(the workflow's own), the library's are recorded beside them (`x-library-default`,
`x-library-choices`); a section's renamed keys (a class's `RENAMED`, old name -> new) are
`x-renamed`, which the config check names in its one-line error. The kinds of value every
section shares (a backbone, a budget, a path) are `definitions`, from the registries.

    python tools/config_reference.py --write    # config/schema.yaml and docs/configuration.md
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from typing import Any

from prism.core.families import FAMILIES, ShapeOptions
from prism.core.options import option
from prism.data.options import DataOptions, LoaderOptions
from prism.isoflop.design.calibrate import CalibrateOptions
from prism.isoflop.design.planoptions import PlanOptions
from prism.isoflop.design.tuning import TuneOptions
from prism.isoflop.fit.fit import FitOptions
from prism.isoflop.present.options import PlotOptions
from prism.isoflop.runs.collect import CollectOptions
from prism.launch.options import ClusterOptions
from prism.model.config import BACKBONES, REGIMES, VARIANTS
from prism.model.sizes import RULE_NAME_PATTERN, VARIANT_NAME_PATTERN
from prism.sweep.options import SweepOptions
from prism.train.options import TrainOptions

DESCRIPTION = (
    "The configuration of one prism scaling study (config/config.yaml, config/aurora.yaml). Every level "
    "rejects unknown keys, so a misspelt key stops Snakemake before anything runs, naming the key. Names "
    "that reach a shell command are enumerations or narrow patterns, so no value can carry shell syntax."
)
PATH = {"$ref": "#/definitions/path"}


def definitions() -> dict[str, dict]:
    """The kinds of value the sections share: the registries' names, and the patterns of budgets, paths,
    walltimes and PBS words."""
    return {
        "family": {"type": "string", "enum": list(FAMILIES)},
        "backbone": {
            "description": "A registry backbone (`prism model list`) or a shape rule's size named by its "
            "parameters: n<m>e<x> (CPU shapes) or g<m>e<x> (accelerator shapes), N = m x 10^x, e.g. n32e3, g7e9.",
            "type": "string",
            "anyOf": [{"enum": list(BACKBONES)}, {"pattern": f"^{RULE_NAME_PATTERN}$"}],
        },
        "variant": {
            "description": "A registry projector variant, or by the rule W<k>X (hidden width k x d_model) or "
            "D<k>X (2k linears).",
            "type": "string",
            "anyOf": [{"enum": list(VARIANTS)}, {"pattern": f"^{VARIANT_NAME_PATTERN}$"}],
        },
        "regime": {"type": "string", "enum": list(REGIMES)},
        "budget": {
            "description": "A compute budget in training FLOPs, from 1e3 to 1e30: a number, or a string such "
            "as 3e11 or 2.5e17 (mantissa from 1, exponent 3 to 30).",
            "anyOf": [
                {"type": "number", "minimum": 1.0e3, "maximum": 1.0e30},
                {"type": "string", "pattern": "^[1-9][0-9]*(\\.[0-9]+)?[eE]\\+?([3-9]|[12][0-9]|30)$"},
            ],
        },
        "path": {
            "description": "A folder, absolute (e.g. a study on Lustre) or relative to the working directory; "
            "letters, digits and . _ / - only; not empty, not the filesystem root, not starting with a dash.",
            "type": "string",
            "pattern": "^(?!-)(?!/+$)[A-Za-z0-9_./-]+$",
        },
        "absolute_path": {
            "description": "An absolute folder, starting with / (e.g. /lus/flare/projects/NAME/shards; in your "
            "home: $HOME spelt out, /home/NAME/shards): the jobs that read it may run in another directory or on "
            "another node, where a relative path would name another folder.",
            "type": "string",
            "pattern": "^/",
        },
        "walltime": {
            "description": "A PBS walltime, HH:MM:SS (hours up to 999).",
            "type": "string",
            "pattern": "^[0-9]{1,3}:[0-5][0-9]:[0-5][0-9]$",
        },
        "shape": shape_definition(),
        "pbs_word": {
            "description": "A PBS account, queue or similar name; letters, digits, dot, dash, underscore only.",
            "type": "string",
            "pattern": "^[A-Za-z0-9_.-]*$",
        },
    }


SHAPE_DESCRIPTION = (
    "One family's shape (fields of prism.core.families.ShapeOptions, and flags of `prism data index|build` and "
    "`prism isoflop calibrate|plan`; a key left out keeps the family's laptop default). text_image and "
    "text_video: image_size (square side in px), channels (1 grey or 3 RGB), patch (side in px, dividing "
    "image_size: (image_size/patch)^2 tokens an image or frame) and text_len; text_video also frames. The other "
    "families: text_len only (their other dimensions are fixed). text_len is the most text tokens a sample "
    "holds, BOS and EOS included (at least 3)."
)


def shape_definition() -> dict[str, Any]:
    """`definitions/shape`: ShapeOptions' fields as integers that must be given (no null, no default)."""
    properties = {}
    for f in dataclasses.fields(ShapeOptions):
        prop = {k: v for k, v in key_schema(f).items() if k not in ("default", "x-library-default")}
        prop["type"] = "integer"
        properties[f.name] = prop
    return {
        "description": SHAPE_DESCRIPTION,
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }


@dataclass(frozen=True, kw_only=True)
class StudyOptions:
    """The study's top-level keys (the sections are `SECTIONS`)."""

    study_dir: str = option(
        "scaling-study", "Folder that receives every output of the study (see definitions/path).", schema=PATH
    )
    compare_with: str | None = option(
        None,
        "wsd studies only: the study dir of a cosine study of the same grid; `snakemake agreement_F` writes "
        "STUDY/F/agreement/REGIME.md comparing the two fits (exponents with intervals, per-run losses).",
        schema={"oneOf": [PATH, {"type": "null"}]},
    )
    families: tuple[str, ...] = option(
        ("text_image",),
        "The families `snakemake all` builds (fit and plots). Named targets exist for every family anyway.",
        schema={"type": "array", "items": {"$ref": "#/definitions/family"}, "minItems": 1, "uniqueItems": True},
    )
    retrain: bool = option(
        False,
        "true: every training job of the requested targets trains again from scratch (both schedules: cosine "
        "runs, wsd segments and branches), e.g. `snakemake fit_F --config retrain=true`; the fit and figures "
        "are then remade from the new runs. false: finished runs are kept.",
    )
    worker: bool = option(
        True,
        "Jobs that run on this machine start their `prism` commands from one worker process that imported "
        "torch once (prism/workflow/worker.py); false runs each job as its own process. Never used by jobs submitted "
        "to a cluster.",
    )
    regime: str = option(
        "e2e",
        "Which parts of the model train in the study's runs (the fit filters on it).",
        schema={"$ref": "#/definitions/regime"},
    )
    backbones: tuple[str, ...] = option(
        MISSING,
        "Candidate backbones of every budget (registry or rule names); the plan keeps, per budget, those within "
        "plan.window of the optimum. May be empty when plan.sizes_per_budget takes the sizes from the shape rule.",
        schema={"type": "array", "items": {"$ref": "#/definitions/backbone"}, "uniqueItems": True},
    )
    variants: tuple[str, ...] = option(
        ("BASE",),
        "Candidate projector variants (the axis that spreads N for a fixed backbone).",
        schema={"type": "array", "items": {"$ref": "#/definitions/variant"}, "minItems": 1, "uniqueItems": True},
    )
    budgets: tuple[str, ...] = option(
        MISSING,
        "Compute budgets (training FLOPs). Adding one trains only that budget's runs.",
        schema={"type": "array", "items": {"$ref": "#/definitions/budget"}, "minItems": 1},
    )
    shapes: dict[str, dict] = option(
        {},
        "Each family's shape, as the data index makes its samples and the model, the FLOP and parameter counts "
        "and the plan's tokens per sample follow from it, e.g. {text_image: {image_size: 224, channels: 3, "
        "patch: 16, text_len: 128}} (docs/own-data.md). A family not named keeps its laptop shape (text_image "
        "8x8 grey in 2x2 patches, 16 image tokens, text_len 48). Image sizes other than the default need your "
        "own shards (data.shards).",
        schema={
            "type": "object",
            "propertyNames": {"enum": list(FAMILIES)},
            "additionalProperties": {"$ref": "#/definitions/shape"},
        },
    )


@dataclass(frozen=True)
class Section:
    """A config section: its key, its dataclass, and what it configures."""

    key: str
    options: type
    description: str
    # Further dataclasses whose fields are keys of the same section (data: the loader's keys).
    also: tuple[type, ...] = ()

    def fields(self) -> tuple[dataclasses.Field, ...]:
        return tuple(f for cls in (self.options, *self.also) for f in dataclasses.fields(cls))


SECTIONS: tuple[Section, ...] = (
    Section(
        "data",
        DataOptions,
        "The shards of each family (`prism data build`, or `prism data index` of your own), and how a training "
        "job reads them (preloaded or streamed).",
        also=(LoaderOptions,),
    ),
    Section(
        "calibrate",
        CalibrateOptions,
        "Timed training steps per candidate (`prism isoflop calibrate`; the fields of CalibrateOptions), written "
        "beside the calibration as .speed.json: the plan's estimate of each run's wall time here.",
    ),
    Section("plan", PlanOptions, "Planning (`prism isoflop plan`)."),
    Section(
        "tune",
        TuneOptions,
        "Every run's peak learning rate by a stated rule: hand (today's, not tuned), given (constants) or fitted "
        "(a short lr sweep at a few widths before the grid, rules/tune.smk and `prism isoflop tune`).",
    ),
    Section(
        "train",
        TrainOptions,
        "Training runs (`prism train`; the fields of TrainOptions, the settings every run of the study shares).",
    ),
    Section("collect", CollectOptions, "Collection of finished runs into runs.csv (`prism isoflop collect`)."),
    Section("fit", FitOptions, "The scaling-law fit (`prism isoflop fit`)."),
    Section("plot", PlotOptions, "Plotting options (`prism isoflop plot`); changing them re-plots only."),
    Section(
        "cluster",
        ClusterOptions,
        "PBS settings of the training jobs (used by profiles/aurora; ignored when jobs run locally). Resources, "
        "not rerun triggers: changing them never retrains.",
    ),
    Section(
        "sweep",
        SweepOptions,
        "The per-modality throughput sweep (`snakemake sweep`, rules/sweep.smk): one job per (design, preset) "
        "cell of config/modality_presets.yaml, then `prism perf aggregate` and `prism perf report` (the "
        "results document).",
    ),
)

_KINDS = {"bool": "boolean", "int": "integer", "float": "number", "str": "string"}
_BOUNDS = {
    "minimum": "minimum",
    "exclusive_minimum": "exclusiveMinimum",
    "maximum": "maximum",
    "exclusive_maximum": "exclusiveMaximum",
}


def _json(value: Any) -> Any:
    """A default as YAML writes it: tuples as lists, read-only mappings as mappings."""
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    return value


def _typed(f: dataclasses.Field) -> dict[str, Any]:
    """What the field's type, choices and bounds allow."""
    text = str(f.type).replace(" ", "")
    kind = next((_KINDS[k] for k in _KINDS if text.startswith(k)), None)
    prop: dict[str, Any] = {}
    if kind:
        prop["type"] = [kind, "null"] if "None" in text.split("|")[1:] else kind
    if f.metadata.get("choices"):
        prop["enum"] = list(f.metadata["choices"])
    prop.update({key: f.metadata[name] for name, key in _BOUNDS.items() if f.metadata.get(name) is not None})
    return prop


def library_default(f: dataclasses.Field) -> Any:
    """The field's default (MISSING: none, the config must give the key)."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


def key_schema(f: dataclasses.Field) -> dict[str, Any]:
    """The schema of the config key a field is."""
    meta = f.metadata
    extra = dict(meta.get("schema") or {})
    prop: dict[str, Any] = {"description": meta.get("doc") or meta["help"]}
    if not {"$ref", "anyOf", "oneOf"} & set(extra):
        prop.update(_typed(f))
    prop.update(extra)
    default = library_default(f)
    if default is not MISSING:
        prop.setdefault("default", _json(default))
        if prop["default"] != _json(default):
            prop["x-library-default"] = _json(default)
    if meta.get("choices") and prop.get("enum") != list(meta["choices"]):
        prop["x-library-choices"] = list(meta["choices"])
    return {k: v for k, v in prop.items() if v is not None or k in ("default", "x-library-default")}


def section_schema(section: Section) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": section.description,
        "type": "object",
        "additionalProperties": False,
        "default": {},
        "properties": {f.name: key_schema(f) for f in section.fields()},
    }
    renamed = getattr(section.options, "RENAMED", None)
    if renamed:
        out["x-renamed"] = dict(renamed)
    return out


def schema() -> dict[str, Any]:
    """The whole schema, as config/schema.yaml holds it."""
    top = dataclasses.fields(StudyOptions)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": DESCRIPTION,
        "type": "object",
        "additionalProperties": False,
        "definitions": definitions(),
        "properties": {
            **{f.name: key_schema(f) for f in top},
            **{s.key: section_schema(s) for s in SECTIONS},
        },
        "required": [f.name for f in top if library_default(f) is MISSING],
    }


def _flow(value: Any) -> bool:
    """Written on one line: a list of names, or a small mapping without a description."""
    if isinstance(value, list):
        return all(not isinstance(v, (dict, list)) for v in value)
    small = "description" not in value and len(value) <= 3
    return small and all(not isinstance(v, (dict, list)) for v in value.values())


def schema_yaml() -> str:
    """config/schema.yaml's text."""
    import yaml  # noqa: PLC0415 lazy: yaml

    class Dumper(yaml.SafeDumper):
        pass

    for kind in (list, dict):
        Dumper.add_representer(
            kind,
            lambda dumper, value: (
                dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=_flow(value))
                if isinstance(value, list)
                else dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=_flow(value))
            ),
        )
    head = (
        "# Generated from the option dataclasses (prism.workflow.configschema) by\n"
        "# `python tools/config_reference.py --write`; do not edit: change the field, then regenerate.\n"
    )
    return head + yaml.dump(schema(), Dumper=Dumper, sort_keys=False, width=110, allow_unicode=True)
