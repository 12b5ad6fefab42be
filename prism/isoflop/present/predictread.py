"""`prism isoflop predict`: the prediction at any budget from a fitted study's JSON, or from a runs CSV.

From a study it reads what the fit kept (`prediction.model` of fit/REGIME.json) and predicts with the
same function the fit job used, so the two agree exactly for the same budgets.
"""

from __future__ import annotations

from pathlib import Path

from prism.core.errors import PrismError
from prism.core.studylayout import FamilyFolder
from prism.isoflop.design.totrain import row_length, study_plan
from prism.isoflop.fit.approach2 import budget_text
from prism.isoflop.fit.predict import PredictModel, parse_budgets, predict, tokens_at
from prism.isoflop.fit.result import FitResult
from prism.isoflop.fitread import read_fit
from prism.isoflop.present.prediction import backtest_lines, prediction_lines


def train_lines(plan: dict | None, model: PredictModel):
    """What to train at each prediction: the plan's shape rule's nearest sizes (none without a plan)."""
    from prism.isoflop.design.totrain import size_line, sizes_to_train  # noqa: PLC0415 lazy: the model registry

    def more(p) -> list[str]:
        if plan is None or p.answer is None:
            return []
        found = sizes_to_train(plan, p.answer.n_opt, lambda n: float(tokens_at(model, p.budget, n)))
        return [f"train: {size_line(s)}" for s in found]

    return more


def _no_law(result: FitResult) -> str:
    """Why a fit kept no law to predict with (each approach's reason)."""
    a2, a3 = result.approach2, result.approach3
    parts = []
    if a2 is not None:
        parts.append(f"Approach 2: {a2.reason}")
    if a3 is not None:
        parts.append(f"Approach 3: {a3.reason or a3.convergence_note or 'not converged'}")
    return "; ".join(parts) or "nothing was fitted"


def _lines(result: FitResult, budgets: list[float], where: str, plan: dict | None = None) -> list[str]:
    """The prediction's lines; a fit that determined no law says so per budget (the study answers
    nothing there, as its verdict says), and one written before predictions existed is refused."""
    section = result.prediction
    if section is None:
        raise PrismError(
            f"{where}: the fit predates predictions; refit it (`snakemake fit_FAMILY` or `prism isoflop fit`)"
        )
    if section.model is None:
        why = _no_law(result)
        return [f"C = {budget_text(c)}: no prediction: neither approach gave a law ({why})" for c in budgets]
    model = section.model
    more = train_lines(plan, model)
    return prediction_lines(predict(model, budgets), model.reach, model.level, more) + backtest_lines(section.backtests)


def predict_study(folder: str | Path, budget_text: str, regime: str = "e2e") -> list[str]:
    """The lines of `prism isoflop predict FAMILY_DIR --budget ...`."""
    budgets = parse_budgets(budget_text)
    path = FamilyFolder(folder).fit_file(regime)
    if not path.is_file():
        found = sorted(p.stem for p in FamilyFolder(folder).fit_dir.glob("*.json")) if Path(folder).is_dir() else []
        hint = f"fits there: {', '.join(found)} (--regime)" if found else "`snakemake fit_FAMILY` writes it"
        raise PrismError(f"{path}: no such fit; {hint} (FAMILY_DIR is e.g. scaling-study/text_image)")
    result = read_fit(path)
    return [f"== {path}"] + _lines(result, budgets, str(path), study_plan(Path(folder)))


def predict_csv(csv: str | Path, budget_text: str, options) -> list[str]:
    """The lines of `prism isoflop predict --csv RUNS --budget ...`: fit here (nothing written), then predict."""
    from prism.isoflop.fit.fit import fit_records  # noqa: PLC0415 lazy: numpy and SciPy
    from prism.isoflop.runs.table import load_runs  # noqa: PLC0415 lazy: the runs reader

    budgets = parse_budgets(budget_text)
    options.validate()
    loaded = load_runs(csv)
    plan = study_plan(Path(csv).parent)
    result = fit_records(loaded.records, options, excluded=[], tokens_per_sample=row_length(plan))
    head = [f"== {csv} (fitted here: {len(loaded.records)} runs)"]
    return head + _lines(result, budgets, str(csv), plan)
