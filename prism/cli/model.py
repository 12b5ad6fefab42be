"""`prism model ...`."""

from __future__ import annotations

import argparse


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    p = verbs.add_parser(
        "list",
        help="Print the backbones, projector variants, families and regimes.",
        description="Print the model registry: a table for people, or --json for programs.",
    )
    p.add_argument(
        "--json", action="store_true", help="print JSON: {backbones: {NAME: {...}}, variants, families, regimes}"
    )
    p.set_defaults(func=_list)


def _list(args: argparse.Namespace) -> int:
    from prism.model.listing import model_list

    print(model_list(args.json))
    return 0
