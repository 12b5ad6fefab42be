"""Experiment trackers (TensorBoard, Weights & Biases): a run's scalars where researchers look for them.

The trainer talks to one object, `Tracking` (`train(row)`, `eval(row)`, `close()`),
built by `open_tracking(config, ...)` on rank 0; with no trackers configured it does
nothing and imports nothing, so neither package is needed unless asked for.

Names, so that a tracker's UI shows a study as one group:
- group: `config.tracker_group` (the workflow passes `STUDY-FAMILY-REGIME`), else
  `FAMILY-REGIME`; the W&B project is `config.tracker_project` (default `prism`).
- run name: the run id; a wsd run with no cooldown (a stable trajectory's segment) is
  named after its trajectory, `BACKBONE-VARIANT-REGIME-B{batch}`, so every segment
  extends one curve and each cooldown branch (its own run id) starts at the step it
  branched off: no step is logged twice.
- TensorBoard: `TRACKER_DIR/tensorboard/GROUP/NAME/`; W&B: `TRACKER_DIR/wandb/`, offline
  unless `WANDB_MODE` says otherwise (compute nodes often have no internet: `wandb sync`
  uploads the run folders later), one W&B run per name (its id derived from the names).

Steps are the run's optimizer steps. A resumed run re-logs the steps after its checkpoint;
TensorBoard's `purge_step` drops the killed process's events past it, so a curve never
doubles back.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import yaml

from prism.core.errors import PrismError
from prism.core.ids import format_budget

TRACKERS = ("tensorboard", "wandb")
DEFAULT_PROJECT = "prism"

# perf.jsonl keys logged as train/<key>; eval.jsonl's loss as eval/loss (eval/final_loss at the end).
TRAIN_KEYS = (
    "loss",
    "lr",
    "grad_norm",
    "tokens",
    "samples",
    "flops",
    "samples_per_s",
    "tokens_per_s",
    "step_time_s",
    "data_wait_s",
    "mfu",
    "mfu_cpu",
)


def parse_trackers(text: str | None) -> tuple[str, ...]:
    """`"tensorboard,wandb"` -> ("tensorboard", "wandb"); an unknown name is an error naming the choices."""
    names = tuple(dict.fromkeys(part.strip() for part in (text or "").split(",") if part.strip()))
    for name in names:
        if name not in TRACKERS:
            raise PrismError(
                f"trackers: unknown tracker {name!r}; choose from {', '.join(TRACKERS)} (comma-separated), or none"
            )
    return names


def run_name(config: Any) -> str:
    """The tracker run a training run writes to (a stable wsd segment: its trajectory's)."""
    if config.schedule == "wsd" and config.cooldown_fraction == 0:
        return f"{config.backbone}-{config.variant}-{config.regime}-B{config.global_batch}"
    return config.run_id


def group_name(config: Any) -> str:
    return config.tracker_group or f"{config.family}-{config.regime}"


def tracker_dir(config: Any) -> Path:
    return Path(config.tracker_dir) if config.tracker_dir else Path(config.out) / "tracking"


def train_scalars(row: dict[str, Any]) -> dict[str, float]:
    return {f"train/{key}": float(row[key]) for key in TRAIN_KEYS if _number(row.get(key))}


def eval_scalars(row: dict[str, Any]) -> dict[str, float]:
    if not _number(row.get("loss")):
        return {}
    if row.get("final"):
        out = {"eval/final_loss": float(row["loss"])}
        if _number(row.get("loss_se")):
            out["eval/final_loss_se"] = float(row["loss_se"])
        return out
    return {"eval/loss": float(row["loss"])}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Tracker(Protocol):
    def log(self, step: int, scalars: dict[str, float]) -> None: ...

    def close(self) -> None: ...


class TensorBoardTracker:
    """One SummaryWriter per run name; purge_step on resume keeps each step's events unique."""

    def __init__(self, log_dir: Path, start_step: int, config_text: str):
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 lazy: optional tensorboard
        except ImportError:
            raise PrismError(
                "trackers: tensorboard is not installed; pip install -e '.[track]' "
                "(or remove tensorboard from train.trackers)"
            ) from None
        log_dir.mkdir(parents=True, exist_ok=True)
        self.writer = SummaryWriter(str(log_dir), purge_step=start_step + 1 if start_step else None)
        self.writer.add_text("config", config_text, global_step=start_step)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


class WandbTracker:
    """A W&B run (offline unless WANDB_MODE says otherwise), resumed by its derived id."""

    def __init__(self, root: Path, project: str, group: str, name: str, config: dict[str, Any], tags: list[str]):
        root.mkdir(parents=True, exist_ok=True)
        wandb = _import_wandb(root / "wandb" / "tmp")  # beside its offline-run-* folders
        mode = os.environ.get("WANDB_MODE") or "offline"
        self.run = wandb.init(
            project=project,
            group=group,
            name=name,
            id=wandb_id(project, group, name),
            dir=str(root),
            config=config,
            tags=tags,
            mode=mode,
            resume="allow",
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True),
        )

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.run.log({**scalars, "step": step}, step=step)

    def close(self) -> None:
        self.run.finish()


