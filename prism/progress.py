"""Progress of a long command on a terminal, and silence elsewhere (CI, Snakemake logs, PBS job output).

tqdm draws the bar where it is installed; without it, one line rewritten in place. Nothing
is written unless the stream is a terminal, so a log keeps only the command's own lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")


def is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress(
    items: Iterable[T], label: str, total: int | None = None, stream: IO[str] | None = None, bar: bool = True
) -> Iterator[T]:
    """Yield `items`, showing `label i/total` on a terminal (`bar`: tqdm's bar when installed)."""
    stream = sys.stderr if stream is None else stream
    if not is_terminal(stream):
        yield from items
        return
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if bar:
        try:
            from tqdm import tqdm
        except ImportError:
            pass
        else:
            yield from tqdm(items, desc=label, total=total, file=stream, leave=False, dynamic_ncols=True)
            return
    start, done = time.perf_counter(), 0
    of = f"/{total}" if total else ""
    try:
        for item in items:
            stream.write(f"\r{label}: {done}{of} ({time.perf_counter() - start:.0f} s)")
            stream.flush()
            yield item
            done += 1
    finally:
        stream.write("\r\033[K")  # clear the line: the command's own output follows
        stream.flush()
