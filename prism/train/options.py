"""TrainOptions: the settings every run of a study shares, one field per key of the config's `train:` section.

Each field is defined here once, with its default and help: `RunConfig` takes the fields it
shares with this class from it, `prism train` (and `prism isoflop launch`) have one flag per
field, and the workflow parses the section once (`from_mapping`) and passes the fields on.
The library's defaults are `prism train`'s; where the workflow needs another (a number of
threads to schedule jobs by), config/schema.yaml gives it and says why.

Pure Python: no torch, no yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prism.dist.parallel import DEVICES, STRATEGIES
from prism.options import option
from prism.train.precision import PRECISIONS
from prism.train.schedule import COOLDOWN_FRACTION, SCHEDULES
from prism.train.trackers import parse_trackers

LAUNCHERS = ("local", "torchrun", "aurora")
STORAGES = ("local", "lustre", "daos")

# The settings that decide a run's numbers: part of the run's command, so the workflow retrains a
# run when one changes. The other fields say where and how it runs, and retrain nothing.
RESULT_SETTINGS = ("seed", "schedule", "cooldown_fraction", "eval_samples", "final_eval_samples", "precision")
# The fields that are not a run's settings but how `prism train` launches it (its launching flags);
# every other field is also a field of `RunConfig`.
LAUNCH_SETTINGS = ("launcher", "storage")


@dataclass(frozen=True)
class TrainOptions:
    """The training runs' shared settings: `prism train` flags and the config's `train:` section."""

    seed: int = option(0, "seed of the initialisation and of the data order", metavar="S", minimum=0)
    schedule: str = option(
        "cosine",
        "learning-rate schedule after the warm-up: cosine decay to 10%, or wsd (constant, then a cooldown)",
        choices=SCHEDULES,
    )
    # 0 is a one-step cooldown whose only update is at the peak, i.e. constant after the warm-up
    # (a wsd study's stable trajectory, cut into segments that later runs branch off).
    cooldown_fraction: float = option(
        COOLDOWN_FRACTION, "wsd: share of the steps spent in the cooldown", metavar="F", minimum=0, maximum=1
    )
    eval_samples: int = option(
        256, "held-out samples of each evaluation during the run (a fixed subset)", metavar="N", minimum=1
    )
    final_eval_samples: int | None = option(
        None,
        "held-out samples of the final evaluation, the run's loss (default: the whole held-out split)",
        metavar="N",
        minimum=1,
    )
    device: str = option("auto", "device (auto: cuda, then xpu, then cpu)", choices=DEVICES)
    precision: str = option(
        "auto",
        "compute precision: bf16 (mixed: fp32 weights, optimizer state and loss; bf16 matmuls), fp32, "
        "or auto (bf16 on cuda/xpu, fp32 on cpu)",
        choices=PRECISIONS,
    )
    threads: int | None = option(
        None, "CPU threads per process (default: cores / processes on the node)", metavar="N", minimum=1
    )
    launcher: str = option(
        "local",
        "local: train here; torchrun: re-run under torchrun on this node; aurora: PBS job body (with --dry-run)",
        choices=LAUNCHERS,
    )
    strategy: str = option("none", "parallel strategy", choices=STRATEGIES)
    storage: str = option("local", "where the data lives on the cluster (daos mounts it with dfuse)", choices=STORAGES)
    trackers: str | None = option(
        None,
        "also log scalars and the config to these trackers: tensorboard, wandb "
        "(comma-separated; W&B offline unless WANDB_MODE says otherwise)",
        metavar="T1,T2",
    )
    tracker_project: str | None = option(None, "W&B project (default: prism)", metavar="NAME")

    def __post_init__(self) -> None:
        parse_trackers(self.trackers)

    def run_settings(self) -> dict[str, Any]:
        """The settings that decide a run's numbers, as `RunConfig` keywords (a cosine run has no cooldown)."""
        names = [n for n in RESULT_SETTINGS if n != "cooldown_fraction" or self.schedule == "wsd"]
        return {name: getattr(self, name) for name in names}
