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

from prism.core.names import LiveNames
from prism.core.options import option
from prism.parallel.config import STRATEGIES
from prism.runtime import DEVICES
from prism.train.lr_schedule import COOLDOWN_FRACTION, SCHEDULES
from prism.train.precision import PRECISIONS
from prism.train.trackers import DEFAULT_PROJECT, TRACKERS, parse_trackers

# The launchers' names, as `prism.launch.registry` holds them: the `launcher` field's choices (its flag's,
# its config key's). The launchers are defined a layer up (prism.launch), which says where to read them.
LAUNCHERS = LiveNames(unset="no launcher is registered yet: import prism.launch, which registers them")
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

    seed: int = option(
        0,
        "seed of the initialisation and of the data order",
        metavar="S",
        minimum=0,
        doc="Seed of every run (initialisation and data order).",
    )
    schedule: str = option(
        "cosine",
        "learning-rate schedule after the warm-up: cosine decay to 10%, or wsd (constant, then a cooldown)",
        choices=SCHEDULES,
        doc=(
            "Learning-rate schedule after the warm-up - cosine (decay to 10%) or wsd (constant, then a "
            "cooldown): with wsd every model trains one constant-rate trajectory and each run is a cooldown "
            "branch off it (rules/wsd.smk). A rerun trigger. wsd pays where sizes take several budgets: one "
            "trajectory per size serves them all, for a fraction of the FLOPs of independent cosine runs."
        ),
    )
    # 0 is a one-step cooldown whose only update is at the peak, i.e. constant after the warm-up
    # (a wsd study's stable trajectory, cut into segments that later runs branch off).
    cooldown_fraction: float = option(
        COOLDOWN_FRACTION,
        "wsd: share of the steps spent in the cooldown",
        metavar="F",
        minimum=0,
        maximum=1,
        doc="wsd only; the last this share of a run's steps cools down ((1-sqrt) to zero).",
        schema={"exclusiveMinimum": 0, "exclusiveMaximum": 1, "minimum": None, "maximum": None},
    )
    eval_samples: int = option(
        256,
        "held-out samples of each evaluation during the run (a fixed subset)",
        metavar="N",
        minimum=1,
        doc=(
            "Held-out samples of each intermediate evaluation (about 10 a run; the training curve only, not the"
            " run's loss). A rerun trigger. Runs of a few hundred steps want a few dozen: they would otherwise "
            "spend a large share of their time evaluating."
        ),
    )
    final_eval_samples: int | None = option(
        None,
        "held-out samples of the final evaluation, the run's loss (default: the whole held-out split)",
        metavar="N",
        minimum=1,
        doc=(
            "Held-out samples of the final evaluation, the run's loss and its loss_se (null - the whole "
            "held-out split). Every run is evaluated on the same samples, so their sampling error is shared and"
            " mostly cancels between the runs of a budget. A rerun trigger. A fixed subset keeps the final "
            "evaluation a small share of a short run's time; its size sets the runs' loss_se."
        ),
    )
    device: str = option(
        "auto",
        "device (auto: cuda, then xpu, then cpu)",
        choices=DEVICES,
        doc=(
            "Device of the training runs (auto - cuda, then xpu, then cpu). Not a rerun trigger (moving a study"
            " does not retrain it). A study sized and timed for a CPU names cpu, so an accelerator that "
            "happens to be present does not move its runs."
        ),
    )
    precision: str = option(
        "auto",
        "compute precision: bf16 (mixed: fp32 weights, optimizer state and loss; bf16 matmuls), fp32, "
        "or auto (bf16 on cuda/xpu, fp32 on cpu)",
        choices=PRECISIONS,
        doc=(
            "Compute precision of the training runs - auto (bf16 mixed precision on cuda and xpu, fp32 on a "
            "CPU), fp32, or bf16 (mixed: fp32 weights, gradients, optimizer state, norms and loss; bf16 matmuls"
            " and attention under autocast; under fsdp/hsdp weights gathered in bf16, gradients reduced in "
            "fp32). A rerun trigger; every MFU is against the measured peak of this precision. On a CPU, bf16 "
            "takes the modules' path instead of the fused fp32 kernels (usually slower)."
        ),
    )
    threads: int | None = option(
        None,
        "CPU threads per process (default: cores / processes on the node)",
        metavar="N",
        minimum=1,
        doc=(
            "CPU threads per local training job (Snakemake schedules `--cores` / threads jobs at once). Unlike "
            "`prism train` without `--threads` (cores / processes), the workflow needs a number to schedule its"
            " jobs by."
        ),
        schema={"type": "integer", "default": 1},
    )
    launcher: str = option(
        "local",
        "local: train here; torchrun: re-run under torchrun on this node; aurora: PBS job body (with --dry-run); "
        "slurm: Slurm job body (with --dry-run)",
        choices=LAUNCHERS,
        doc=(
            "How a training job runs: `local` (one process, here), `aurora` (the PBS job body: mpiexec over "
            "all nodes of the job) or `slurm` (the Slurm job body: srun over all nodes of the job, under "
            "profiles/slurm). Not a rerun trigger. `prism train --launcher` also takes torchrun (one "
            "node's processes under torchrun), which no workflow job uses."
        ),
        schema={"enum": ["local", "aurora", "slurm"]},
    )
    strategy: str = option(
        "none",
        "parallel strategy",
        choices=STRATEGIES,
        doc="Parallel strategy across a job's processes (several ranks need ddp, fsdp or hsdp). Not a rerun trigger.",
    )
    storage: str = option(
        "local",
        "where the data lives on the cluster (daos mounts it with dfuse)",
        choices=STORAGES,
        doc="Where an `aurora` job reads its shards from (`daos` mounts the container with dfuse).",
    )
    trackers: str | None = option(
        None,
        "also log scalars and the config to these trackers: tensorboard, wandb "
        "(comma-separated; W&B offline unless WANDB_MODE says otherwise)",
        metavar="T1,T2",
        doc=(
            "Experiment trackers every run also logs its scalars and config to - tensorboard "
            "(STUDY/tracking/tensorboard/) and/or wandb (STUDY/tracking/wandb/, offline unless WANDB_MODE says "
            "otherwise; `wandb sync` uploads). Needs the `track` extra. Not a rerun trigger. A list here; "
            "`prism train --trackers` takes them comma-separated, none when not given."
        ),
        schema={
            "type": "array",
            "items": {"type": "string", "enum": list(TRACKERS)},
            "uniqueItems": True,
            "default": [],
        },
    )
    tracker_project: str | None = option(
        None,
        "W&B project (default: prism)",
        metavar="NAME",
        doc=(
            "The W&B project of the study's runs (its group is STUDY-FAMILY-REGIME); `prism train` without "
            "`--tracker-project` uses prism too."
        ),
        schema={"type": "string", "default": DEFAULT_PROJECT},
    )

    def __post_init__(self) -> None:
        parse_trackers(self.trackers)

    def run_settings(self) -> dict[str, Any]:
        """The settings that decide a run's numbers, as `RunConfig` keywords (a cosine run has no cooldown)."""
        names = [n for n in RESULT_SETTINGS if n != "cooldown_fraction" or self.schedule == "wsd"]
        return {name: getattr(self, name) for name in names}
