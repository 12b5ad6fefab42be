"""Progress of a long command on a terminal, and silence elsewhere (CI, Snakemake logs, PBS job output).

tqdm draws the bar where it is installed (the `progress` extra); without it, one line
rewritten in place. Nothing is written unless the stream is a terminal, so a log keeps
only the command's own lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")
REDRAW_S = 0.1  # the plain line's least time between redraws


def is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Bar:
    """`label done/total` on a terminal; `note` prints a line of the command's own above it.

    Off a terminal it draws nothing and `note` is a plain print, so a log reads as before.
    """

    def __init__(self, label: str, total: int | None = None, stream: IO[str] | None = None, bar: bool = True):
        self.stream = sys.stderr if stream is None else stream
        self.label, self.total, self.done, self.detail = label, total, 0, ""
        self.shown = is_terminal(self.stream)
        self.start = time.perf_counter()
        self.drawn = self.start
        self.tqdm = None
        if self.shown and bar:
            try:
                from tqdm import tqdm  # noqa: PLC0415 lazy: tqdm, an optional nicety
            except ImportError:
                pass
            else:
                self.tqdm = tqdm(desc=label, total=total, file=self.stream, leave=False, dynamic_ncols=True)
        self._draw(force=True)

    def _draw(self, force: bool = False) -> None:
        if not self.shown or self.tqdm is not None:
            return
        now = time.perf_counter()
        if not (force or self.done == self.total or now - self.drawn >= REDRAW_S):
            return  # a fast loop rewrites the line a few times a second, not once an item
        self.drawn = now
        of = f"/{self.total}" if self.total else ""
        detail = f" {self.detail}" if self.detail else ""
        elapsed = now - self.start
        self.stream.write(f"\r\033[K{self.label}: {self.done}{of}{detail} ({elapsed:.0f} s)")
        self.stream.flush()

    def advance(self, n: int = 1, detail: str | None = None) -> None:
        """`n` more done; `detail` (e.g. what runs now) shown after the count."""
        self.done += n
        if detail is not None:
            self.detail = detail
        if self.tqdm is not None:
            if detail is not None:
                self.tqdm.set_postfix_str(detail, refresh=False)
            self.tqdm.update(n)
        self._draw(force=detail is not None)  # what runs now shows at once

    def describe(self, detail: str) -> None:
        self.advance(0, detail)

    def note(self, text: str) -> None:
        """A line of the command's output (stdout), above the bar."""
        if not self.shown:
            print(text, flush=True)
        elif self.tqdm is not None:
            self.tqdm.write(text, file=sys.stdout)
            sys.stdout.flush()
        else:
            self.stream.write("\r\033[K")
            self.stream.flush()
            print(text, flush=True)
            self._draw(force=True)

    def close(self) -> None:
        """Clear the bar: the command's own output follows."""
        if self.tqdm is not None:
            self.tqdm.close()
        elif self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
        self.shown = False

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    with Bar(label, total, stream, bar) as shown:
        for item in items:
            yield item
            shown.advance()
