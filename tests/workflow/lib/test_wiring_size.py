"""The Snakefile and rules/*.smk are wiring: the workflow's Python lives in prism.workflow."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# Snakemake's keywords that open a block of wiring (a rule and its directives, and the like).
KEYWORDS = re.compile(
    r"^\s*(rule\b|checkpoint\b|localrules:|wildcard_constraints:|include:|configfile:|report:|"
    r"onstart:|onsuccess:|onerror:|min_version\()"
)
LIMIT = 150


def python_lines(text: str) -> list[str]:
    """The lines of a Snakemake file outside its keyword blocks, blank lines and comments left out."""
    out, block = [], None  # block: the indent of the keyword line whose body we are in
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if block is not None and indent > block:
            continue
        block = None
        if KEYWORDS.match(line):
            block = indent
            continue
        out.append(line)
    return out


def workflow_files() -> list[Path]:
    return [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]


def test_a_rule_block_is_wiring_and_code_around_it_is_counted():
    text = (
        'import os\nX = 1\n\nrule a:\n    input:\n        f(x),\n    shell:\n        "true"\n\n'
        "# c\nfor f in F:\n\n    rule:\n        name:\n            f\n"
    )
    assert python_lines(text) == ["import os", "X = 1", "for f in F:"]


def test_the_workflow_files_hold_little_python_outside_rules():
    counts = {path.name: len(python_lines(path.read_text())) for path in workflow_files()}
    assert sum(counts.values()) <= LIMIT, (
        f"{sum(counts.values())} lines of Python outside rules (at most {LIMIT}): {counts}"
    )


def test_no_rule_file_asks_which_schedule_a_study_has():
    """The schedule is decided once, in prism.workflow.jobs; the rules read its object."""
    for path in workflow_files():
        assert not re.search(r"\.schedule\s*==|\[\"schedule\"\]", path.read_text()), path.name
