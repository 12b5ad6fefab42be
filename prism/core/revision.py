"""`git_rev()`: which prism source produced a result, recorded in every run and benchmark row."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from pathlib import Path

SOURCE_SUFFIXES = {".py", ".cpp"}


@functools.cache
def git_rev() -> str:
    """The short commit of this prism checkout, `+dirty` if `prism/` is modified; resolved once per process.

    Outside a git checkout: `$PRISM_GIT_REV` if set, else `unknown`.
    """
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "prism"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("PRISM_GIT_REV", "unknown")


def source_hash(root: Path | None = None) -> str:
    """sha256 of every prism source file (Python and the kernels' C++; paths and contents): which code a
    process imported.

    Read again on each call, so a process that takes it when it imports prism holds the hash of
    the code it runs; another process's hash then says whether that is the same code.
    """
    root = Path(__file__).resolve().parents[1] if root is None else Path(root)
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"unreadable")
        digest.update(b"\0")
    return digest.hexdigest()
