"""Flag names of the scripts prism replaced (docs/coming-from-prism-tools.md).

An old name that means what the new one means is accepted with one line on stderr
naming the new one, so a user's scripts keep running while they move: since prism 0.1.0,
which replaced the scripts, until 0.2.0, which drops the old names and this module with
them. (An old value prism cannot honour, a script given to `--launcher`, is refused by
prism.launch.LauncherName.)
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
