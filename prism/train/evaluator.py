"""`Evaluator`: held-out loss during a run, and the loss at its budget with its standard error.

During the run the trainer asks `due(step)` and evaluates a fixed subset (the first
`eval_samples` held-out samples, kept on the device): a cheap curve. At the end,
after the learning rate has decayed, `evaluate(final=True)` covers the whole
held-out split (or its first `final_eval_samples`): that is the run's `loss`, and
its standard error comes from the per-sample losses.

Both are token-weighted means, as the training loss is: loss = sum_i s_i / sum_i n_i
over samples i with loss sum s_i over n_i label tokens. Its standard error is the
ratio estimator's, sqrt(sum_i (s_i - loss n_i)^2 / (m (m - 1))) / mean(n_i) over m samples.
Every rank evaluates the same batches, so ranks agree without an all-reduce.

An evaluation fits wherever the training step fits: each forward takes at most the
training micro-batch's rows (`max_rows`; the rows of a stored batch are split), and
the model computes the logits of an evaluation a bounded number of tokens at a time
(`prism.model.prism.EVAL_LOGITS_BYTES`), never for a whole batch at once. Each row's loss
is the one it had in the larger batch, to rounding (bit for bit in this repository's CPU runs).
Evaluations run in the run's precision (`autocast`), as its training steps do.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from prism.core.errors import PrismError
from prism.core.tokenizer import IGNORE, MOD

EVAL_BATCH = 64
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class EvalResult:
    loss: float
    loss_se: float | None
    samples: int
    seconds: float


def mean_and_se(sums: torch.Tensor, counts: torch.Tensor) -> tuple[float, float | None]:
    """Token-weighted mean loss over samples and its standard error (None for one sample)."""
    sums, counts = sums.double(), counts.double()
    loss = float(sums.sum() / counts.sum())
    m = sums.numel()
    if m < 2:
        return loss, None
    residual = sums - loss * counts
    se = math.sqrt(float((residual * residual).sum()) / (m * (m - 1))) / float(counts.mean())
    return loss, se


def split_rows(batch: Batch, rows: int, mod: int = MOD) -> Iterator[Batch]:
    """`batch` in pieces of at most `rows` rows, each row with its modality samples.

    A row holds as many modality samples as its MOD slots over the slots of one sample
    (every sample of a family has the same number of modality tokens).
    """
    tokens, modality, labels = batch
    if tokens.shape[0] <= rows:
        yield batch
        return
    slots = (tokens == mod).sum(dim=1)
    total = int(slots.sum())
    per_row = (slots * modality.shape[0] // total).tolist() if total else [0] * tokens.shape[0]
    first = 0
    for lo in range(0, tokens.shape[0], rows):
        n = sum(per_row[lo : lo + rows])
        yield tokens[lo : lo + rows], modality[first : first + n], labels[lo : lo + rows]
        first += n


class Evaluator:
    """Decides when to evaluate and evaluates; holds the intermediate evaluations' subset."""

    def __init__(
        self,
        eval_batches: Callable[[int], Iterable[dict]],
        to_device: Callable[[dict], Batch],
        every: int,
        steps: int,
        subset_samples: int,
        final_samples: int | None = None,
        max_rows: int = EVAL_BATCH,
        autocast: Callable[[], AbstractContextManager] = nullcontext,
        mod: int = MOD,
    ):
        self.eval_batches, self.to_device, self.mod = eval_batches, to_device, mod
        self.max_rows, self.autocast = max(1, max_rows), autocast
        self.every, self.steps = every, steps
        self.final_samples = final_samples
        self.subset = list(self._batches(subset_samples))
        if not self.subset:
            raise PrismError("the eval split is empty; rebuild the shards")

    def due(self, step: int) -> bool:
        """An intermediate evaluation after this step (the last step gets the final one instead)."""
        return step % self.every == 0 and step < self.steps

    def _batches(self, limit: int | None) -> Iterator[Batch]:
        """The first `limit` held-out samples (all when None), in whole batches on the device."""
        seen = 0
        size = EVAL_BATCH if limit is None else min(EVAL_BATCH, limit)
        for batch in self.eval_batches(size):
            tokens, modality, labels = self.to_device(batch)
            yield tokens, modality, labels
            seen += int(tokens.shape[0])
            if limit is not None and seen >= limit:
                return

    def evaluate(self, model: Any, final: bool = False) -> EvalResult:
        """Loss of `model` over the subset, or (final) over the whole split; train mode is restored."""
        t0 = time.perf_counter()
        batches = self._batches(self.final_samples) if final else self.subset
        sums, counts = [], []
        model.eval()
        with torch.no_grad(), self.autocast():
            for batch in batches:
                for tokens, modality, labels in split_rows(batch, self.max_rows, self.mod):
                    per_token = model(tokens, modality, labels, reduction="none")
                    sums.append(per_token.double().sum(dim=1))
                    counts.append((labels != IGNORE).sum(dim=1))
        model.train()
        sample_sums, sample_counts = torch.cat(sums), torch.cat(counts)
        keep = sample_counts > 0  # a row without label tokens is no sample of the loss
        loss, se = mean_and_se(sample_sums[keep], sample_counts[keep])
        return EvalResult(loss, se, int(keep.sum()), time.perf_counter() - t0)
