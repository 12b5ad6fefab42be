"""Preparing a run directory: resume what can be resumed, start over what cannot.

A rerun of `prism train` on an existing directory resumes from its newest
checkpoint, but only when that checkpoint was trained on the same inputs (the
shards' manifest and the calibration: see `input_fingerprint`) and describes the
same run (the result-changing settings and the steps). Changed inputs start over, as does
a changed identity (a library default that changed since it started: prism.train.identity);
changed settings are refused, naming them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.core.fingerprint import file_digest, record_digest
from prism.core.studylayout import manifest_file
from prism.train.config import TRAJECTORY_FIELDS, RunConfig
from prism.train.rundir import checkpoint, runfiles
from prism.train.rundir.finished import identity_changes_of


def input_fingerprint(config: RunConfig, calibration: dict | None, order: str | None = None) -> dict[str, str | None]:
    """What a run's result depends on beyond its flags: the shards and the calibration, and for a
    streamed split its `order` (ranks, workers, buffer: `prism.data.order.data_order`).

    A rerun whose inputs changed (rebuilt data, a recalibrated model; e.g. Snakemake
    rerunning the job for that reason) starts over instead of resuming checkpoints
    that were trained on something else. A preloaded split adds no key: its order is the seed's.
    """
    inputs = {
        "data_manifest": file_digest(manifest_file(config.data)),
        "calibration": record_digest(calibration),
    }
    if order is not None:
        inputs["data_order"] = order
    return inputs


def changed_inputs(out: Path, inputs: dict[str, str | None]) -> list[str]:
    """The inputs that differ from those the run directory was started on (one it had and lost, too)."""
    path = out / runfiles.CONFIG
    old = runfiles.resolved_of(path).get("inputs") if path.exists() else None
    if not old:
        return []
    names = list(inputs) + [name for name in old if name not in inputs]
    return [name for name in names if old.get(name) != inputs.get(name)]


def changed_identity(config: RunConfig, out: Path) -> list[str]:
    """`["identity (name: old -> new; ...)"]` when the run directory was started under another identity
    (prism.train.identity: a library default changed since), else []: its checkpoints are another run's."""
    changes = identity_changes_of(out, config)
    return [f"identity ({'; '.join(changes)})"] if changes else []


def check_same_run(config: RunConfig, out: Path, steps: int, steps_may_change: bool) -> None:
    """A rerun must describe the same run as the one whose checkpoints it finds.

    Its steps may differ only when it starts over on new inputs (a new calibration
    changes FLOPs per sample, hence steps).
    """
    path = out / runfiles.CONFIG
    if not path.exists():
        return
    diff = config.result_mismatch(RunConfig.from_yaml(path))
    old_steps = runfiles.resolved_of(path).get("steps")
    if old_steps is not None and old_steps != steps and not steps_may_change:
        diff.append(f"steps: {old_steps} -> {steps}")
    if diff:
        raise PrismError(
            f"{out} holds a different run ({'; '.join(diff)}); use another --out or delete {out} to start over"
        )


@dataclass(frozen=True)
class Start:
    """Where a run starts: the checkpoint to resume (None: from scratch) and the inputs that changed."""

    checkpoint: Path | None
    changed: list[str]


def prepare(config: RunConfig, inputs: dict[str, str | None], steps: int, is_main: bool, log=print) -> Start:
    """Clean up the directory for this run and say where it starts.

    Every rank decides alike (from the files, before rank 0 deletes anything); rank 0
    removes half-written checkpoints, clears checkpoints trained on other inputs, and
    drops the log rows of a run that died before its first checkpoint.
    """
    out = config.out_dir
    changed = changed_inputs(out, inputs)
    check_same_run(config, out, steps, steps_may_change=bool(changed))  # refuse before touching any file
    changed += changed_identity(config, out)
    if is_main:
        checkpoint.remove_partial(out)
        if changed:
            log(f"[{config.run_id}] {', '.join(changed)} changed since this run started: starting over")
            checkpoint.clear(out)
    # An unreadable newest checkpoint is set aside (rank 0) and the previous one used.
    found = None if changed else checkpoint.newest_readable(out, is_main)
    latest = found[0] if found else None
    if latest is None and is_main:
        out.mkdir(parents=True, exist_ok=True)
        for name in (runfiles.PERF, runfiles.EVAL):
            (out / name).unlink(missing_ok=True)
    return Start(latest, changed)


