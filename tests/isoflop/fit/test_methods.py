"""The fit-method registry: a new method is one module (a `FitMethod`) and one registration; the fit runs
it, its verdict can rest on it, and the result, the JSON and the report carry it."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from prism.core.errors import PrismError
from prism.isoflop.fit import methods
from prism.isoflop.fit.fit import FitOptions, fit_records
from prism.isoflop.fit.method import FitMethod, Judged, MethodFit, MethodInput, interval_judged
from prism.isoflop.fit.result import FitResult
from prism.isoflop.present.report import fit_markdown
from prism.isoflop.records import Surface
from prism.isoflop.synthetic import isoflop_study

SYMMETRIC = Surface(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
BUDGETS = [1e18, 3e18, 1e19, 3e19]


@dataclass(frozen=True)
class MinimaLine:
    """A toy method: least squares of log N_opt on log C through the grid's accepted minima, +-0.05."""

    name: str = "minima_line"
    label: str = "Minima line"
    grid_bootstrap: bool = False

    def fit(self, data: MethodInput) -> MethodFit:
        minima = [(f.budget, f.n_opt) for f in data.grid.per_budget if f.accepted and f.n_opt]
        if len(minima) < 2:
            return MethodFit(self.name, None, None, reason=f"{len(minima)} minima")
        c, n = np.log10(np.array(minima, float)).T
        a = float(np.polyfit(c, n, 1)[0])
        return MethodFit(self.name, a, (a - 0.05, a + 0.05), interval_method="a fixed +-0.05")

    def judge(self, fit: MethodFit, good: list[str], n_runs: int) -> Judged:
        return interval_judged(self.label, fit)


@pytest.fixture
def toy():
    method = methods.register(MinimaLine())
    yield method
    methods.unregister(method.name)


def _runs():
    return isoflop_study(SYMMETRIC, BUDGETS, per_budget=7, spread=1.0, noise=0.005, seed=2)


def test_the_approaches_are_registered_in_their_order():
    assert methods.names()[:2] == ("approach2", "approach3")
    assert list(methods.METHODS) == [*methods.names(), "both"]
    assert all(isinstance(methods.get(n), FitMethod) for n in methods.names())
    assert methods.label("both") == "Approach 2 and Approach 3"


def test_a_registered_method_is_a_choice_fitted_and_reported(toy):
    assert "minima_line" in methods.METHODS
    FitOptions(method="minima_line").validate()
    fit = fit_records(_runs(), method="minima_line", bootstrap=0)
    assert fit.approach2 is None and fit.approach3 is None
    (mine,) = fit.methods
    assert mine.name == "minima_line" and mine.label == "Minima line" and 0.3 < mine.a < 0.7
    # the verdict rests on the one interval fitted, and says where it came from
    assert fit.verdict.rests_on == "minima_line" and fit.verdict.interval == mine.a_ci
    assert fit.verdict.interval_source.startswith("Minima line: a fixed +-0.05")
    assert fit.a() == mine.a
    # the JSON carries it and reads back; the report names it in its verdict and its table
    data = json.loads(json.dumps(fit.to_json()))
    assert data["methods"][0]["name"] == "minima_line"
    assert FitResult.from_json(data).methods == fit.methods
    md = fit_markdown(fit)
    assert "(method: Minima line)" in md and "| Minima line |" in md


def test_the_approaches_results_have_no_methods_key():
    fit = fit_records(_runs(), method="approach2", bootstrap=0)
    assert fit.methods == [] and "methods" not in fit.to_json()


def test_an_unknown_method_names_the_known_ones_and_a_method_is_registered_once(toy):
    with pytest.raises(PrismError, match="minima_line"):
        FitOptions(method="approach1").validate()
    with pytest.raises(PrismError, match="registered already"):
        methods.register(MinimaLine())
    with pytest.raises(PrismError, match="not a fit method"):
        methods.register(object())  # type: ignore[arg-type]


def test_prism_isoflop_fit_writes_a_registered_methods_answer(toy, tmp_path):
    from prism.isoflop.fitread import read_fit
    from prism.isoflop.present.fitfiles import fit_csv
    from prism.isoflop.synthetic import write_csv

    write_csv(_runs(), tmp_path / "runs.csv")
    out = tmp_path / "fit.json"
    result = fit_csv(tmp_path / "runs.csv", out, tmp_path / "fit.md", method="minima_line", bootstrap=0)
    assert read_fit(out).methods == result.methods and result.methods[0].a is not None
    assert "| Minima line |" in (tmp_path / "fit.md").read_text()
    # the fit's one-line answer (`prism isoflop fit` prints it) names the method by its registered name
    assert [name for name, _ in result.exponents()] == ["minima_line"]
