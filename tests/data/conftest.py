"""Private shard copies a test may damage, and no data-location variables (the built shards: tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def fresh_copy(built, tmp_path):
    """`fresh_copy(family)` -> a private copy of the built directory that a test may damage."""

    def get(family: str) -> Path:
        dst = tmp_path / f"copy_{family}"
        shutil.copytree(built(family), dst)
        for p in dst.iterdir():
            if p.is_file():
                p.chmod(0o644)
        return dst

    return get


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch):
    """Tests start without data-location variables; those that need one set it."""
    for var in ("WEBDATASET_LOCAL_PATH", "WDS_LOCAL_PATH", "PRISM_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
