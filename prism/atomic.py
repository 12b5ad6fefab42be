"""Write files so that a reader sees either the old file or the whole new one, never a half.

Every output prism writes (metrics.json, checkpoints, plans, CSVs, fits, plots, caches)
goes through here: a later stage, or a rerun after a crash, takes a file's presence as
"finished", so a half-written file must never carry the final name.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call `write(tmp_path)` on a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        _fsync(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    def _write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return write_atomic(path, _write)


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float as its string ("nan", "inf", "-inf").

    JSON has no NaN or infinity; Python would write bare `NaN` that other readers
    reject. A string keeps what happened (a NaN loss is not a missing one) and
    `float()` reads it back.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        return json_safe(value.item())
    return value


def write_json_atomic(path: str | os.PathLike, data: Any, **dumps: Any) -> Path:
    """`data` as JSON (non-finite floats as strings; keyword arguments go to json.dumps), newline-terminated."""
    return write_text_atomic(path, json.dumps(json_safe(data), **dumps) + "\n")


def _fsync(path: str) -> None:
    """Flush the data to disk before the rename makes it visible (a crash must not leave an empty file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    """The process umask (mkstemp makes 0600 files; outputs should be as readable as any other)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
