"""The lr rule: hand is today's default, given and fitted say where they come from, a grid beyond a
fitted rule's widths is refused in one line."""

from __future__ import annotations

import json
import math

import pytest

from prism.core.errors import PrismError
from prism.train.lr_rule import LrRule, given_rule, read_rule
from prism.train.lr_schedule import default_lr


def test_hand_rule_is_the_trainers_default():
    rule = LrRule()
    for width in (32, 96, 2048):
        assert rule.lr(width) == pytest.approx(default_lr(width))
    assert "not tuned" in rule.describe()


def test_given_rule_uses_its_constants_and_tokens():
    rule = given_rule(1e-2, 0.5, 0.2)
    assert rule.lr(512, 1e8) == pytest.approx(1e-2 * 4**-0.5)
    assert rule.lr(128, 1e9) == pytest.approx(1e-2 * 10**-0.2)
    with pytest.raises(PrismError, match="needs the run's tokens"):
        rule.lr(128)


def test_fitted_rule_refuses_a_grid_beyond_its_widths_and_margin():
    rule = LrRule("fitted", 3e-3, 1.0, widths=(32, 128), margin=0.3, source="sweep")
    rule.check_covers([32, 64, 128 * 1.9])  # within 0.3 decades
    with pytest.raises(PrismError, match=r"fitted on d_model 32-128.*tune.margin 0.3") as err:
        rule.check_covers([32, 1024])
    assert "\n" not in str(err.value)


def test_uncertainty_grows_away_from_the_fitted_widths():
    rule = LrRule("fitted", 3e-3, 1.0, widths=(64, 256), cov=((0.01, 0.0), (0.0, 0.04)))
    assert rule.ln_sd(128) == pytest.approx(0.1)
    assert rule.ln_sd(1024) > rule.ln_sd(256) > rule.ln_sd(128)
    assert LrRule().ln_sd(128) is None


def test_rule_file_round_trips_and_bad_files_say_so(tmp_path):
    rule = LrRule("fitted", 2e-3, 0.8, widths=(32, 192), cov=((0.01, 0.001), (0.001, 0.02)), flops=1e12)
    path = tmp_path / "lr_rule.json"
    path.write_text(json.dumps(rule.to_json()))
    back = read_rule(path)
    assert back.lr(100) == pytest.approx(rule.lr(100)) and back.widths == (32, 192)
    assert math.isclose(back.ln_sd(300), rule.ln_sd(300))
    with pytest.raises(PrismError, match="no such file"):
        read_rule(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(PrismError, match="not a rule file"):
        read_rule(tmp_path / "bad.json")


def test_a_tokens_exponent_covers_the_swept_lengths_only():
    """q is measured between the sweep's lengths: the plan refuses lrs taken far beyond them, and a sensitivity
    reads the rule no further than its margin."""
    rule = LrRule("fitted", 2e-3, 1.4, 0.4, 1e6, widths=(16, 80), tokens=(4e5, 1.6e6), margin=0.3, source="sweep")
    assert rule.covered_tokens(1e6) == 1e6 and rule.covered_tokens(1e9) == pytest.approx(1.6e6 * 10**0.3)
    rule.check_covers([16, 80], "plan", [3e5, 3e6])
    with pytest.raises(PrismError, match=r"fitted on runs of 4e\+05-1.6e\+06 tokens.*tune.long_steps") as err:
        rule.check_covers([16, 80], "plan", [3e5, 8e6])
    assert "\n" not in str(err.value)
    assert rule.ln_sd(16) is None  # no covariance: not measured


def test_a_width_dependent_q_round_trips_and_its_sd_grows_with_its_slope(tmp_path):
    cov = ((0.01, 0, 0, 0), (0, 0.01, 0, 0), (0, 0, 0.01, 0), (0, 0, 0, 0.04))
    rule = LrRule("fitted", 2e-3, 1.4, 0.3, 1e6, (16, 80), (4e5, 1.6e6), -0.2, (16, 32), cov=cov, source="sweep")
    assert rule.has_q and rule.q_at(16) == pytest.approx(0.3 + 0.2 * math.log(2) / 2)
    assert rule.q_at(64) == rule.q_at(32) == pytest.approx(0.3 - 0.2 * math.log(2) / 2)
    path = tmp_path / "lr_rule.json"
    path.write_text(json.dumps(rule.to_json()))
    back = read_rule(path)
    assert back.q_widths == (16, 32) and back.lr(48, 2e6) == pytest.approx(rule.lr(48, 2e6))
    flat = LrRule("fitted", 2e-3, 1.4, 0.3, 1e6, (16, 80), (4e5, 1.6e6), cov=tuple(r[:3] for r in cov[:3]))
    assert rule.ln_sd(32, 4e6) > flat.ln_sd(32, 4e6)  # the slope's own uncertainty adds at a held width
    with pytest.raises(PrismError, match="tokens"):
        rule.check_covers([16, 80], "plan", [3e5, 8e6])
