"""The files of a run directory, and the few rules that keep them trustworthy.

- `config.yaml`: the RunConfig (round-trips through `--config`) plus `resolved:`
  (steps, lr, FLOPs per sample and where it came from, world size, ...).
- `perf.jsonl`, `eval.jsonl`: one JSON object per line, appended and flushed as the
  run goes. On resume, rows past the checkpoint's step (written by the killed
  process after its last checkpoint) are dropped so the files read as one run.
- `metrics.json`: written last, atomically; present means finished.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from prism.core.atomic import disk_full, is_disk_full, json_safe, write_text_atomic
from prism.core.errors import PrismError
from prism.core.studylayout import RUN_CONFIG, RUN_METRICS
from prism.train.config import RESOLVED_KEY, read_yaml

CONFIG, METRICS = RUN_CONFIG, RUN_METRICS
PERF = "perf.jsonl"
EVAL = "eval.jsonl"


class JsonlWriter:
    """Appends one JSON object per line, flushed so a killed job keeps what it logged."""

    def __init__(self, path: Path, enabled: bool = True):
        self.path = Path(path)
        self._handle = None
        if enabled:
            try:
                self._handle = open(self.path, "a")
            except OSError as err:
                if is_disk_full(err):
                    raise disk_full(self.path) from None
                raise

    def write(self, row: dict[str, Any]) -> None:
        if self._handle is not None:
            line = json.dumps(json_safe(row)) + "\n"
            try:
                self._handle.write(line)
                self._handle.flush()
            except OSError as err:
                if is_disk_full(err):
                    self._abandon()
                    raise disk_full(self.path, len(line)) from None
                raise

    def _abandon(self) -> None:
        """Drop the handle without flushing again (the buffered bytes cannot be written)."""
        handle, self._handle = self._handle, None
        try:
            handle.close()
        except OSError:
            pass

    def close(self) -> None:
        if self._handle is not None:
            try:
                self._handle.close()
            except OSError as err:
                self._handle = None
                if is_disk_full(err):
                    raise disk_full(self.path) from None
                raise
            self._handle = None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Complete rows only: a torn last line (a kill mid-write) is skipped."""
    rows = []
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return rows
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def truncate_after(path: Path, step: int) -> None:
    """Keep the rows logged at or before `step` (the checkpoint a run resumes from)."""
    if not Path(path).exists():
        return
    rows = [r for r in read_jsonl(path) if isinstance(r.get("step"), int) and r["step"] <= step]
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


class RunConfigUnreadable(PrismError):
    """A run directory's config.yaml that is missing, unreadable or no mapping; the message says which."""


@dataclass(frozen=True)
class RunConfigFile:
    """A run directory's config.yaml as the run wrote it: its settings (RunConfig's keys) and `resolved:`."""

    settings: dict[str, Any]

    @property
    def resolved(self) -> dict[str, Any]:
        """What training resolved (steps, lr, FLOPs, identity, inputs); empty when absent."""
        section = self.settings.get(RESOLVED_KEY)
        return section if isinstance(section, dict) else {}


def read_run_config(run_dir: str | Path) -> RunConfigFile:
    """The config.yaml of `run_dir` (an empty file: no settings), or RunConfigUnreadable with the reason's
    first line (collect writes it into the runs table's note)."""
    try:
        settings = yaml.safe_load((Path(run_dir) / CONFIG).read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise RunConfigUnreadable(str(err).splitlines()[0]) from None
    if not isinstance(settings, dict):
        raise RunConfigUnreadable("not a mapping")
    return RunConfigFile(settings)


def resolved_of(config_path: Path) -> dict[str, Any]:
    """The `resolved:` section a run wrote into its config.yaml (empty when absent)."""
    section = read_yaml(config_path).get(RESOLVED_KEY)
    return section if isinstance(section, dict) else {}
