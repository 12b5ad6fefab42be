"""Learning-rate schedule and optimizer groups."""

from __future__ import annotations

import math

import pytest

from prism.train.lr_schedule import (
    BASE_LR,
    FINAL_LR_FRACTION,
    Schedule,
    build_optimizer,
    build_scheduler,
    default_lr,
    default_warmup,
    lr_factor,
)


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


def test_wsd_warms_up_holds_the_peak_then_cools_down_with_one_minus_sqrt():
    schedule = Schedule("wsd", warmup=10, total=100)
    factors = [schedule.factor(s) for s in range(100)]
    assert schedule.cooldown == 20 and schedule.cooldown_start == 80
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10:80] == [1.0] * 70
    assert factors[80] == 1.0 and factors[85] == pytest.approx(1 - math.sqrt(5 / 20))
    assert 0 < factors[-1] < 0.05
    cooldown = factors[80:]
    assert all(a > b for a, b in zip(cooldown, cooldown[1:]))


def test_wsd_linear_cooldown_and_fraction():
    schedule = Schedule("wsd", warmup=1, total=50, cooldown_fraction=0.4, cooldown_shape="linear")
    assert schedule.cooldown == 20
    assert schedule.factor(40) == pytest.approx(1 - 10 / 20)


def test_wsd_runs_of_different_lengths_share_their_stable_part():
    """What lets one stable trajectory serve several budgets."""
    short, long = Schedule("wsd", 5, 100), Schedule("wsd", 5, 300)
    assert [short.factor(s) for s in range(80)] == [long.factor(s) for s in range(80)]


def test_cosine_schedule_is_the_cosine_factor():
    schedule = Schedule("cosine", 10, 100)
    assert [schedule.factor(s) for s in range(100)] == [lr_factor(s, 10, 100) for s in range(100)]
    assert schedule.cooldown == 0 and schedule.cooldown_start is None


def test_the_scheduler_follows_the_schedule():
    import torch

    opt = build_optimizer([torch.nn.Parameter(torch.zeros(2, 2))], lr=1.0)
    scheduler = build_scheduler(opt, Schedule("wsd", 2, 10))
    lrs = []
    for _ in range(10):
        lrs.append(scheduler.get_last_lr()[0])
        opt.step()
        scheduler.step()
    assert lrs == pytest.approx([Schedule("wsd", 2, 10).factor(s) for s in range(10)])
