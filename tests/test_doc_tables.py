"""Every Markdown table of the documentation has rows as wide as its header (a renderer drops
or shifts what does not fit, silently)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SEPARATOR = re.compile(r"^\s*\|(\s*:?-+:?\s*\|)+\s*$")


def cells(line: str) -> int:
    """Cells of a table line: pipes not escaped with a backslash split it (inside code spans too)."""
    return len(re.split(r"(?<!\\)\|", line.strip())) - 2


def tables(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the header, the table's lines) of every table outside fenced code."""
    lines, found, fenced, i = text.splitlines(), [], False, 0
    while i < len(lines):
        if lines[i].lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and lines[i].lstrip().startswith("|") and i + 1 < len(lines) and SEPARATOR.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            found.append((i + 1, lines[i:j]))
            i = j
            continue
        i += 1
    return found


DOCS = [REPO / "README.md", REPO / "scaling-study" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_row_is_as_wide_as_its_header(path):
    for number, table in tables(path.read_text()):
        width = cells(table[0])
        wrong = [(number + k, cells(line)) for k, line in enumerate(table) if cells(line) != width]
        assert not wrong, f"{path.relative_to(REPO)}:{number}: header of {width} cells, but lines {wrong}"


def test_a_separator_with_a_cell_too_many_is_caught():
    text = "| a | b |\n|---|---|---|\n| 1 | 2 |\n"
    ((number, table),) = tables(text)
    assert number == 1 and [cells(line) for line in table] == [2, 3, 2]
