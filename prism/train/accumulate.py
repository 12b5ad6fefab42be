"""Gradient accumulation: a rank's rows of a step in micro-batches, one backward each, one update.

Why: a run whose rows do not fit its device at once keeps its global batch (and so its
trajectory and its place in the IsoFLOP grid) by summing the gradients of several smaller
forwards before the optimizer steps: global_batch = ranks x micro_batch x accum_steps. The
loss of each micro-batch is its token-mean weighted by its share of the global batch's label
tokens, so the summed gradient is the one of the whole batch's token-mean loss, to rounding.
Pure Python: the CLI and the planner check the numbers without torch.
"""

from __future__ import annotations

from prism.core.errors import PrismError


def micro_steps(global_batch: int, world_size: int, micro_batch: int | None) -> tuple[int, int]:
    """(rows a micro-step, micro-steps a step) of one of `world_size` ranks. `micro_batch` None, or at
    least the rank's share (more ranks than planned): one micro-step of the whole share. Refuses a
    micro-batch that does not divide the share."""
    rows = max(1, global_batch // max(1, world_size))
    if micro_batch is None or micro_batch >= rows:
        return rows, 1
    if rows % micro_batch:
        divisors = [d for d in range(1, rows + 1) if rows % d == 0 and d <= micro_batch]
        raise PrismError(
            f"--micro-batch {micro_batch} does not divide a rank's {rows} rows (--global-batch {global_batch} over "
            f"{world_size} rank(s)): use a divisor of {rows}, e.g. {divisors[-1]}"
        )
    return micro_batch, rows // micro_batch
