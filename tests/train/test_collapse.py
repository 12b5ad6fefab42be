"""Collapse detection on hand-made loss and gradient-norm sequences."""

from __future__ import annotations

import math

from prism.train.collapse import CollapseDetector


def feed(detector, losses, grads=None):
    grads = grads or [1.0] * len(losses)
    for step, (loss, grad) in enumerate(zip(losses, grads), start=1):
        reason = detector.check(step, loss, grad)
        if reason:
            return step, reason
    return None


def test_healthy_decreasing_loss_passes():
    assert feed(CollapseDetector(warmup=5), [5.0 * 0.98**i for i in range(200)]) is None


def test_nan_and_inf_stop_at_once():
    assert feed(CollapseDetector(), [3.0, 2.9, math.nan])[0] == 3
    step, reason = feed(CollapseDetector(), [3.0, 2.9, 2.8], [1.0, math.inf, 1.0])
    assert step == 2 and "non-finite gradient norm" in reason


def test_a_sustained_spike_collapses_but_one_noisy_step_does_not():
    base = [2.0] * 30
    assert feed(CollapseDetector(warmup=5), base + [7.0] + base) is None
    step, reason = feed(CollapseDetector(warmup=5), base + [7.0, 8.0, 9.0, 9.0])
    assert step == 33 and "loss spike" in reason


def test_spikes_during_warmup_are_ignored():
    assert feed(CollapseDetector(warmup=100), [2.0] * 20 + [9.0] * 10) is None


def test_gradient_norm_collapse():
    grads = [1.0] * 30 + [1e-7] * 3
    step, reason = feed(CollapseDetector(warmup=5), [2.0] * 33, grads)
    assert step == 33 and "gradient norm collapsed" in reason


def test_state_round_trip_continues_the_same_decision():
    a = CollapseDetector(warmup=5)
    feed(a, [2.0] * 30 + [7.0])
    b = CollapseDetector(warmup=5)
    b.load_state_dict(a.state_dict())
    assert b.check(32, 8.0, 1.0) is None and b.check(33, 9.0, 1.0) is not None
