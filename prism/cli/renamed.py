"""Flag names of the scripts prism replaced (docs/coming-from-prism-tools.md).

An old name that means what the new one means is accepted with one line on stderr
naming the new one, so a user's scripts keep running while they move; an old value
prism cannot honour is refused in one line that says what to give instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


class Renamed(argparse.Action):
    """Store the value; given under an old name (`old`), say the new one on stderr first."""

    def __init__(self, option_strings: Sequence[str], dest: str, old: Sequence[str] = (), **kwargs) -> None:
        self.old = tuple(old)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if option_string in self.old:
            new = next(o for o in self.option_strings if o not in self.old)
            print(
                f"{parser.prog}: {option_string} is deprecated, use {new} (same meaning; the old name will go)",
                file=sys.stderr,
            )
        setattr(namespace, self.dest, values)


def add_renamed(parser, new: str, *old: str, help: str = "", **kwargs) -> argparse.Action:
    """`new` with `old` as deprecated spellings of it (named at the end of its help)."""
    names = ", ".join(old)
    return parser.add_argument(new, *old, action=Renamed, old=old, help=f"{help} (old name: {names})", **kwargs)


class LauncherName(argparse.Action):
    """A launcher by name; a script path (what the old launch tool took) is refused in one line."""

    def __init__(self, option_strings: Sequence[str], dest: str, names: Sequence[str] = (), **kwargs) -> None:
        self.names = tuple(names)
        super().__init__(option_strings, dest, metavar="{" + ",".join(self.names) + "}", **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if values not in self.names:
            choices = ", ".join(self.names)
            if "/" in values or values.endswith((".sh", ".py", ".pbs")):
                why = (
                    f"takes a launcher name ({choices}), not a script ({values}): prism writes the command "
                    "or job body itself; `--dry-run` prints it, and a site of its own adapts prism/launch/"
                )
            else:
                why = f"{values!r} is not a launcher; choose one of {choices}"
            parser.exit(2, f"{parser.prog}: error: {option_string} {why}\n")
        setattr(namespace, self.dest, values)
