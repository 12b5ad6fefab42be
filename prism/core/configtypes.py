"""The workflow's config against its schema: nested command-line values typed, errors in one line.

Snakemake reads a nested `--config` value such as `'train={"seed": 1}'` with YAML's
base loader, which keeps every scalar as text: the seed arrives as "1", and the
schema would reject a number the user wrote as a number. `typed` walks the config
beside its JSON schema and converts text where the schema expects an integer, a
number, a boolean or null and the text reads as one. Anything else is left as it is,
for the schema to judge.

`check` then judges: the first value the schema rejects is one line naming the key, the
value and what is allowed (`problem`), where Snakemake's own validation prints the whole
schema after it. `override_as_target` says how to give a config value typed where a target
goes (`snakemake fit_F train.seed=1`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

_BOOLEANS = {"true": True, "false": False}
_NULLS = ("null", "~")


def _types(schema: dict) -> set[str]:
    kind = schema.get("type")
    return set(kind) if isinstance(kind, list) else {kind} if kind else set()


def _resolve(schema: dict, root: dict) -> dict:
    """The schema itself, or the local definition its `$ref` names."""
    ref = schema.get("$ref")
    if not (isinstance(ref, str) and ref.startswith("#/")):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _scalar(text: str, types: set[str]) -> Any:
    if "null" in types and text in _NULLS:
        return None
    if "integer" in types:
        try:
            return int(text)
        except ValueError:
            pass
    if "number" in types:
        try:
            return float(text)
        except ValueError:
            pass
    if "boolean" in types and text.lower() in _BOOLEANS:
        return _BOOLEANS[text.lower()]
    return text


def coerce(value: Any, schema: dict, root: dict | None = None) -> Any:
    """`value` with its text scalars converted where `schema` types them.

    `schema` is a JSON schema; `root` holds its definitions.
    """
    root = schema if root is None else root
    schema = _resolve(schema, root)
    alternatives = [_resolve(a, root) for a in schema.get("anyOf") or schema.get("oneOf") or []]
    if alternatives:
        if isinstance(value, str):
            if value in _NULLS and any("null" in _types(a) for a in alternatives):
                return None
            if any("string" in _types(a) for a in alternatives):
                return value  # text is a valid kind here (a budget such as 3e11, a path)
        for alternative in alternatives:
            converted = coerce(value, alternative, root)
            if converted is not value:
                return converted
        return value
    types = _types(schema)
    if isinstance(value, str) and "string" not in types:
        return _scalar(value, types)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return {
            k: coerce(v, properties.get(k, extra if isinstance(extra, dict) else {}), root) for k, v in value.items()
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce(v, schema["items"], root) for v in value]
    return value


def typed(config: dict, schema_path: str | Path) -> dict:
    """The config with its command-line text typed by the schema file (YAML) at `schema_path`."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    return coerce(config, schema)


# ---- one line per bad value -------------------------------------------------------------------


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _shown(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind(schema: dict, root: dict) -> str:
    """What a schema allows, in a few words: `integer, >= 1`, `one of a, b`, `list of backbone`, ..."""
    ref = schema.get("$ref", "")
    resolved = _resolve(schema, root)
    if resolved is not schema:
        resolved = {**resolved, **{k: v for k, v in schema.items() if k != "$ref"}}
    alternatives = resolved.get("anyOf") or resolved.get("oneOf")
    if alternatives:
        return " or ".join(kind(a, root) for a in alternatives)
    if "enum" in resolved:
        return "one of " + ", ".join(f"`{v}`" for v in resolved["enum"])
    if ref.startswith("#/definitions/") and "pattern" in resolved:
        return ref.rsplit("/", 1)[-1]
    words = []
    declared = resolved.get("type") or []
    for t in declared if isinstance(declared, list) else [declared]:
        if t == "array":
            items = resolved.get("items", {})
            name = items.get("$ref", "").rsplit("/", 1)[-1] or kind(items, root)
            limits = [
                w
                for w, on in (
                    ("unique", resolved.get("uniqueItems")),
                    (f"at least {resolved.get('minItems')}", resolved.get("minItems")),
                )
                if on
            ]
            words.append(f"list of {name}" + (f" ({', '.join(limits)})" if limits else ""))
        elif t == "object":
            words.append("mapping")
        elif t == "string" and "pattern" in resolved:
            words.append(f"text matching `{resolved['pattern']}`")
        else:
            words.append(t)
    bounds = [
        f"{sign} {resolved[key]:g}"
        for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"))
        if key in resolved
    ]
    return " or ".join(words or ["any"]) + (", " + ", ".join(bounds) if bounds else "")


def _allowed(schema: dict, root: dict) -> str:
    """The allowed values of the schema an error broke: a definition's own description (a budget, a
    path), else each alternative's, else its type, enum and bounds."""
    resolved = _resolve(schema, root)
    described = " ".join(str(resolved.get("description", "")).split()).rstrip(".")
    if described and any(resolved is d for d in root.get("definitions", {}).values()):
        return described[0].lower() + described[1:]
    alternatives = resolved.get("anyOf") or resolved.get("oneOf")
    if alternatives:
        return " or ".join(_allowed(a, root) for a in alternatives)
    return kind(schema, root).replace("`", "")


def origin(parts: list, files: list[str | Path]) -> str | None:
    """The last of the config `files` that sets the key at `parts` (a later file overrides an earlier one),
    else `--config` (given on the command line); None without files."""
    if not files:
        return None
    for path in reversed([Path(f) for f in files]):
        try:
            node: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        for part in parts:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                break
        else:
            return str(path)
    return "--config"


def _nearest(name: str, known: list[str]) -> str:
    """` (did you mean X?)` for the key nearest a misspelt one, or nothing when none is near."""
    import difflib  # noqa: PLC0415 lazy: only for a misspelt key

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def problem(config: dict, schema: dict, files: list[str | Path] = ()) -> str | None:
    """The config's first disagreement with `schema` as one line naming the key, the value and what is
    allowed (None: valid), then how many more there are; with the config `files` (in the order they
    merge), also the file that set it (or `--config`), and a misspelt key's nearest known one."""
    from jsonschema import Draft202012Validator  # noqa: PLC0415 lazy: jsonschema
    from jsonschema.exceptions import best_match  # noqa: PLC0415 lazy: jsonschema

    errors = list(Draft202012Validator(schema).iter_errors(config))
    if not errors:
        return None
    error = best_match(errors)
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(known))
        name = f"{where}.{unknown[0]}" if where else unknown[0]
        near = _nearest(unknown[0], known).replace("mean ", f"mean {where}." if where else "mean ")
        line = f"config: unknown key {name}{near}; the keys{' of ' + where if where else ''} are {', '.join(known)}"
        parts = [*error.absolute_path, unknown[0]]
        new = error.schema.get("x-renamed", {}).get(unknown[0])
        if new:
            return f"config: {name} is now {where + '.' if where else ''}{new} (the same values); rename the key"
        section, _, key = unknown[0].partition(".")
        if not where and key and section in known:
            line += f" (a nested key is set with its section: --config '{section}={{\"{key}\": ...}}')"
    elif error.validator == "required":
        line = f"config: {where or 'the config'} lacks {error.message.split(' is a required')[0]}, which has no default"
        parts = list(error.absolute_path)
    else:
        while error.parent is not None and list(error.parent.absolute_path) == list(error.absolute_path):
            error = error.parent  # a budget or a path: say what the whole alternative allows
        line = f"config: {where} = {_shown(error.instance)} is not allowed; allowed: {_allowed(error.schema, schema)}"
        parts = list(error.absolute_path)
    source = origin(parts, list(files))
    if source:
        line = line.replace("config:", f"config ({source}):", 1)
    more = len(errors) - 1
    return line + (f" (and {more} more)" if more else "") + "; see docs/configuration.md"


