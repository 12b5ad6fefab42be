"""A registry's names as a sequence read each time it is asked.

A config field's choices (its flag's, its schema's) that a registry holds: a name registered after the
field was defined is a choice too. Where the registry lives a layer up, it tells the sequence where to
read when it is imported (`read_from`); asked before that, the sequence says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prism.core.errors import PrismError


class LiveNames(Sequence[str]):
    def __init__(self, read: Callable[[], tuple[str, ...]] | None = None, unset: str = "no names yet") -> None:
        self._read, self._unset = read, unset

    def read_from(self, read: Callable[[], tuple[str, ...]]) -> None:
        self._read = read

    def _now(self) -> tuple[str, ...]:
        if self._read is None:
            raise PrismError(self._unset)
        return self._read()

    def __getitem__(self, index):  # an index or a slice, as a tuple's
        return self._now()[index]

    def __len__(self) -> int:
        return len(self._now())

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __contains__(self, name: object) -> bool:
        return name in self._now()

    def __repr__(self) -> str:
        return repr(self._now())
