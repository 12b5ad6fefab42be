"""`python -m prism.cli.slots --slots N --device D -- COMMAND`: one run of a pack on free device slots.

A packed job's command starts with it (prism.workflow.resources); the claim, the pin and the release are
prism.launch.slots'. Its exit status is the command's.
"""

from __future__ import annotations

import argparse
import os
import sys

from prism.launch.slots import DEVICES_ENV, PROGRAM, run_pinned


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, required=True, help="devices of the node (cluster.ranks_per_node)")
    parser.add_argument(
        "--devices",
        type=int,
        default=int(os.environ.get(DEVICES_ENV) or 1),
        help=f"slots the command holds at once, a spread run's ranks (default: ${DEVICES_ENV}, else 1)",
    )
    parser.add_argument("--device", default="cpu", help="xpu, cuda, cpu or auto: which variable pins the device")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.slots < 1 or not command:
        parser.error("give --slots N (N >= 1) and a command after --")
    if not 1 <= args.devices <= args.slots:
        parser.error(f"--devices {args.devices}: give 1 to --slots ({args.slots})")
    return run_pinned(command, args.slots, args.device, devices=args.devices)


if __name__ == "__main__":
    sys.exit(main())
