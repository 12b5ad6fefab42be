"""`git_rev()`: which prism source produced a result, recorded in every run and benchmark row."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path


@functools.cache
def git_rev() -> str:
    """The short commit of this prism checkout, `+dirty` if `prism/` is modified; resolved once per process.

    Outside a git checkout: `$PRISM_GIT_REV` if set, else `unknown`.
    """
    root = Path(__file__).resolve().parents[1]
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no",
                                "--", "prism"], capture_output=True, text=True, timeout=5).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("PRISM_GIT_REV", "unknown")
