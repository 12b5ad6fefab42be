"""Option dataclasses: one definition gives a verb's flags, its defaults and its config keys.

A verb's tunable settings (the plan's window, the fit's bootstrap, ...) are the
fields of one dataclass. The CLI adds one flag per field (`--min-steps` for
`min_steps`) with the field's default and help; the workflow turns the config
section of the same name into those flags (`as_args`), and the schema's defaults
are tested against the fields' defaults. So a key of config/config.yaml is traced
in two hops: its section's dataclass field, then the function that takes it.

Pure Python: no torch, no yaml.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
from dataclasses import field, fields
from typing import Any

from prism.core.errors import PrismError


def option(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] | None = None,
    metavar: str | None = None,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
    exclusive_maximum: float | None = None,
    doc: str | None = None,
    schema: dict[str, Any] | None = None,
) -> Any:
    """A dataclass field that is also a flag and a config key.

    The bounds are checked by `validate`. The config key's entry in config/schema.yaml is
    generated from the field (prism.workflow.configschema): its type, `choices`, bounds and default,
    described by `doc` (else `help`). `schema` holds the JSON-schema keywords where the key
    differs from the flag: a list or mapping value, a shared definition (`{"$ref":
    "#/definitions/path"}`), the workflow's own default or narrower range; a keyword set to
    None there is left out. `default` may be `dataclasses.MISSING`: a key the config must give.
    """
    meta = {
        "help": help,
        "choices": choices,
        "metavar": metavar,
        "minimum": minimum,
        "exclusive_minimum": exclusive_minimum,
        "maximum": maximum,
        "exclusive_maximum": exclusive_maximum,
        "doc": doc,
        "schema": schema,
    }
    if isinstance(default, (dict, list, set)):  # a mutable default: each instance gets a copy
        return field(default_factory=lambda: copy.copy(default), metadata=meta)
    return field(default=default, metadata=meta)


def flag(name: str, prefix: str = "") -> str:
    """`--min-steps` for `min_steps`; under `prefix` (`lr_`), `--lr-rule` for `rule` and `--lr-c` for `lr_c`:
    a section's fields among another verb's flags, named for their section without doubling it."""
    if prefix and not name.startswith(prefix):
        name = prefix + name
    return "--" + name.replace("_", "-")


def _kind(f: dataclasses.Field) -> str:
    text = str(f.type).replace(" ", "")
    for kind in ("bool", "int", "float", "str"):
        if text.startswith(kind):
            return kind
    raise TypeError(f"option {f.name}: unsupported type {f.type}")


def _parse(kind: str):
    return {"int": int, "float": float, "str": str}[kind]


def _chosen(cls, names: tuple[str, ...] | None) -> list[dataclasses.Field]:
    """The fields `names`, in that order (a command's flags keep their order), else every field."""
    if names is None:
        return list(fields(cls))
    by_name = {f.name: f for f in fields(cls)}
    return [by_name[name] for name in names]


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    names: tuple[str, ...] | None = None,
    *,
    unset: bool = False,
    prefix: str = "",
) -> None:
    """One flag per field of `cls` (or of its fields `names`), with the field's default and help
    (`--x`/`--no-x` for booleans), its value under the field's name. `unset`: every flag defaults to None,
    for a file of the same keys (or the dataclass) to fill what the command line leaves out; its help names
    a default only where the field has one and is not `required`. `prefix`: the flags' names (`flag`)."""
    for f in _chosen(cls, names):
        meta = f.metadata
        if unset:
            shown = "" if f.default is None or meta.get("required") else f" (default: {f.default})"
            parser.add_argument(
                flag(f.name, prefix),
                dest=f.name,
                type=_parse(_kind(f)),
                choices=meta.get("choices"),
                metavar=meta.get("metavar"),
                default=None,
                help=((meta.get("help") or "") + shown).replace("%", "%%"),
            )
            continue
        if _kind(f) == "bool":
            parser.add_argument(
                flag(f.name, prefix),
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=f.default,
                help=f"{meta['help']} (default: {f.default})",
            )
            continue
        # A help that says what None means (`(default: cores / processes)`) says the default itself.
        said = f.default is None and "(default:" in meta["help"]
        shown = "" if said else f" (default: {'none' if f.default is None else f.default})"
        parser.add_argument(
            flag(f.name, prefix),
            dest=f.name,
            type=_parse(_kind(f)),
            default=f.default,
            choices=meta.get("choices"),
            metavar=meta.get("metavar"),
            help=f"{meta['help']}{shown}".replace("%", "%%"),
        )
    add_renamed_flags(parser, cls, names)


