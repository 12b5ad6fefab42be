"""The cluster requirements file installs what pyproject.toml pins, less torch."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_cluster_requirements_are_the_projects_less_torch():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    expected = {dep for dep in pyproject["project"]["dependencies"] if not dep.startswith("torch")}
    lines = (REPO / "requirements-cluster.txt").read_text().splitlines()
    listed = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    assert listed == expected, "requirements-cluster.txt differs from pyproject.toml's dependencies (less torch)"


def test_license_and_citation_say_what_pyproject_says():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert pyproject["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["title"] and citation["authors"]
    assert (citation["version"], citation["license"]) == (pyproject["version"], pyproject["license"])


def test_links_between_the_documents_resolve():
    """A relative link in README.md or docs/*.md names a file of the repository."""
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert broken == []
