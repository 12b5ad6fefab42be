"""A fast path's switch: off for the length of a block (tests, A/B measurements), then as it was."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager


@contextmanager
def turned_off(state: MutableMapping[str, object], key: str = "enabled") -> Iterator[None]:
    """`state[key]` False inside the block and back to what it was after it, an exception included."""
    before = state[key]
    state[key] = False
    try:
        yield
    finally:
        state[key] = before
