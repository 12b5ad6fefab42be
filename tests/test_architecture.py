"""docs/architecture.md's layout is the tree: every package and module of prism/ is in its picture."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout_block() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## Layout") :]
    return section[section.index("```") + 3 : section.index("```", section.index("```") + 3)]


def test_every_package_of_prism_has_a_line_in_the_layout():
    block = layout_block()
    listed = set(re.findall(r"^ {2,4}(\w+)/", block, flags=re.M))
    packages = {p.parent.name for p in (ROOT / "prism").rglob("__init__.py") if p.parent.name != "prism"}
    missing = sorted(packages - listed - {"sources", "rundir", "kernels"})
    assert not missing, f"packages missing from docs/architecture.md's layout: {missing}"


def test_every_module_is_named_in_the_layout():
    words = set(re.findall(r"\w+", layout_block()))
    modules = {p.stem for p in (ROOT / "prism").rglob("*.py") if p.stem != "__init__" and "sources" not in p.parts}
    missing = sorted(modules - words - {"__main__"})
    assert not missing, f"modules missing from docs/architecture.md's layout: {missing}"


def test_every_package_in_the_layout_is_in_the_tree():
    listed = set(re.findall(r"^ {2,4}(\w+)/", layout_block(), flags=re.M))
    packages = {p.parent.name for p in (ROOT / "prism").rglob("__init__.py")}
    gone = sorted(listed - packages)
    assert not gone, f"docs/architecture.md's layout lists packages that are gone: {gone}"