class _Renamed(argparse.Action):
    """An option's old flag: refused in one line naming the new one."""

    def __init__(self, option_strings, dest, new: str = "", **kwargs) -> None:
        self.new = new
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        parser.exit(2, f"{parser.prog}: error: {option_string} is now {self.new} (the same values); give {self.new}\n")


def renamed(cls: type) -> dict[str, str]:
    """{old name: new name} of the options class's renamed fields (its `RENAMED`)."""
    return dict(getattr(cls, "RENAMED", None) or {})


def add_renamed_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, names=None) -> None:
    """A refusing flag for each old name of the options class's renamed fields (`names`: of these fields only)."""
    for old, new in renamed(cls).items():
        if names is None or new in names:
            parser.add_argument(flag(old), dest="renamed_" + old, action=_Renamed, new=flag(new))


def from_namespace(cls: type, args: argparse.Namespace):
    """The options parsed by `add_arguments`, validated."""
    return validate(cls(**{f.name: getattr(args, f.name) for f in fields(cls)}))


def from_mapping(cls: type, data: dict | None, where: str):
    """The options a config section sets (absent keys: the defaults); an unknown key is an error naming it.

    A list for a text option is its flag's comma-separated names (`trackers: [tensorboard, wandb]`
    is `--trackers tensorboard,wandb`; an empty list, none).
    """
    data = dict(data or {})
    kinds = {f.name: _kind(f) for f in fields(cls)}
    unknown = sorted(set(data) - set(kinds))
    moved = [f"{old} is now {new}" for old, new in renamed(cls).items() if old in unknown]
    if moved:
        raise PrismError(f"{where}: {'; '.join(moved)} (the same values); rename the key")
    if unknown:
        raise PrismError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(kinds))}")
    for name, value in data.items():
        if kinds[name] == "str" and isinstance(value, (list, tuple)):
            data[name] = ",".join(map(str, value)) or None
    return validate(cls(**data))


def check_field(f: dataclasses.Field, value: Any, name: str) -> None:
    """A PrismError starting with `name` when `value` breaks the field's type, range or choices
    (None, "derive it", passes)."""
    if value is None:
        return
    meta, kind = f.metadata, _kind(f)
    if kind in ("int", "float"):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind == "int" and not float(value).is_integer())
        ):
            raise PrismError(f"{name}: {value!r} is not a{'n integer' if kind == 'int' else ' number'}")
        if not math.isfinite(value):
            raise PrismError(f"{name}: {value!r} is not finite")
        if meta.get("minimum") is not None and value < meta["minimum"]:
            raise PrismError(f"{name} must be >= {meta['minimum']}, got {value}")
        if meta.get("exclusive_minimum") is not None and value <= meta["exclusive_minimum"]:
            raise PrismError(f"{name} must be > {meta['exclusive_minimum']}, got {value}")
        if meta.get("maximum") is not None and value > meta["maximum"]:
            raise PrismError(f"{name} must be <= {meta['maximum']}, got {value}")
        if meta.get("exclusive_maximum") is not None and value >= meta["exclusive_maximum"]:
            raise PrismError(f"{name} must be < {meta['exclusive_maximum']}, got {value}")
    if meta.get("choices") and value not in meta["choices"]:
        raise PrismError(f"{name}: {value!r} is not one of {', '.join(meta['choices'])}")


def validate(opts):
    """Check every field's type, range and choices; PrismError naming the flag."""
    for f in fields(opts):
        check_field(f, getattr(opts, f.name), flag(f.name))
    return opts


def as_args(opts, names: tuple[str, ...] | None = None, prefix: str = "") -> list[str]:
    """The flags that reproduce `opts` (every field, or its fields `names` in that order, so the command line
    shows every setting), named as `add_arguments` with the same `prefix` names them."""
    out: list[str] = []
    for f in _chosen(opts, names):
        value = getattr(opts, f.name)
        if _kind(f) == "bool":
            out.append(flag(f.name, prefix) if value else "--no-" + flag(f.name, prefix)[2:])
        elif value is not None:
            out += [flag(f.name, prefix), repr(value) if isinstance(value, float) else str(value)]
    return out


def defaults(cls: type) -> dict[str, Any]:
    """{field: default}: what a config section means when a key is left out."""
    return {f.name: f.default for f in fields(cls)}
