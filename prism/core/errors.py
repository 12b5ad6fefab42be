"""User-facing errors: the CLI prints them as one line and exits non-zero, no traceback."""

from __future__ import annotations

from collections.abc import Iterable


class PrismError(Exception):
    """A problem the user can fix (bad name, bad file, bad state); the message says what and where."""


def unknown_name(kind: str, name: str, valid: Iterable[str]) -> PrismError:
    """The error for a name that is not in a registry, listing the valid names."""
    return PrismError(f"unknown {kind} {name!r}; valid: {', '.join(valid)}")


def check_name(kind: str, name: str, valid: Iterable[str]) -> str:
    """Return `name` if it is one of `valid`, else raise the listing error."""
    valid = list(valid)
    if name not in valid:
        raise unknown_name(kind, name, valid)
    return name
