"""`StartupClock`: where a job's seconds before its first step go, in every rank.

A cluster job of a small model can spend as long starting as stepping, and the share differs by
phase: the interpreter's imports (torch, the collective backend's modules) in every rank at once on
a shared filesystem, the process group's rendezvous, the model's build and wrapping, the loader's
workers and first batch, a checkpoint's load, the first step (which compiles under torch.compile).
The trainer opens each phase where it does the work (`phase`) and the clock decides the rest: it
closes with the job's first step (`close`), after which it records nothing more. The record is the
slowest rank's seconds per phase (`slowest`): the job waits for the last rank to arrive.

Phases, in seconds (None where this job did not have the phase, e.g. a resume in a fresh run):
`imports` (process start to the trainer's modules imported), `process_group`, `model_build` (the
model, its budget, activation checkpointing, wrapping, the optimizer), `loader` (opening it),
`kernel_build` (the fused CPU kernels' build or cached load), `resume` (loading a checkpoint),
`first_eval` (the evaluation at step 0 of a fresh run), `first_batch` (waiting for it), `first_step` (forward, backward
and update of the first batch: the compile, where compiling), and `to_first_step` (process start to
the end of the first step: all of the above and what lies between them).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prism.train.timing import PhaseClock

PHASES = (
    "imports", "process_group", "model_build", "loader", "kernel_build", "resume", "first_eval", "first_batch",
    "first_step", "to_first_step",
)  # fmt: skip


class StartupClock(PhaseClock):
    """Seconds per start-up phase of this rank's job, until its first step (a phase may come in parts;
    nothing is added once closed)."""

    def __init__(self, imports_s: float | None, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float | None] = dict.fromkeys(PHASES)
        self.seconds["imports"] = imports_s
        self.closed = False

    def add(self, name: str, seconds: float) -> None:
        if name not in self.seconds:
            raise ValueError(f"unknown start-up phase {name!r} (one of {', '.join(PHASES)})")
        if not self.closed:
            self.seconds[name] = (self.seconds[name] or 0.0) + seconds

    def close(self, first_batch_s: float, first_step_s: float, to_first_step_s: float | None) -> None:
        """The job's first step is done: its batch's wait, the step itself, the process's age; the clock stops."""
        self.add("first_batch", first_batch_s)
        self.add("first_step", first_step_s)
        if to_first_step_s is not None:
            self.add("to_first_step", to_first_step_s)
        self.closed = True

    def record(self) -> dict[str, float | None]:
        """`{phase}_s` for every phase (None where the job had none)."""
        return {f"{name}_s": value for name, value in self.seconds.items()}


def slowest(record: dict[str, float | None], reduce_max: Callable[[list[float]], list[float]]) -> dict:
    """`record` with each phase the most any rank spent (`reduce_max`: element-wise max over the ranks,
    of a list where -1 stands for a phase this rank did not have)."""
    keys = list(record)
    values = reduce_max([-1.0 if record[k] is None else float(record[k]) for k in keys])  # type: ignore[arg-type]
    return {k: (None if v < 0 else v) for k, v in zip(keys, values)}
