#!/usr/bin/env python3
"""A job's set-up file and its `qsub -v` list, for the submit command of profiles/aurora.

    pbs_env.py SETUP_FILE SETUP_JSON "NAME NAME ..."

Writes SETUP_FILE, which jobscript.sh sources first: `export NAME=value` for each named variable
set in this shell (unset ones are left out), then the job's `setup` resource (a JSON list of shell
lines, each of which fails the job when it fails), then the Snakemake call's own variables (OWN).
Prints the variable list of `qsub -v`, which is only PRISM_SETUP=<that file's absolute path>: PBS
Pro passes nothing else into a job without -V (which ALCF discourages), and a value in the -v list
itself would be cut at a comma or a quote, and at a `;`, a space or a `$` by a qsub that passes the
list through a shell (Slurm's Torque-style wrapper does), so every value travels in the file,
quoted for the shell, whatever it holds. A set-up file path that -v cannot carry is refused in one
line. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

# What the one -v value (the set-up file's path) may hold: PBS Pro cuts at commas and quotes, a shell at the rest.
SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+@%:=-]+$")
# Set by the Snakemake call itself for its jobs (prism.workflow.engine: `--forcerun` targets, and
# --keep-going for a pack's own Snakemake); their values may hold newlines, which qsub -v cannot
# carry, so the set-up file exports them.
OWN = ("PRISM_FORCED_TARGETS", "PRISM_KEEP_GOING")


def setup_text(lines: list[str], environ: dict, names: list[str] = ()) -> str:
    """The set-up file: the named variables set here (before the lines, which may use them), the lines, the
    Snakemake call's own variables."""
    body = [f"export {name}={quote(environ[name])}" for name in names if name in environ]
    body += [f"{line} || {{ echo 'prism: set-up line failed: '{quote(line)} >&2; return 2; }}" for line in lines]
    body += [f"export {name}={quote(environ[name])}" for name in OWN if name in environ]
    return "# This job's set-up lines (cluster.setup, and its caches), sourced by jobscript.sh.\n" + "".join(
        line + "\n" for line in body
    )


def quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def variables(setup_file: Path) -> str:
    """The -v list: the set-up file's path alone (the named variables are in the file)."""
    path = str(setup_file.resolve())
    if not SAFE_PATH.match(path):
        raise ValueError(
            f"the job's set-up file {path!r} holds a character qsub -v cannot carry (a comma, quote, space, `;` "
            "or `$`): run the study from a folder whose path has none"
        )
    return f"PRISM_SETUP={path}"


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):  # an empty NAMES may arrive as no argument at all
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    setup_file, setup, names = Path(argv[0]), json.loads(argv[1] or "[]"), " ".join(argv[2:]).split()
    try:
        listed = variables(setup_file)
    except ValueError as err:
        print(f"pbs_env: {err}", file=sys.stderr)
        return 1
    setup_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = setup_file.with_name(f".{setup_file.name}.tmp")
    tmp.write_text(setup_text(setup, dict(os.environ), names))
    tmp.replace(setup_file)
    print(listed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
