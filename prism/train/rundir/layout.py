"""Where a run directory keeps its checkpoints: the one spelling of their paths (no torch).

A running job writes `checkpoints/step-NNNNNNNN.pt` (rotating) and keeps the steps of
`--checkpoint-at` in `checkpoints/keep/`; a finished run's `checkpoints/` becomes `final/`.
Another run starts from a kept checkpoint of a finished one (`--init-from RUN --init-step
STEP`), so the workflow names those files too: `kept_checkpoint` and `kept_origin` are
what it calls, never a path of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = re.compile(r"^step-(\d{8})\.pt$")
CHECKPOINTS_DIR = "checkpoints"
FINAL_DIR = "final"
KEEP_DIR = "keep"


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINTS_DIR


def final_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / FINAL_DIR


def filename(step: int | str) -> str:
    """`step-NNNNNNNN.pt`; a text step is taken as already spelt so (a Snakemake wildcard such as `{end}`)."""
    return f"step-{step}.pt" if isinstance(step, str) else f"step-{int(step):08d}.pt"


def kept_checkpoint(run_dir: str | Path, step: int | str) -> str:
    """The kept checkpoint of finished run `run_dir` at `step`: RUN/final/keep/step-NNNNNNNN.pt, as text."""
    return f"{run_dir}/{FINAL_DIR}/{KEEP_DIR}/{filename(step)}"


def kept_origin(path: str | Path) -> tuple[str, int]:
    """(run directory, step) of a kept checkpoint's path: what `prism train --init-from --init-step` take."""
    run_dir, sep, name = str(path).rpartition(f"/{FINAL_DIR}/{KEEP_DIR}/")
    match = NAME.match(name)
    if not sep or not match:
        raise ValueError(f"{path} is not a kept checkpoint (RUN/final/keep/step-NNNNNNNN.pt)")
    return run_dir, int(match.group(1))
