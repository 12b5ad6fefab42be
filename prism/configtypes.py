"""Nested command-line config values, typed as the workflow's schema declares them.

Snakemake reads a nested `--config` value such as `'train={"seed": 1}'` with YAML's
base loader, which keeps every scalar as text: the seed arrives as "1", and the
schema would reject a number the user wrote as a number. `typed` walks the config
beside its JSON schema and converts text where the schema expects an integer, a
number, a boolean or null and the text reads as one. Anything else is left as it is,
for the schema to judge with its own message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    """`value` with its text scalars converted where `schema` (a JSON schema; `root` holds its definitions) types them."""
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
        return {k: coerce(v, properties.get(k, extra if isinstance(extra, dict) else {}), root)
                for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce(v, schema["items"], root) for v in value]
    return value


def typed(config: dict, schema_path: str | Path) -> dict:
    """The config with its command-line text typed by the schema file (YAML) at `schema_path`."""
    import yaml

    schema = yaml.safe_load(Path(schema_path).read_text())
    return coerce(config, schema)