def _import_wandb(scratch: Path) -> ModuleType:
    """wandb, its scratch folders made under `scratch` rather than the system's temp folder.

    wandb makes them when imported and removes them at interpreter exit, which a job
    forked by the local worker (`prism.workflow.worker`) never reaches: it ends with os._exit.
    Beside the runs they stay with the study instead of piling up in /tmp.
    """
    before = tempfile.tempdir
    scratch.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(scratch)
    try:
        import wandb  # noqa: PLC0415 lazy: optional wandb
    except ImportError:
        raise PrismError(
            "trackers: wandb is not installed; pip install -e '.[track]' (or remove wandb from train.trackers)"
        ) from None
    finally:
        tempfile.tempdir = before
    return wandb


def wandb_id(project: str, group: str, name: str) -> str:
    """A stable id per (project, group, name): a resumed run and every segment of a trajectory share it."""
    digest = hashlib.sha1(f"{project}/{group}/{name}".encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', name)[:48]}-{digest}"


class Tracking:
    """What the trainer calls: rows in, scalars out to every configured tracker."""

    def __init__(self, trackers: list[Tracker] | None = None):
        self.trackers = trackers or []
        self.last_step = -1

    def train(self, row: dict[str, Any]) -> None:
        self._log(row.get("step"), train_scalars(row))

    def eval(self, row: dict[str, Any]) -> None:
        self._log(row.get("step"), eval_scalars(row))

    def _log(self, step: Any, scalars: dict[str, float]) -> None:
        if not self.trackers or not isinstance(step, int) or not scalars:
            return
        for tracker in self.trackers:
            tracker.log(step, scalars)

    def close(self) -> None:
        trackers, self.trackers = self.trackers, []
        for tracker in trackers:
            tracker.close()


def open_tracking(config: Any, start_step: int, resolved: dict[str, Any], enabled: bool = True) -> Tracking:
    """The trackers `config.trackers` names (none off rank 0), opened for a run starting after `start_step`."""
    names = parse_trackers(config.trackers)
    if not enabled or not names:
        return Tracking()

    group, name = group_name(config), run_name(config)
    settings = {
        **config.to_dict(),
        "resolved": resolved,
        "size": config.backbone,
        "params": resolved.get("params"),
        "tracker_run": name,
    }
    root = tracker_dir(config)
    trackers: list[Tracker] = []
    try:
        if "tensorboard" in names:
            text = "```\n" + yaml.safe_dump(_plain(settings), sort_keys=False) + "```"
            trackers.append(TensorBoardTracker(root / "tensorboard" / group / name, start_step, text))
        if "wandb" in names:
            tags = [config.family, config.regime, config.backbone, config.variant, f"C{format_budget(config.budget)}"]
            trackers.append(
                WandbTracker(root, config.tracker_project or DEFAULT_PROJECT, group, name, _plain(settings), tags)
            )
    except BaseException:
        Tracking(trackers).close()
        raise
    return Tracking(trackers)


def _plain(value: Any) -> Any:
    """YAML/JSON-safe copy (paths and other objects as strings)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
