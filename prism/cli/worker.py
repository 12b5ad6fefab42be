"""`prism worker ...`."""

from __future__ import annotations

import argparse


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "serve",
        help="Serve prism commands from one process that has imported torch (a local study's jobs).",
        description="Import torch and prism once, then run every `prism` command whose environment names "
        "this socket in $PRISM_WORKER in a child forked from here (prism.workflow.worker).",
    )
    p.add_argument("--socket", required=True, help="Unix socket path to listen on")
    p.add_argument("--parent", type=int, default=None, help="exit when this process id is no longer the parent")
    p.add_argument("--idle-timeout", type=float, default=3600.0, help="exit after this many seconds without a request")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from prism.cli import build_parser, main
    from prism.workflow.worker import serve

    serve(args.socket, main, build_parser, parent=args.parent, idle_timeout=args.idle_timeout)
    return 0
