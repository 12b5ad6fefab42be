"""Shard directories built once per test session (a build takes seconds; many tests read one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """`built(family)` -> the path of a shard directory for `family` (seed 0), built on first use.

    Tests must not modify these directories; `fresh_copy` gives a private one.
    """
    from prism.data.shards import build

    root = tmp_path_factory.mktemp("shards")
    cache: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family not in cache:
            build(family, root / family, seed=0)
            cache[family] = root / family
        return cache[family]

    return get


@pytest.fixture
def fresh_copy(built, tmp_path):
    """`fresh_copy(family)` -> a private copy of the built directory that a test may damage."""

    def get(family: str) -> Path:
        dst = tmp_path / f"copy_{family}"
        shutil.copytree(built(family), dst)
        for p in dst.iterdir():
            p.chmod(0o644)
        return dst

    return get


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch):
    """Tests start without data-location variables; those that need one set it."""
    for var in ("WEBDATASET_LOCAL_PATH", "WDS_LOCAL_PATH", "PRISM_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
