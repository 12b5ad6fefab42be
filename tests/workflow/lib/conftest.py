"""A study's config as Snakemake hands it over (config.yaml with smoke.yaml over it), and a stand-in
for Snakemake's engine: prism.workflow runs without Snakemake."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]


def merged(base: dict, *layers: dict) -> dict:
    out = copy.deepcopy(base)
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, text: str) -> None:
        self.lines.append(("info", text))

    def warning(self, text: str) -> None:
        self.lines.append(("warning", text))

    def error(self, text: str) -> None:
        self.lines.append(("error", text))


class FakeEngine:
    """What prism.workflow asks of prism.workflow.engine.Engine, recorded."""

    def __init__(self, dryrun: bool = True, in_job: bool = False, forced: set[str] | None = None,
                 submits: bool = False, cores: int = 2) -> None:  # fmt: skip
        self.dryrun, self.in_job = dryrun, in_job
        self.submits, self.cores = submits, cores
        self.forced = set(forced or ())
        self.logger = Log()
        self.said: list[str] = []
        self.forced_rules: list[str] = []

    def say_once(self, text: str, warning: bool = False) -> None:
        if text not in self.said:
            self.said.append(text)

    def stop(self, line: str) -> None:
        raise SystemExit(line)

    def forced_targets(self) -> set[str]:
        return self.forced

    def check_groups_run_at_once(self) -> None:
        pass

    def runs_under_slurm(self) -> bool:
        return False

    def force_rule(self, rule_name: str) -> None:
        self.forced_rules.append(rule_name)


@pytest.fixture
def smoke_config(tmp_path) -> Any:
    """`smoke_config(**overrides)`: the smoke study's config in tmp_path/study, overrides merged over it."""
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    smoke = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())

    def make(**overrides: Any) -> dict:
        return merged(base, smoke, {"study_dir": str(tmp_path / "study")}, overrides)

    return make


def wildcards(**values: Any) -> SimpleNamespace:
    return SimpleNamespace(**values)
