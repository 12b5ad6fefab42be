"""Checkpoints: everything a run needs to continue as if it had never stopped.

A checkpoint holds the full (unsharded) model and optimizer state dicts, keyed by
parameter name through torch.distributed.checkpoint's state-dict API, so one
written by a DDP run loads into an FSDP run and vice versa; plus the scheduler,
each rank's data-loader position, the RNG states (python, numpy, torch, device),
the step and the loop's counters. Rank 0 writes `checkpoints/step-NNNNNNNN.pt`
through a temporary file and a rename, so a job killed mid-write leaves the
previous checkpoint as the latest complete one. Every rank reads the file itself
(the run directory is on a shared filesystem in multi-node jobs).

A newest checkpoint that cannot be read (truncated by a full disk, damaged on the
filesystem) is set aside as `step-NNNNNNNN.pt.unreadable` (renamed, never deleted),
with a warning, and the previous one is used (`newest_readable`): a retried job
resumes instead of failing the same way again.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from prism.core.atomic import write_atomic
from prism.core.errors import PrismError
from prism.train.rundir.layout import KEEP_DIR, NAME, checkpoint_dir, filename, final_dir

KEEP = 2


def keep(path: Path) -> Path:
    """Keep checkpoint `path` out of the rotation, in `keep/` beside it (a hard link where possible).

    Other runs start from kept checkpoints (`--init-from`); they move to `final/keep/`
    with the rest when the run finishes.
    """
    kept = path.parent / KEEP_DIR / path.name
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.unlink(missing_ok=True)
    try:
        os.link(path, kept)
    except OSError:
        shutil.copyfile(path, kept)
    return kept


def complete(run_dir: Path) -> list[Path]:
    """Every complete checkpoint, oldest first (temporary and set-aside files never match)."""
    return sorted(p for p in checkpoint_dir(run_dir).glob("step-*.pt") if NAME.match(p.name))


def latest(run_dir: Path) -> Path | None:
    """The newest complete checkpoint (temporary files never match the name pattern)."""
    found = complete(run_dir)
    return found[-1] if found else None


SET_ASIDE_SUFFIX = ".unreadable"


def set_aside(path: Path) -> Path:
    """Rename an unreadable checkpoint out of the resume path (kept for inspection, never deleted)."""
    target = path.with_name(path.name + SET_ASIDE_SUFFIX)
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}{SET_ASIDE_SUFFIX}.{n}")
        n += 1
    os.replace(path, target)
    return target


def read(path: Path) -> dict[str, Any]:
    """The checkpoint's payload; ValueError (with the reason) when it cannot be read or is incomplete."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001 - any unpickling/zip failure means "unreadable"
        raise ValueError(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
    missing = [
        k
        for k in ("step", "model", "optimizer", "scheduler", "loader", "rng", "extra")
        if not isinstance(payload, dict) or k not in payload
    ]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    return payload


def newest_readable(run_dir: Path, is_main: bool = True) -> tuple[Path, dict[str, Any]] | None:
    """(path, payload) of the newest checkpoint that reads; unreadable newer ones are set aside."""
    for path in reversed(complete(run_dir)):
        try:
            return path, read(path)
        except ValueError as why:
            if is_main and path.exists():
                moved = set_aside(path)
                print(
                    f"warning: checkpoint {path} cannot be read ({why}); set aside as {moved.name}, "
                    "resuming from the previous one",
                    file=sys.stderr,
                    flush=True,
                )
    return None


def retire(run_dir: Path) -> None:
    """Keep a finished run's last checkpoints as `final/`, out of the resume path.

    The weights stay for whoever wants them, and a forced rerun (metrics.json
    removed, e.g. by `snakemake --forcerun train`) trains from scratch instead of
    "resuming" at the last step and only re-evaluating.
    """
    src, dst = checkpoint_dir(run_dir), final_dir(run_dir)
    if not src.is_dir():
        return
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(src, dst)


def clear(run_dir: Path) -> None:
    """Drop every in-progress checkpoint (the run starts over)."""
    shutil.rmtree(checkpoint_dir(run_dir), ignore_errors=True)


def remove_partial(run_dir: Path) -> None:
    """Delete temporary files of a checkpoint whose writer was killed mid-write."""
    for tmp in checkpoint_dir(run_dir).glob(".step-*.tmp"):
        tmp.unlink(missing_ok=True)


def rng_state(device: torch.device) -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if device.type in ("cuda", "xpu"):
        state[device.type] = getattr(torch, device.type).get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if device.type in state:
        getattr(torch, device.type).set_rng_state(state[device.type], device)


def _gather(obj: Any) -> list[Any]:
    if dist.is_initialized() and dist.get_world_size() > 1:
        out: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(out, obj)
        return out
    return [obj]


def save(
    run_dir: Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    loader_state: Any,
    extra: dict[str, Any],
    device: torch.device,
    is_main: bool,
) -> Path:
    """Collective (every rank calls it): gather full states, rank 0 writes atomically."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict  # noqa: PLC0415 lazy: torch.distributed.checkpoint.state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_sd, optim_sd = get_state_dict(model, optimizer, options=options)
    loader_states = _gather(loader_state)
    path = checkpoint_dir(run_dir) / filename(step)
    if is_main:
        payload = {
            "step": step,
            "model": model_sd,
            "optimizer": optim_sd,
            "scheduler": scheduler.state_dict(),
            "loader": loader_states,
            "rng": rng_state(device),
            "extra": extra,
        }
        write_atomic(path, lambda tmp: torch.save(payload, tmp), expected_bytes=_tensor_bytes(payload))
        for old in sorted(p for p in path.parent.glob("step-*.pt") if NAME.match(p.name))[:-KEEP]:
            old.unlink(missing_ok=True)
    if dist.is_initialized():
        dist.barrier()
    return path


def _tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors in a (nested) state dict: about the size of the checkpoint file."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def load(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    device: torch.device,
    rank: int,
    fix: str | None = None,
) -> tuple[int, Any, dict[str, Any]]:
    """Read and restore in place; returns (step, this rank's loader state, extra).

    `fix`: what to do when the file cannot be read (default: for a run's own checkpoint).
    """
    try:
        payload = read(path)
    except ValueError as err:  # a corrupt file: say which and what to do
        raise PrismError(
            f"checkpoint {path} cannot be read ({err}); "
            + (fix or ("delete it: a rerun resumes from the previous checkpoint, or starts over without one"))
        ) from None
    return restore(payload, model, optimizer, scheduler, device, rank)


def restore(
    payload: dict[str, Any],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    device: torch.device,
    rank: int,
) -> tuple[int, Any, dict[str, Any]]:
    """Restore a payload from `read` in place; returns (step, this rank's loader state, extra)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict  # noqa: PLC0415 lazy: torch.distributed.checkpoint.state_dict

    set_state_dict(
        model,
        optimizer,
        model_state_dict=payload["model"],
        optim_state_dict=payload["optimizer"],
        options=StateDictOptions(full_state_dict=True),
    )
    scheduler.load_state_dict(payload["scheduler"])
    set_rng_state(payload["rng"], device)
    loaders = payload["loader"]
    loader_state = loaders[rank] if rank < len(loaders) else loaders[0]
    return int(payload["step"]), loader_state, payload["extra"]