def init_checkpoint(source: Path, step: int | None) -> Path:
    """The checkpoint of run directory `source` at `step` (its newest when None): kept ones first.

    A run keeps the checkpoints of `--checkpoint-at` steps in `checkpoints/keep/`, which
    moves to `final/keep/` when it finishes; the rotating ones are looked at too.
    """
    folders = [checkpoint.checkpoint_dir(source), checkpoint.final_dir(source)]
    candidates = [
        p for folder in folders for p in (*sorted(folder.glob("keep/step-*.pt")), *sorted(folder.glob("step-*.pt")))
    ]
    if step is not None:
        candidates = [p for p in candidates if p.name == checkpoint.filename(step)]
    if not candidates:
        at = f"at step {step} " if step is not None else ""
        raise PrismError(
            f"--init-from {source}: no checkpoint {at}there (checkpoints/, final/, and their keep/); "
            "write one with --checkpoint-at on the run that makes it"
        )
    return max(candidates, key=lambda p: p.name) if step is None else candidates[0]


def check_trajectory(config: RunConfig, source: Path, inputs: dict[str, str | None], lr: float, warmup: int) -> None:
    """A run continuing another run's checkpoint must be on its trajectory: same model, data, order, lr."""
    path = source / runfiles.CONFIG
    if not path.exists():
        raise PrismError(f"--init-from {source}: no {runfiles.CONFIG} there (not a run directory)")
    other = RunConfig.from_yaml(path)
    resolved = runfiles.resolved_of(path)
    diff = [
        f"{name}: {getattr(other, name)!r} there, {getattr(config, name)!r} here"
        for name in TRAJECTORY_FIELDS
        if getattr(config, name) != getattr(other, name)
    ]
    mine = {"lr": lr, "warmup": warmup, **{f"inputs.{k}": v for k, v in inputs.items()}}
    theirs = {
        "lr": resolved.get("lr"),
        "warmup": resolved.get("warmup"),
        **{f"inputs.{k}": v for k, v in (resolved.get("inputs") or {}).items()},
    }
    diff += [
        f"{name}: {theirs.get(name)!r} there, {value!r} here"
        for name, value in mine.items()
        if theirs.get(name) != value
    ]
    if diff:
        raise PrismError(
            f"--init-from {source} is another trajectory ({'; '.join(diff)}); a run can only "
            "continue a run of the same model, data, seed, batch, learning rate and warm-up"
        )


def copy_logs(source: Path, out: Path, step: int) -> None:
    """The source run's perf and eval rows up to `step`: the new run's files read as its whole history."""
    for name in (runfiles.PERF, runfiles.EVAL):
        rows = [r for r in runfiles.read_jsonl(source / name) if isinstance(r.get("step"), int) and r["step"] <= step]
        writer = runfiles.JsonlWriter(out / name)
        for row in rows:
            writer.write(row)
        writer.close()


def truncate_logs(out: Path, step: int) -> None:
    """Drop the rows a killed process logged after the checkpoint the run resumes from.

    A final evaluation's row goes too: the resumed run makes its own (one killed after its
    final evaluation but before metrics.json would otherwise leave two).
    """
    runfiles.truncate_after(out / runfiles.PERF, step)
    runfiles.truncate_after(out / runfiles.EVAL, step)
    evals = runfiles.read_jsonl(out / runfiles.EVAL)
    if any(row.get("final") for row in evals):
        write_text_atomic(out / runfiles.EVAL, "".join(json.dumps(row) + "\n" for row in evals if not row.get("final")))
