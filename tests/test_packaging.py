"""The cluster requirements file installs what pyproject.toml pins, less torch."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_cluster_requirements_are_the_projects_less_torch():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    expected = {dep for dep in pyproject["project"]["dependencies"] if not dep.startswith("torch")}
    lines = (REPO / "requirements-cluster.txt").read_text().splitlines()
    listed = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    assert listed == expected, "requirements-cluster.txt differs from pyproject.toml's dependencies (less torch)"
