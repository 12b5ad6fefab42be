"""`prism isoflop compare`: two studies' exponents, intervals and per-run losses side by side."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest

from prism.isoflop.fit.fit import fit_records
from prism.isoflop.fitread import write_fit
from prism.isoflop.present.compare import compare_markdown, overlap
from prism.isoflop.records import Surface
from prism.isoflop.synthetic import isoflop_study


@functools.cache
def _fit():
    """One real fit of Approach 2 (a study's fit JSON is a whole FitResult), its a and interval set per study."""
    runs = isoflop_study(Surface(1.69, 406.4, 410.7, 0.34, 0.28), [1e18, 3e18, 1e19], per_budget=5, spread=1.0)
    return fit_records(runs, method="approach2", bootstrap=0, with_backtest=False)


def study(root, a, ci, losses):
    d = root / "text_image"
    (d / "fit").mkdir(parents=True)
    fit = _fit()
    a2 = dataclasses.replace(fit.approach2, a=a, a_ci=ci)
    write_fit(d / "fit" / "e2e.json", dataclasses.replace(fit, approach2=a2))
    rows = ["run_id,status,loss"] + [f"{rid},ok,{loss}" for rid, loss in losses.items()]
    (d / "runs.csv").write_text("\n".join(rows) + "\n")
    return root


def test_overlap():
    assert overlap((0.4, 0.6), (0.55, 0.7)) and not overlap((0.4, 0.5), (0.55, 0.7))
    assert overlap(None, (0, 1)) is None


def test_report_says_whether_exponents_and_losses_agree(tmp_path):
    a = study(tmp_path / "cos", 0.52, [0.45, 0.60], {"30k-BASE-e2e-C1e10": 3.0, "60k-BASE-e2e-C1e10": 2.9})
    b = study(tmp_path / "wsd", 0.55, [0.50, 0.62], {"30k-BASE-e2e-C1e10": 3.015, "60k-BASE-e2e-C1e10": 2.9})
    text = compare_markdown(a, b, "text_image")
    assert "| Approach 2 | 0.5200 | [0.450, 0.600] | 0.5500 | [0.500, 0.620] | yes |" in text
    assert "agree within their intervals" in text and "NOT" not in text
    assert "+0.50%" in text and "2 of 2 within 1%" in text


def test_a_runs_metrics_loss_is_preferred_to_the_csv(tmp_path):
    a = study(tmp_path / "cos", 0.52, [0.45, 0.60], {"30k-BASE-e2e-C1e10": 3.0})
    b = study(tmp_path / "wsd", 0.55, [0.50, 0.62], {"30k-BASE-e2e-C1e10": 3.3})  # a mean over evaluations
    run = b / "text_image" / "runs" / "30k-BASE-e2e-C1e10"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"loss": 3.03, "loss_se": 0.01}))
    assert "| 30k-BASE-e2e-C1e10 | 3.0000 | 3.0300 | +1.00% | - |" in compare_markdown(a, b, "text_image")


def test_disjoint_intervals_are_called_out(tmp_path):
    a = study(tmp_path / "cos", 0.40, [0.35, 0.45], {"30k-BASE-e2e-C1e10": 3.0})
    b = study(tmp_path / "wsd", 0.60, [0.55, 0.65], {"30k-BASE-e2e-C1e10": 3.1})
    text = compare_markdown(a, b, "text_image")
    assert "do NOT agree" in text and "0 of 1 within 1%" in text


def test_runs_that_warmed_up_differently_are_called_out(tmp_path):
    losses = {"30k-BASE-e2e-C1e10": 3.0, "60k-BASE-e2e-C1e10": 2.9}
    a = study(tmp_path / "cos", 0.52, [0.45, 0.60], losses)
    b = study(tmp_path / "wsd", 0.55, [0.50, 0.62], losses)

    def warmups(root, steps):
        for rid, w in zip(losses, steps):
            run = root / "text_image" / "runs" / rid
            run.mkdir(parents=True, exist_ok=True)
            (run / "metrics.json").write_text(json.dumps({"loss": losses[rid], "warmup": w}))

    warmups(a, [50, 50])
    warmups(b, [50, 50])
    assert "Warm-up:" not in compare_markdown(a, b, "text_image")
    warmups(a, [18, 260])
    text = compare_markdown(a, b, "text_image")
    assert "Warm-up: the runs warmed up differently (cosine 18-260 steps, wsd 50)" in text


def test_the_compute_section_takes_the_cooldown_the_plan_records(tmp_path, ladder):
    import yaml

    from prism.isoflop.design.plan import make_plan
    from prism.isoflop.present.compare import study_flops

    plan = make_plan("text_image", [1e12, 2e12, 4e12, 8e12], ladder, simulations=20, window=0.6, cooldown_fraction=0.4)
    (tmp_path / "text_image").mkdir()
    (tmp_path / "text_image" / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    cosine, wsd = study_flops(tmp_path, "text_image")
    assert wsd == pytest.approx(plan["schedules"]["wsd_flops"])
    assert cosine == pytest.approx(plan["schedules"]["cosine_flops"])
    assert study_flops(tmp_path, "text_image", cooldown_fraction=0.2)[1] < wsd
