"""Gradient accumulation: the same global batch in micro-batches trains the same run, to rounding."""

from __future__ import annotations

import pytest
import torch

from prism.core.errors import PrismError
from prism.parallel.env import discover
from prism.train.accumulate import micro_steps
from prism.train.config import RunConfig
from prism.train.trainer import Trainer


def test_micro_steps_split_a_ranks_share():
    assert micro_steps(384, 1, None) == (384, 1)
    assert micro_steps(384, 1, 4) == (4, 96)
    assert micro_steps(384, 12, 8) == (8, 4)
    # more ranks than the plan placed the run on: the share fits, so one micro-step
    assert micro_steps(384, 12, 96) == (32, 1)


def test_a_micro_batch_that_does_not_divide_the_share_is_refused():
    with pytest.raises(PrismError, match=r"--micro-batch 5 does not divide a rank's 32 rows.*e\.g\. 4"):
        micro_steps(64, 2, 5)


def _trainer(shards, out, micro_batch, layout="padded"):
    config = RunConfig(
        family="text_image", backbone="30k", variant="BASE", regime="e2e", budget=3e11, data=str(shards),
        out=str(out), global_batch=8, micro_batch=micro_batch, max_steps=20, threads=1, layout=layout,
        **({"seq_len": 128} if layout == "packed" else {}),
    )  # fmt: skip
    return Trainer(config, discover({}))


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_an_accumulated_run_trains_as_the_unaccumulated_one(shards, tmp_path, layout):
    whole, micro = _trainer(shards, tmp_path / "whole", None, layout), _trainer(shards, tmp_path / "micro", 2, layout)
    try:
        assert (whole.accum_steps, micro.accum_steps) == (1, 4 if layout == "padded" else micro.accum_steps)
        batches = list(zip(range(3), whole._batches()))
        for _, batch in batches:
            a, b = whole.train_step(batch), micro.train_step(batch)
            assert b.loss == pytest.approx(a.loss, rel=1e-5)
            assert b.grad_norm == pytest.approx(a.grad_norm, rel=1e-4)
            assert b.samples == a.samples
        for p, q in zip(whole.params, micro.params):
            torch.testing.assert_close(q, p, rtol=1e-3, atol=1e-4)  # Adam: tiny gradients, normalised steps
    finally:
        whole.close()
        micro.close()
