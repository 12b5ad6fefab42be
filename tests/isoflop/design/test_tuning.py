"""The tuning stage's maths: which widths and lrs it sweeps, the optimum per width, the fitted rule."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from prism.core.errors import PrismError
from prism.isoflop.design.tuning import (
    TuneOptions,
    fit_rule,
    lr_label,
    read_sweep,
    size_curve,
    study_rule,
    sweep_lrs,
    sweep_sizes,
    tuning_cost_line,
    write_rule,
)
from prism.train.lr_schedule import default_lr


def _curve_losses(lrs, lr_opt, k=0.05, floor=3.0, noise=0.0, rng=None):
    x = np.log(np.asarray(lrs) / lr_opt)
    out = floor + k * x**2
    return list(out + (rng.normal(0, noise, len(out)) if rng is not None else 0))


def test_sweep_spans_the_widths_smallest_middle_largest():
    widths = {"a": 32, "b": 48, "c": 64, "d": 96, "e": 128, "f": 192, "f2": 192}
    assert sweep_sizes(widths, 3) == ["a", "d", "f"]
    assert sweep_sizes(widths, 10) == ["a", "b", "c", "d", "e", "f"]  # one name per width
    assert sweep_sizes({"x": 64}, 3) == ["x"]


def test_swept_lrs_are_centred_on_the_hand_rule():
    lrs = sweep_lrs(64, 5, 2.0)
    assert lrs[2] == pytest.approx(default_lr(64), rel=1e-3)
    assert lrs[0] == pytest.approx(default_lr(64) / 4, rel=1e-3) and lrs[-1] == pytest.approx(
        default_lr(64) * 4, rel=1e-3
    )
    assert lr_label(0.0015) == "lr0.0015"


def test_fewer_lrs_lie_on_the_same_grid_with_the_extra_one_below():
    five = sweep_lrs(80, 5, 2.0)
    assert sweep_lrs(80, 4, 2.0) == five[:4]  # the top lr dropped: the other runs are shared
    assert sweep_lrs(80, 3, 2.0) == five[1:4]


def test_size_curve_finds_the_vertex_and_curvature():
    lrs = sweep_lrs(64, 5, 2.0)
    curve = size_curve("n", 64, lrs, _curve_losses(lrs, 0.004, k=0.05))
    assert curve.inside
    assert math.exp(curve.ln_opt) == pytest.approx(0.004, rel=1e-6)
    assert curve.curvature == pytest.approx(0.05, rel=1e-6)


def test_an_optimum_at_the_edge_of_the_sweep_is_refused_in_one_line():
    lrs = sweep_lrs(64, 5, 2.0)
    edge = size_curve("n64", 64, lrs, _curve_losses(lrs, lrs[-1] * 3))
    assert not edge.inside
    good = size_curve("n32", 32, lrs, _curve_losses(lrs, lrs[2]))
    with pytest.raises(PrismError, match=r"n64 .* not inside its swept lrs; widen") as err:
        fit_rule([good, edge])
    assert "\n" not in str(err.value)


def test_fitted_rule_recovers_a_known_law_with_an_interval():
    rng = np.random.default_rng(1)
    c, p = 5e-3, 0.7
    curves = []
    for width in (32, 64, 128, 192):
        lrs = sweep_lrs(width, 5, 2.0)
        truth = c * (width / 128) ** -p
        curves.append(size_curve(f"w{width}", width, lrs, _curve_losses(lrs, truth, noise=2e-3, rng=rng), 2e-3))
    rule = fit_rule(curves, bootstrap=200, seed=0, flops=1e12)
    assert rule.kind == "fitted" and rule.widths == (32.0, 192.0)
    assert rule.p == pytest.approx(p, abs=0.15)
    assert rule.lr(128) == pytest.approx(c, rel=0.15)
    assert 0 < rule.ln_sd(128) < 0.3
    assert "p 0." in rule.source and "[" in rule.source


def test_one_width_fits_the_constant_and_keeps_the_hand_exponent():
    lrs = sweep_lrs(64, 5, 2.0)
    rule = fit_rule([size_curve("w64", 64, lrs, _curve_losses(lrs, 0.01))], bootstrap=20)
    assert rule.p == 1.0 and rule.lr(64) == pytest.approx(0.01, rel=1e-3)


def test_sweep_read_from_metrics_files_and_written_for_the_plan(tmp_path):
    files = []
    for width, name in ((32, "n11e3"), (64, "n36e3")):
        for lr in sweep_lrs(width, 5, 2.0):
            run = tmp_path / "s200" / f"{name}-BASE-e2e-C1e10" / lr_label(lr)
            run.mkdir(parents=True)
            loss = _curve_losses([lr], default_lr(width) * 1.5)[0]
            metrics = {"loss": loss, "loss_se": 1e-3, "flops": 1e9, "tokens": 4e5}
            (run / "metrics.json").write_text(json.dumps(metrics))
            files.append(run / "metrics.json")
    curves, flops = read_sweep(files, {"n11e3": 32, "n36e3": 64})
    assert [c.d_model for c in curves] == [32, 64] and flops == pytest.approx(10e9)
    assert [c.tokens for c in curves] == [4e5, 4e5]
    rule = fit_rule(curves, bootstrap=50, flops=flops)
    text = write_rule(rule, tmp_path / "lr_rule.json")
    assert "wrote" in text
    back = study_rule(TuneOptions(rule="fitted", margin=0.5), tmp_path / "lr_rule.json")
    assert back.margin == 0.5 and back.lr(48) == pytest.approx(rule.lr(48))
    assert "1.0% of the grid" in tuning_cost_line(back, 1e12)
    with pytest.raises(PrismError, match="not a sweep run"):
        read_sweep([tmp_path / "metrics.json"], {})


def test_study_rule_hand_and_given():
    assert study_rule(TuneOptions(), None).kind == "hand"
    given = study_rule(TuneOptions(rule="given", lr_c=1e-2, lr_p=0.5), None)
    assert given.kind == "given" and given.lr(512) == pytest.approx(5e-3)
    assert tuning_cost_line(given, 1e12) is None


def test_a_second_length_at_one_width_measures_the_tokens_exponent():
    """The optimal lr falls with a run's length: a short sweep at three widths and a long one at the smallest
    recover lr = c w^-p t^-q, and the rule's lr at the grid's length is the long sweep's, not the short's."""
    rng = np.random.default_rng(2)
    c, p, q, t0 = 3e-3, 1.2, 0.4, 1e6
    curves = []
    for width, tokens in ((16, 4e5), (32, 4e5), (80, 4e5), (16, 1.6e6)):
        lrs = sweep_lrs(width, 5, 2.0)
        truth = c * (width / 128) ** -p * (tokens / t0) ** -q
        losses = _curve_losses(lrs, truth, noise=1e-3, rng=rng)
        curves.append(size_curve(f"w{width}", width, lrs, losses, 1e-3, tokens))
    rule = fit_rule(curves, bootstrap=100, seed=0)
    assert rule.p == pytest.approx(p, abs=0.15) and rule.q == pytest.approx(q, abs=0.15)
    assert rule.lr(16, 1.6e6) == pytest.approx(c * (16 / 128) ** -p * 1.6**-q, rel=0.2)
    assert rule.lr(16, 1.6e6) < rule.lr(16, 4e5)
    assert len(rule.cov) == 3 and 0 < rule.ln_sd(16, 1.6e6) < rule.ln_sd(16, 1e8)
    assert "q 0." in rule.source


def test_one_length_keeps_q_zero_and_its_lr_needs_no_tokens():
    curves = [size_curve(f"w{w}", w, sweep_lrs(w, 5, 2.0), _curve_losses(sweep_lrs(w, 5, 2.0), 0.01), 1e-3, 4e5)
              for w in (32, 64)]  # fmt: skip
    rule = fit_rule(curves, bootstrap=20)
    assert rule.q == 0.0 and len(rule.cov) == 2 and rule.lr(48) > 0


def test_q_measured_at_two_widths_changes_with_width_and_is_held_beyond():
    """Where the optimal lr falls with a run's tokens at one width and not at a wider one, the rule follows it
    between them and holds the wider one's q beyond it (no extrapolated slope), so a wide grid's long runs are
    not given the small width's fall."""
    rng = np.random.default_rng(3)
    c, p, t0 = 3e-3, 1.2, 8e5

    def q_true(width):
        return float(np.interp(math.log(width), [math.log(16), math.log(32)], [0.4, 0.1]))

    curves = []
    for width, tokens in ((16, 4e5), (32, 4e5), (80, 4e5), (16, 1.6e6), (32, 1.6e6)):
        lrs = sweep_lrs(width, 5 if width == 16 or tokens < 1e6 else 3, 2.0)
        truth = c * (width / 128) ** -p * (tokens / t0) ** -q_true(width)
        curves.append(size_curve(f"w{width}", width, lrs, _curve_losses(lrs, truth, noise=5e-4, rng=rng), 5e-4,
                                 tokens))  # fmt: skip
    rule = fit_rule(curves, bootstrap=100, seed=0)
    assert rule.q_widths == (16.0, 32.0) and len(rule.cov) == 4
    assert rule.q_at(16) == pytest.approx(0.4, abs=0.1) and rule.q_at(32) == pytest.approx(0.1, abs=0.1)
    assert rule.q_at(80) == rule.q_at(32) and rule.q_at(8) == rule.q_at(16)  # held beyond the measured widths
    assert rule.lr(80, 1.6e6) == pytest.approx(c * (80 / 128) ** -p * 2 ** -q_true(32), rel=0.2)
    assert "q_slope" in rule.source and "held in 16-32" in rule.describe()
    assert 0 < rule.ln_sd(80, 1.6e6) < 1


def test_the_long_sweep_reaches_the_next_widths_with_fewer_lrs():
    tune = TuneOptions(long_sizes=2, long_points=3)
    assert tune.lengths(["a", "b", "c"]) == {"a": [(200, 5), (800, 5)], "b": [(200, 5), (800, 3)], "c": [(200, 5)]}
    assert TuneOptions().lengths(["a", "b"]) == {"a": [(200, 5), (800, 5)], "b": [(200, 5)]}
    assert TuneOptions(long_steps=0).lengths(["a"]) == {"a": [(200, 5)]}
    with pytest.raises(PrismError, match="long_points 2"):
        TuneOptions(long_points=2)


def test_the_widest_width_may_sweep_fewer_lrs():
    tune = TuneOptions(long_sizes=2, long_points=3, widest_points=4)
    assert tune.lengths(["a", "b", "c"]) == {"a": [(200, 5), (800, 5)], "b": [(200, 5), (800, 3)], "c": [(200, 4)]}
    assert tune.lengths(["a"]) == {"a": [(200, 5), (800, 5)]}  # one width is the smallest: all its lrs
    with pytest.raises(PrismError, match="widest_points 1"):
        TuneOptions(widest_points=1)
