"""Eval loss spikes become warnings; a smooth or noisy-but-falling curve gives none."""

from __future__ import annotations

from prism.train.spikes import eval_warnings


def rows(*losses):
    return [{"step": 10 * i, "loss": loss} for i, loss in enumerate(losses)]


def test_the_reported_spike_is_flagged_once():
    warnings = eval_warnings(rows(5.5, 45.6, 3.4))
    assert len(warnings) == 1 and "step 10" in warnings[0] and "8.29x the minimum 5.5 (step 0)" in warnings[0]


def test_smooth_and_noisy_curves_pass():
    assert eval_warnings(rows(5.5, 3.0, 2.2, 2.3, 2.1, 2.15, 2.05)) == []
    assert eval_warnings([]) == [] and eval_warnings(rows(float("nan"), "inf", None)) == []


def test_two_separate_spikes_and_unsorted_rows():
    shuffled = list(reversed(rows(5.0, 2.0, 3.5, 2.0, 1.9, 3.0, 1.8)))
    warnings = eval_warnings(shuffled)
    assert [w.split(":")[0] for w in warnings] == ["eval loss spike at step 20", "eval loss spike at step 50"]
