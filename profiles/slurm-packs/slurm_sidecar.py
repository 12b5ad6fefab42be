#!/usr/bin/env -S --ignore-signal=INT python3
"""Cancels this Snakemake run's Slurm jobs when Snakemake stops early (Ctrl-C): profiles/aurora's sidecar
(pbs_sidecar.py, which says why one is needed) with this profile's status folder and `scancel`.
Standard library only."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "aurora"))

import pbs_sidecar  # noqa: E402

if __name__ == "__main__":
    sys.exit(pbs_sidecar.main(Path("logs/slurm/status"), "scancel"))
