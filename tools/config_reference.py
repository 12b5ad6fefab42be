#!/usr/bin/env python3
"""Write config/schema.yaml from the option dataclasses, and the configuration reference
(docs/configuration.md) from the schema.

    python tools/config_reference.py --write                  # both files, in place
    python tools/config_reference.py > docs/configuration.md  # the reference alone

The schema is prism.workflow.configschema's: every section's dataclass, one field per key (a new
field with `option(...)` is a new key). The reference gives
every key of the schema, in its order: its type and allowed values, the library's default
(the schema's, which tests/workflow/test_schema.py holds equal to the option dataclasses and
the CLI flags), the default study's value where config/config.yaml chooses another, and the
schema's description. Both are generated, never edited: a test fails when either differs
from what this script writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from prism.core.configtypes import kind

REPO = Path(__file__).resolve().parents[1]
HEADER = """# Configuration reference

Every key of a study's configuration: `config/config.yaml` (the default study) and any
`--configfile` merged over it (`config/smoke.yaml`, `config/aurora.yaml`). Snakemake checks
the merged configuration against `config/schema.yaml` before anything runs; an unknown key or
a value out of range is one line naming the key, the value and what is allowed.

*Default* is the library's: what a study gets when its configuration leaves the key out (the
same default as the CLI flag of the option, e.g. `plan.window` and `prism isoflop plan
--window`). *Default study* is `config/config.yaml`'s value where it chooses another. Set a
key for one call with `--config key=value`, or a nested one with
`--config 'section={"key": value}'` (the other keys of the section keep their values).

Generated with config/schema.yaml from the option dataclasses by `python
tools/config_reference.py --write`; do not edit by hand. A key is a field of its section's
options class (`prism.workflow.configschema.SECTIONS` names each; the top-level keys are
`StudyOptions`): to add one, add the field with `option(default, help, ...)` (its type,
choices and bounds are the schema's; `doc=` a longer description, `schema=` what differs
from the flag), give it in config/config.yaml, and run the command above.
"""


def _resolve(prop: dict, root: dict) -> dict:
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node = root
        for part in ref[2:].split("/"):
            node = node[part]
        return {**node, **{k: v for k, v in prop.items() if k != "$ref"}}
    return prop


def _value(value) -> str:
    return "`" + json.dumps(value) + "`" if not isinstance(value, str) else f'`"{value}"`'


# The command whose flags a section's keys are (the workflow passes them on).
COMMANDS = {
    "data": ("prism", "data", "build"),
    "calibrate": ("prism", "isoflop", "calibrate"),
    "plan": ("prism", "isoflop", "plan"),
    "train": ("prism", "train"),
    "collect": ("prism", "isoflop", "collect"),
    "fit": ("prism", "isoflop", "fit"),
    "plot": ("prism", "isoflop", "plot"),
}


def _flags(command: tuple[str, ...]) -> set[str]:
    """The destinations of a `prism` command's flags."""
    from prism.cli import build_parser

    parser = build_parser()
    for word in command[1:]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {a.dest for a in parser._actions if a.option_strings}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _description(prop: dict, root: dict) -> str:
    return _cell(" ".join(str(prop.get("description") or _resolve(prop, root).get("description") or "").split()))


def _rows(schema: dict, config: dict, root: dict, prefix: str) -> list[str]:
    rows = []
    for key, prop in schema.get("properties", {}).items():
        name = prefix + key
        resolved = _resolve(prop, root)
        default = (
            _value(prop["default"])
            if "default" in prop
            else "required"
            if key in schema.get("required", [])
            else "none"
        )
        if "x-library-default" in prop:
            default += f" (the library's: {_value(prop['x-library-default'])})"
        study = ""
        if key in config and not (resolved.get("type") == "object" and "properties" in resolved):
            if "default" not in prop or config[key] != prop["default"]:
                study = _value(config[key])
        rows.append(f"| `{name}` | {_cell(kind(prop, root))} | {default} | {study} | {_description(prop, root)} |")
    return rows


def reference(schema: dict, config: dict) -> str:
    """The reference as Markdown: top-level keys first, then one table per section."""
    head = "| key | type | default | default study | meaning |\n|---|---|---|---|---|"
    out = [HEADER, "## Top-level keys\n", head]
    sections = {k: p for k, p in schema["properties"].items() if p.get("type") == "object" and "properties" in p}
    top = {**schema, "properties": {k: p for k, p in schema["properties"].items() if k not in sections}}
    out += _rows(top, config, schema, "")
    for key, prop in sections.items():
        out += ["", f"## `{key}`\n", " ".join(prop.get("description", "").split()) + "\n"]
        if key in COMMANDS:
            flags = _flags(COMMANDS[key])
            named = [k for k in prop["properties"] if k in flags]
            if named:
                others = [k for k in prop["properties"] if k not in flags]
                out.append(
                    f"Each key{' but ' + ', '.join(f'`{k}`' for k in others) if others else ''} is a flag of "
                    f"`{' '.join(COMMANDS[key])}` of the same name (`--{named[0].replace('_', '-')}` for "
                    f"`{named[0]}`) and the same default, unless the default column gives the library's.\n"
                )
        out.append(head)
        out += _rows(prop, config.get(key) or {}, schema, key + ".")
    out += ["", "## Kinds of value\n", "| kind | type | meaning |", "|---|---|---|"]
    for name, prop in schema.get("definitions", {}).items():
        out.append(
            f"| {name} | {_cell(kind({k: v for k, v in prop.items() if k != 'description'}, schema))} |"
            f" {_description(prop, schema)} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", type=Path, default=REPO / "config" / "schema.yaml")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument(
        "--write",
        action="store_true",
        help="write --schema from the option dataclasses, then docs/configuration.md from it (in place)",
    )
    args = parser.parse_args(argv)
    if args.write:
        from prism.workflow.configschema import schema_yaml

        args.schema.write_text(schema_yaml())
        config = yaml.safe_load(args.config.read_text())
        (REPO / "docs" / "configuration.md").write_text(reference(yaml.safe_load(args.schema.read_text()), config))
        return 0
    schema = yaml.safe_load(args.schema.read_text())
    config = yaml.safe_load(args.config.read_text())
    sys.stdout.write(reference(schema, config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
