"""Whether a global batch splits among a job's ranks: the one check the plan, the launchers and the loader ask.

Every rank takes `global_batch / ranks` rows per step, so a batch that does not divide stops the
job at its first step. On a cluster that is a queued job lost per run; the plan therefore asks
before anything is submitted, the job body again when it is written, and the loader once more
when it starts (a job started by hand). Pure Python, no torch.
"""

from __future__ import annotations

from prism.core.errors import PrismError


def nearest_multiples(batch: int, ranks: int) -> tuple[int, int]:
    """The multiples of `ranks` just below and above `batch` (the lower one at least `ranks`)."""
    below = batch // ranks * ranks or ranks
    return below, below + ranks


def check_batch(global_batch: int, ranks: int, where: str, how: str) -> None:
    """Refuse a global batch that is not positive or that the job's ranks cannot split, naming the
    setting and two that work.

    `where` names the setting (e.g. "plan.global_batch" or "--global-batch"), `how` the ranks
    (e.g. "a 1-node aurora job (12 ranks per node)").
    """
    if global_batch < 1:
        raise PrismError(f"{where} must be a positive integer, got {global_batch}")
    if ranks > 1 and global_batch % ranks:
        below, above = nearest_multiples(global_batch, ranks)
        raise PrismError(
            f"{where} {global_batch} does not divide among the {ranks} ranks of {how} "
            f"({global_batch} = {global_batch // ranks} x {ranks} + {global_batch % ranks}): "
            f"use a multiple of {ranks}, e.g. {below} or {above}"
        )
