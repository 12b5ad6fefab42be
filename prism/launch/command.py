"""The `prism train` argument list that reproduces a RunConfig exactly."""

from __future__ import annotations

import dataclasses
import shlex

from prism.core.ids import format_budget
from prism.train.config import RunConfig


def train_args(run: RunConfig) -> list[str]:
    """`train --family ... --out ...` plus every setting that differs from its default."""
    args = ["train"]
    defaults = RunConfig.__dataclass_fields__
    for f in dataclasses.fields(run):
        value = getattr(run, f.name)
        required = f.metadata.get("required")
        if not required and (value is None or value == defaults[f.name].default):
            continue
        if f.name == "budget":
            value = format_budget(value)
        args += ["--" + f.name.replace("_", "-"), str(value)]
    return args


def join(argv: list[str]) -> str:
    return shlex.join(argv)
