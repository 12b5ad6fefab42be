"""Read one perf.jsonl, tolerating the damage a killed job leaves (a truncated last line)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BadLine:
    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def read_perf(path: Path) -> tuple[list[dict], list[BadLine]]:
    """The JSON objects of `path` in order, and the lines that were not one (with their numbers)."""
    rows: list[dict] = []
    bad: list[BadLine] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, text in enumerate(fh, start=1):
            text = text.strip()
            if not text:
                continue
            try:
                obj = json.loads(text)
            except ValueError as err:
                bad.append(BadLine(path, number, f"not JSON ({err.msg} at column {err.colno})"))
                continue
            if not isinstance(obj, dict):
                bad.append(BadLine(path, number, f"not a JSON object ({type(obj).__name__})"))
                continue
            rows.append(obj)
    return rows, bad
