"""The content digests a run records of its inputs, so that "same inputs" means same bytes.

`prism train` records them in the run's config.yaml (and `final/finished.json`);
`prism isoflop collect` recomputes them for the study's current data and calibration
to tell a stale run from a current one. One recipe for both, here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def file_digest(path: str | Path) -> str | None:
    """sha256 of a file's bytes (a data manifest: it lists every shard's sha256); None if missing."""
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def record_digest(record: dict | None) -> str | None:
    """sha256 of a JSON record as sorted JSON (a calibration: its content, not its file's layout)."""
    if not record:
        return None
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
