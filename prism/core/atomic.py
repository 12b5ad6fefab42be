"""Write files so that a reader sees either the old file or the whole new one, never a half.

Every output prism writes (metrics.json, checkpoints, plans, CSVs, fits, plots, caches)
goes through here: a later stage, or a rerun after a crash, takes a file's presence as
"finished", so a half-written file must never carry the final name.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prism.core.errors import PrismError

# torch.save reports a full disk as a RuntimeError from its zip writer, not an OSError.
_TORCH_DISK_FULL = ("unexpected pos", "file write failed", "No space left on device")


class DiskFullError(PrismError):
    """No space left where prism writes: one line naming the path, the free space and what is needed."""


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def free_bytes(path: str | os.PathLike) -> int | None:
    """Free bytes (for this user) on the filesystem holding `path` or its nearest existing parent."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def is_disk_full(err: BaseException) -> bool:
    """ENOSPC/EDQUOT as an OSError, or torch.save's RuntimeError for the same condition."""
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(err, RuntimeError) and any(s in str(err) for s in _TORCH_DISK_FULL)


def disk_full(
    path: str | os.PathLike,
    needed: int | None = None,
    free: int | None = None,
    kept: str = "what was finished is kept",
) -> DiskFullError:
    """The one-line error for a full disk at `path`; `needed`: bytes the write needs (when known);
    `free`: the free bytes measured before the write began (a failed writer may still hold the
    blocks of its deleted temporary file, so measuring now can say 0); `kept`: what the rerun
    finds (a writer that removes all it wrote says so)."""
    if free is None:
        free = free_bytes(Path(path).parent)
    need = f"about {human_bytes(needed)} needed" if needed else "more needed"
    have = f"{human_bytes(free)} free" if free is not None else "free space unknown"
    return DiskFullError(
        f"no space left on device writing {path}: {have}, {need}; free space there "
        f"(or move the output elsewhere) and rerun: {kept}"
    )


def folder_kept(out: str | os.PathLike, existed: bool) -> str:
    """`disk_full`'s `kept` for a folder built beside `out` and renamed into place: none of it is kept."""
    return (
        f"the partial build was removed and the old {out} kept as it was"
        if existed
        else f"the partial build was removed (no {out} was made)"
    )


def write_atomic(path: str | os.PathLike, write: Callable[[str], None], expected_bytes: int | None = None) -> Path:
    """Call `write(tmp_path)` on a temporary file beside `path`, then rename it over `path`.

    A full disk becomes a `DiskFullError` naming `path` and the space needed
    (`expected_bytes` when the caller knows it, else what was written so far),
    with the temporary file removed and the old `path` untouched.
    """
    path = Path(path)
    free = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        free = free_bytes(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        if is_disk_full(err):
            raise disk_full(path, expected_bytes) from None
        raise
    os.close(fd)
    try:
        write(tmp)
        _fsync(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as err:
        written = _size(tmp)
        Path(tmp).unlink(missing_ok=True)
        if is_disk_full(err):
            raise disk_full(path, expected_bytes or written or None, free) from None
        raise
    return path


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    def _write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return write_atomic(path, _write, expected_bytes=len(text.encode("utf-8")))


def json_safe(value: Any, nonfinite: str = "string") -> Any:
    """`value` with every non-finite float replaced, tuples as lists, numpy scalars as Python's.

    JSON has no NaN or infinity; Python would write bare `NaN` that other readers
    reject. `nonfinite="string"` writes "nan", "inf", "-inf": what happened stays
    on record (a NaN loss is not a missing one) and `float()` reads it back; run
    files use it. `nonfinite="null"` writes null: for an estimate, "not determined"
    (an unbounded interval end, an undefined exponent); fit results use it.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value) if nonfinite == "string" else None
    if isinstance(value, dict):
        return {k: json_safe(v, nonfinite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, nonfinite) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        return json_safe(value.item(), nonfinite)
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


def replace_dir(tmp: str | os.PathLike, out: str | os.PathLike) -> None:
    """Put the finished folder tmp at out, swapping out any folder there, so a reader sees the
    old set or the new one, never a half-written one."""
    tmp, out = Path(tmp), Path(out)
    if not out.exists():
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.replace(out, old / "d")
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)
