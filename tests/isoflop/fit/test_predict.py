"""Predictions at any budget: the fit's own estimate at its budgets, the truth of synthetic surfaces
beyond them, D from C and N, intervals that widen with the distance, and the JSON round trip."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from prism.core.errors import PrismError
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.fit.predict import parse_budgets, predict, tokens_at
from prism.isoflop.fit.result import FitResult
from prism.isoflop.present.predictread import predict_study
from prism.isoflop.records import CHINCHILLA_EPOCH, RunRecord
from prism.isoflop.synthetic import isoflop_study

BUDGETS = [1e17, 3e17, 1e18, 3e18, 1e19]


def parabola_study(k: float, a: float, budgets, noise: float = 0.0, seed: int = 0, fpt=lambda n: 6 * n):
    """IsoFLOP curves that are exact parabolas in log10 N around N_opt = k C^a: not of Approach 3's form."""
    rng = np.random.default_rng(seed)
    out = []
    for c in budgets:
        centre = math.log10(k * c**a)
        for x in np.linspace(centre - 0.6, centre + 0.6, 7):
            n = 10**x
            loss = 2.0 + 5.0 * c**-0.05 + 0.3 * (x - centre) ** 2 + noise * rng.standard_normal()
            out.append(RunRecord(f"n{n:.3g}-C{c:.2g}", n, c / fpt(n), float(loss), c, flops=c))
    return out


@pytest.fixture(scope="module")
def chinchilla_fit():
    recs = isoflop_study(CHINCHILLA_EPOCH, BUDGETS, noise=0.003, seed=3)
    return fit_records(recs, bootstrap=60, predict="1e21,1e24")


def test_prediction_at_a_fitted_budget_is_the_fits_own_estimate(chinchilla_fit):
    r = chinchilla_fit
    for p in r.prediction.predictions[: len(BUDGETS)]:
        by = {e.approach: e for e in p.approaches}
        assert by["approach2"].n_opt == pytest.approx(r.approach2.k * p.budget**r.approach2.a, rel=1e-9)
        assert by["approach3"].n_opt == pytest.approx(r.approach3.k * p.budget**r.approach3.a, rel=1e-9)
        assert p.decades_c == 0 and not p.extrapolation


def test_beyond_the_data_the_interval_holds_the_truth_and_widens(chinchilla_fit):
    preds = {p.budget: p for p in chinchilla_fit.prediction.predictions}
    for c in (1e21, 1e24):
        lo, hi = preds[c].answer.n_ci
        assert lo <= CHINCHILLA_EPOCH.n_opt(c) <= hi
    near, far = preds[1e19].answer.n_ci, preds[1e24].answer.n_ci
    assert math.log10(far[1] / far[0]) > math.log10(near[1] / near[0])
    assert preds[1e21].decades_c == pytest.approx(2.0)
    assert preds[1e24].extrapolation and not preds[1e21].extrapolation


def test_the_loss_interval_holds_a_run_trained_at_the_answer_as_often_as_its_level(chinchilla_fit):
    """A run trained at the predicted allocation measures the surface there plus its own noise: the interval
    is for that loss, so it holds about 80% of such runs, not only the surface's mean."""
    rng = np.random.default_rng(7)
    for p in chinchilla_fit.prediction.predictions[: len(BUDGETS)]:
        e = p.answer
        mean = float(CHINCHILLA_EPOCH.loss(np.array(e.n_opt), np.array(e.d_opt)))
        runs = mean + 0.003 * rng.standard_normal(2000)
        held = np.mean((runs >= e.loss_ci[0]) & (runs <= e.loss_ci[1]))
        assert 0.7 <= held <= 0.95, (p.budget, e.loss_ci, mean, held)


def test_d_spends_the_budget_through_the_studys_flops_per_token():
    # FLOPs per token 9 N^0.9 (frozen parts): D = C / (9 N^0.9), not C / 6N.
    recs = parabola_study(0.1, 0.5, BUDGETS, fpt=lambda n: 9 * n**0.9)
    r = fit_records(recs, method="approach2", bootstrap=0, predict="1e22")
    model = r.prediction.model
    assert model.fpt == pytest.approx((math.log10(9), 0.9), abs=1e-6)
    for p in r.prediction.predictions:
        e = p.answer
        assert 9 * e.n_opt**0.9 * e.d_opt == pytest.approx(p.budget, rel=1e-6)
        assert e.tokens_per_param == pytest.approx(e.d_opt / e.n_opt)
    assert float(tokens_at(model, 1e22, 1e9)) == pytest.approx(1e22 / (9 * 1e9**0.9), rel=1e-6)


def test_a_surface_not_of_approach3s_form_is_predicted_by_approach2():
    recs = parabola_study(0.1, 0.5, BUDGETS, noise=0.002, seed=1)
    r = fit_records(recs, method="approach2", bootstrap=60, predict="1e20,1e22")
    for p in r.prediction.predictions:
        lo, hi = p.answer.n_ci
        assert p.answer.approach == "approach2"
        assert lo <= 0.1 * p.budget**0.5 <= hi
        assert p.answer.n_opt == pytest.approx(0.1 * p.budget**0.5, rel=0.1)


def test_the_predict_verb_equals_what_the_fit_wrote(chinchilla_fit, tmp_path):
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "e2e.json").write_text(json.dumps(chinchilla_fit.to_json()))
    back = FitResult.from_json(json.loads((tmp_path / "fit" / "e2e.json").read_text()))
    assert back.prediction.predictions == chinchilla_fit.prediction.predictions
    assert predict(back.prediction.model, [1e21]) == [
        p for p in chinchilla_fit.prediction.predictions if p.budget == 1e21
    ]
    text = "\n".join(predict_study(tmp_path, "1e21"))
    assert "C = 1e21" in text and "backtest:" in text
    assert "train:" not in text  # no plan.yaml: no shape rule to take sizes from


def test_the_predict_verb_names_sizes_of_the_studys_shape_rule(chinchilla_fit, tmp_path):
    import yaml

    from tests.isoflop.design.test_totrain import PLAN

    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "e2e.json").write_text(json.dumps(chinchilla_fit.to_json()))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(PLAN))
    lines = predict_study(tmp_path, "1e19")
    trains = [line for line in lines if line.strip().startswith("train: n")]
    assert len(trains) == 2 and all("steps" in line for line in trains)


def test_a_fit_without_a_law_says_so_and_an_old_fit_is_refused(tmp_path):
    recs = parabola_study(0.1, 0.5, [1e17], noise=0.001)  # one budget: no power law in C
    result = fit_records(recs, method="approach2", bootstrap=0)
    assert result.prediction.model is None
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "e2e.json").write_text(json.dumps(result.to_json()))
    (line,) = predict_study(tmp_path, "1e21")[1:]
    assert line.startswith("C = 1e21: no prediction: neither approach gave a law (Approach 2: 1 accepted budget")
    old = result.to_json()
    del old["prediction"]
    (tmp_path / "fit" / "e2e.json").write_text(json.dumps(old))
    with pytest.raises(PrismError, match="predates predictions"):
        predict_study(tmp_path, "1e21")


def test_bad_budgets_and_missing_fits_are_refused(tmp_path):
    assert parse_budgets("1e13, 1e21") == [1e13, 1e21]
    with pytest.raises(PrismError, match="'big'"):
        parse_budgets("1e13,big")
    with pytest.raises(PrismError, match="no such fit"):
        predict_study(tmp_path, "1e21")
