#!/usr/bin/env python3
"""A job's set-up file and its `qsub -v` list, for the submit command of profiles/aurora.

    pbs_env.py SETUP_FILE SETUP_JSON "NAME NAME ..."

Writes SETUP_FILE (the job's `setup` resource: a JSON list of shell lines, each of which
fails the job when it fails), which jobscript.sh sources first, and prints the variable list
of `qsub -v`: PRISM_SETUP=<that file's absolute path>, then NAME=value for each named
variable set in this shell (unset ones are left out); the Snakemake call's own variables
(OWN) go into the set-up file. PBS Pro passes nothing else into a job
without -V, which ALCF discourages. A value holding a comma, a quote or a newline would be cut
by qsub's list: refused in one line naming the variable. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

UNSAFE = (",", '"', "'", "\n")
# Set by the Snakemake call itself for its jobs (prism.workflow.engine: `--forcerun` targets, and
# --keep-going for a pack's own Snakemake); their values may hold newlines, which qsub -v cannot
# carry, so the set-up file exports them.
OWN = ("PRISM_FORCED_TARGETS", "PRISM_KEEP_GOING")


def setup_text(lines: list[str], environ: dict) -> str:
    body = [f"{line} || {{ echo 'prism: set-up line failed: '{quote(line)} >&2; return 2; }}" for line in lines]
    body += [f"export {name}={quote(environ[name])}" for name in OWN if name in environ]
    return "# This job's set-up lines (cluster.setup, and its caches), sourced by jobscript.sh.\n" + "".join(
        line + "\n" for line in body
    )


def quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def variables(setup_file: Path, names: list[str], environ: dict) -> str:
    pairs = [f"PRISM_SETUP={setup_file.resolve()}"]
    for name in names:
        if name not in environ:
            continue
        value = environ[name]
        if any(c in value for c in UNSAFE):
            raise ValueError(f"{name}={value!r}: qsub -v cannot pass a value with a comma, quote or newline")
        pairs.append(f"{name}={value}")
    return ",".join(pairs)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):  # an empty NAMES may arrive as no argument at all
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    setup_file, setup, names = Path(argv[0]), json.loads(argv[1] or "[]"), " ".join(argv[2:]).split()
    try:
        listed = variables(setup_file, names, dict(os.environ))
    except ValueError as err:
        print(f"pbs_env: {err}", file=sys.stderr)
        return 1
    setup_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = setup_file.with_name(f".{setup_file.name}.tmp")
    tmp.write_text(setup_text(setup, dict(os.environ)))
    tmp.replace(setup_file)
    print(listed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
