"""Learning-rate schedule and optimizer groups."""

from __future__ import annotations

import pytest

from prism.train.schedule import (BASE_LR, FINAL_LR_FRACTION, build_optimizer, default_lr, default_warmup,
                                  lr_factor)


def test_warmup_is_linear_then_cosine_decays_to_ten_percent():
    total, warmup = 100, 10
    factors = [lr_factor(s, warmup, total) for s in range(total)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10] == pytest.approx(1.0)
    assert factors[-1] == pytest.approx(FINAL_LR_FRACTION)
    decay = factors[10:]
    assert all(a >= b for a, b in zip(decay, decay[1:]))


def test_lr_shrinks_with_width():
    assert default_lr(128) == BASE_LR
    assert default_lr(32) == pytest.approx(4 * BASE_LR)
    assert default_lr(2048) < default_lr(192) < default_lr(32)


def test_default_warmup_is_five_percent_and_at_least_one_step():
    assert default_warmup(1000) == 50
    assert default_warmup(3) == 1


def test_weight_decay_only_on_matrices():
    import torch

    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    opt = build_optimizer(list(model.parameters()), lr=1e-3)
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert decayed == {id(model[0].weight), id(model[1].weight)}
    assert opt.defaults["betas"] == (0.9, 0.95)
