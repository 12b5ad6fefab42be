"""How much of the training data a run sees: epochs, from what the plan knows before training.

Repeating data beyond a few epochs changes the loss curve (Muennighoff et al.
2023, data-constrained scaling), so a compute-optimal study must not: the planner
shows `epochs` per run and refuses runs above `MAX_EPOCHS`. Pure Python (the plan
and the workflow import it without torch).
"""

from __future__ import annotations

from pathlib import Path

from prism.core.errors import PrismError
from prism.core.studylayout import manifest_file

MAX_EPOCHS = 4.0


def epochs(tokens: float, train_samples: int, tokens_per_sample: float) -> float:
    """Epochs of a training split of `train_samples` samples that `tokens` backbone tokens amount to.

    `tokens_per_sample` is the tokens one sample costs (a padded row's length, the
    plan's and calibration's `tokens_per_sample`); for packed rows pass the row
    length divided by the samples per row.
    """
    if train_samples <= 0 or tokens_per_sample <= 0:
        raise PrismError(
            f"epochs: need a positive training split ({train_samples} samples) and tokens per "
            f"sample ({tokens_per_sample})"
        )
    return float(tokens) / (float(train_samples) * float(tokens_per_sample))


def train_samples(data_dir: str | Path) -> int:
    """Samples of a shard directory's training split, from its manifest (no shard is read)."""
    from prism.data.manifest import manifest_as_written  # noqa: PLC0415 lazy: the planner's imports stay numpy's

    path = manifest_file(data_dir)
    try:
        manifest = manifest_as_written(data_dir)
        return int(manifest["splits"]["train"]["samples"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise PrismError(f"{path}: cannot read the training split's size ({err}); build the data first") from None


def epochs_refusal(run_id: str, run_epochs: float, max_epochs: float = MAX_EPOCHS) -> str | None:
    """The reason a run is refused for repeating its data, or None when within `max_epochs`."""
    if run_epochs > max_epochs:
        return (
            f"{run_id} would see its training split {run_epochs:.1f} times (max_epochs {max_epochs:g}): "
            "repeated data bends the loss curve; build more data or lower the budget"
        )
    return None
