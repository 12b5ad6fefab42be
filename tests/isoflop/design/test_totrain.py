"""What to train at a predicted N_opt: the plan's shape rule's nearest sizes, its batch, its lr rule."""

from __future__ import annotations

import pytest

from prism.isoflop.design.totrain import size_line, sizes_to_train
from prism.model.config import backbone_config

PLAN = {
    "options": {"size_rule": "n", "global_batch": 32},
    "runs": [{"backbone": "n89e2", "params": backbone_config("n89e2").params + 1000.0, "tokens_per_sample": 64.0}],
    "lr_rule": {"kind": "hand", "c": 0.003, "p": 1.0, "q": 0.0, "tokens_ref": 1e8, "widths": None, "margin": 0.3},
}


def test_the_nearest_rule_sizes_with_the_studys_extra_params_batch_and_lr():
    found = sizes_to_train(PLAN, 2.0e5, lambda n: 1e13 / (6 * n))
    assert len(found) == 2
    for s in found:
        assert s.params == backbone_config(s.backbone).params + 1000.0
        assert abs(s.params / 2.0e5 - 1) < 0.15
        assert s.tokens == pytest.approx(1e13 / (6 * s.params))
        assert s.steps == round(s.tokens / 64 / 32)
        assert s.lr is not None and s.lr > 0
    assert "trainable params" in size_line(found[0])


def test_a_fitted_lr_rule_refuses_widths_beyond_its_sweep():
    plan = PLAN | {"lr_rule": PLAN["lr_rule"] | {"kind": "fitted", "widths": [16, 32], "margin": 0.3}}
    (s, *_) = sizes_to_train(plan, 3.0e9, lambda n: 1e21 / (6 * n))
    assert s.lr is None and "lr rule" in s.lr_note


def test_no_shape_rule_no_sizes():
    assert sizes_to_train({"options": {}}, 1e6, lambda n: 1.0) == []
