"""Shards built once per session and a `prism train` runner; tests/dist uses them too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Small and quick: the 30k backbone, 8-sample batches, 1 thread (robust on a busy 2-core machine).
TINY = ["--family", "text_image", "--backbone", "30k", "--variant", "BASE", "--regime", "e2e",
        "--budget", "3e11", "--global-batch", "8", "--eval-samples", "32", "--threads", "1"]


@pytest.fixture(scope="session")
def shards(tmp_path_factory) -> Path:
    from prism.data.shards import build

    out = tmp_path_factory.getbasetemp() / "shards_text_image"
    if not (out / "manifest.json").exists():
        build("text_image", out, seed=0)
    return out


def run_prism(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "PRISM_TEST_INJECT_NAN_AT_STEP"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "prism", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@pytest.fixture
def train(shards):
    """`train(out, *flags, env=None)` -> CompletedProcess of `prism train` on the tiny settings."""

    def run(out: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return run_prism("train", *TINY, "--data", str(shards), "--out", str(out), *flags, env=env)

    return run