def check(config: dict, schema_path: str | Path, files: list[str | Path] = ()) -> None:
    """Stop with one line (SystemExit: Snakemake prints it alone and exits 1) when the config breaks the schema;
    `files`: the config files in the order they merge, to name the one that set the key."""
    line = problem(config, yaml.safe_load(Path(schema_path).read_text()), files)
    if line:
        raise SystemExit(line)


# ---- a config file that does not parse ---------------------------------------------------------


def config_file_problem(path: str | Path) -> str | None:
    """One line naming the file, line and column where a YAML config file stops parsing (None: it parses
    to a mapping). Snakemake's own error names neither file nor line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return f"{path}: cannot be read ({err})"
    try:
        loaded = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark, start = err.problem_mark or err.context_mark, err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = err.problem or err.context or "does not parse"
        if err.context and start is not None and mark is not None and start.line != mark.line:
            what += f" ({err.context} begun at line {start.line + 1})"
        return f"{where}: not valid YAML: {what}; fix it there (a bracket left open, a tab, a stray colon)"
    except yaml.YAMLError as err:
        return f"{path}: not valid YAML ({err})"
    if loaded is not None and not isinstance(loaded, dict):
        return f"{path}: a config file is a mapping of keys (`budgets: [...]`), not a {type(loaded).__name__}"
    return None


def check_config_file(path: str | Path) -> None:
    """Stop with config_file_problem's line (SystemExit) when the config file at `path` does not parse."""
    line = config_file_problem(path)
    if line:
        raise SystemExit(line)


# ---- a config override given where a target goes ------------------------------------------------

_OVERRIDE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(.*)")


def override_as_target(targets: list[str]) -> str | None:
    """One line for a target that reads as a config override (`train.seed=1`, Hydra's style), which
    Snakemake would look for as a file to make; None when every target is a target."""
    for target in targets:
        match = _OVERRIDE.fullmatch(target)
        if not match:
            continue
        key, nested, value = match.groups()
        if nested:
            inner = nested[1:].split(".")
            text = "".join(f'{{"{k}": ' for k in inner) + (value or "...") + "}" * len(inner)
            fix = f"--config '{key}={text}' (the section's other keys keep their values)"
        else:
            fix = f"--config {target}"
        return f"snakemake: {target} is not a target but a config value: give it after the targets as {fix}"
    return None


def command_line_targets(argv: list[str]) -> list[str]:
    """The targets of a `snakemake` command line, as Snakemake's own parser reads them ([] when it cannot)."""
    try:
        from snakemake.cli import get_argument_parser  # noqa: PLC0415 lazy: snakemake

        args, _ = get_argument_parser().parse_known_args(argv)
    except (SystemExit, Exception):  # never stop a workflow over reading its command line (argparse exits)
        return []
    return list(getattr(args, "targets", None) or [])


def check_targets(argv: list[str]) -> None:
    """Stop with one line (SystemExit) when a `snakemake` command line has a config override for a target."""
    line = override_as_target(command_line_targets(argv))
    if line:
        raise SystemExit(line)
