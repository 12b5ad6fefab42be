"""A real PBS-style scheduler (Slurm + Torque-compatible qsub) for the session, stopped by pid."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import local_pbs  # noqa: E402


def local_scheduler(tmp_path_factory, name: str):
    """Start munged, slurmctld and slurmd in a private folder; skip with the reason when impossible."""
    why = local_pbs.missing_requirements()
    if why and os.geteuid() == 0:
        # Root with apt: install the Debian packages (idempotent), then look again.
        subprocess.run(["bash", str(REPO / "tools" / "install-system-deps.sh")], check=False)
        why = local_pbs.missing_requirements()
    if why:
        pytest.skip(f"no local PBS-style scheduler: {why}")
    folder = tmp_path_factory.mktemp(name)
    try:
        client_env = local_pbs.start(folder)
    except local_pbs.SchedulerUnavailable as err:
        pytest.skip(f"no local PBS-style scheduler: {err}")
    try:
        yield {**client_env, "folder": str(folder)}
    finally:
        local_pbs.stop(folder)


@pytest.fixture(scope="session")
def scheduler(tmp_path_factory):
    """The instance of the tests through profiles/aurora (the Torque wrapper's qsub)."""
    yield from local_scheduler(tmp_path_factory, "slurm")


@pytest.fixture(scope="session")
def slurm_scheduler(tmp_path_factory):
    """A second instance, of the tests through profiles/slurm: its own ports and folder, so that `make test`'s two
    workers each run a share of the scheduler tests (tests/conftest.py groups them by this fixture)."""
    yield from local_scheduler(tmp_path_factory, "slurm-native")
