"""Fixtures shared by every test package: shard directories built once per session, and `prism` runners.

Fixture files live in tests/fixtures/ (e.g. `tiny_run.yaml`, the small run most training
tests use). Test packages share through these fixtures, never by importing each other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY_RUN = FIXTURES / "tiny_run.yaml"
INJECT_NAN_ENV = "PRISM_TEST_INJECT_NAN_AT_STEP"


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Callable[[str], Path]:
    """`built(family)` -> the path of a shard directory for `family` (seed 0), built on first use.

    Tests must not modify these directories (tests/data's `fresh_copy` gives a private one).
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


@pytest.fixture(scope="session")
def shards(built) -> Path:
    """The text_image shards most training tests read."""
    return built("text_image")


def _run_prism(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != INJECT_NAN_ENV}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "prism", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@pytest.fixture(scope="session")
def run_prism() -> Callable[..., subprocess.CompletedProcess]:
    """`run_prism(*args, env=None, timeout=600)` -> CompletedProcess of `python -m prism ARGS`."""
    return _run_prism


@pytest.fixture(scope="session")
def tiny() -> list[str]:
    """The flags of the tests' tiny run (tests/fixtures/tiny_run.yaml); add --data and --out."""
    return ["--config", str(TINY_RUN)]


@pytest.fixture
def train(shards, tiny) -> Callable[..., subprocess.CompletedProcess]:
    """`train(out, *flags, env=None)` -> CompletedProcess of `prism train` on the tiny run."""

    def run(out: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return _run_prism("train", *tiny, "--data", str(shards), "--out", str(out), *flags, env=env)

    return run
