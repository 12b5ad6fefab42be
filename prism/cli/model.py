"""`prism model ...`."""

from __future__ import annotations

import argparse


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
