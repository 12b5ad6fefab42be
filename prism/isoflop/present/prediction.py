"""The predictions in words: a few lines a budget for the terminal and the summary, a table for fit/*.md."""

from __future__ import annotations

from prism.isoflop.fit import methods
from prism.isoflop.fit.approach2 import budget_text
from prism.isoflop.fit.backtest import backtest_line
from prism.isoflop.fit.predict import Estimate, Prediction

# An answer spanning the approaches where they disagree; any other is one method's, by its label.
SPAN = "both approaches (they disagree)"


def method_name(approach: str) -> str:
    return SPAN if approach == "both" else methods.label(approach)


def _g(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def _ci(ci, digits: int = 3) -> str:
    return "" if ci is None else f" [{_g(ci[0], digits)}, {_g(ci[1], digits)}]"


def _loss(e: Estimate) -> str:
    if e.loss is None:
        return "loss -"
    ci = "" if e.loss_ci is None else f" [{e.loss_ci[0]:.3f}, {e.loss_ci[1]:.3f}]"
    return f"loss {e.loss:.3f}{ci}"


def estimate_text(e: Estimate) -> str:
    """`N_opt 5.6e8 [2.5e8, 1.3e9], D_opt 2.9e11 tokens [...] (1.1e9 samples), loss 2.310 [...], 520 tokens/param`."""
    samples = f" ({_g(e.samples)} samples)" if e.samples is not None else ""
    return (
        f"N_opt {_g(e.n_opt)}{_ci(e.n_ci)}, D_opt {_g(e.d_opt)} tokens{_ci(e.d_ci)}{samples}, {_loss(e)}, "
        f"{_g(e.tokens_per_param)} tokens/param{_ci(e.tpp_ci)}"
    )


def reach_text(p: Prediction, reach: float) -> str:
    """How far beyond the data, and whether beyond the reach the study can vouch for."""
    if p.decades_c == 0 and p.decades_n == 0:
        where = "within the data"
    else:
        where = f"{p.decades_c:.1f} decades of C and {p.decades_n:.1f} of N beyond the data"
    if p.extrapolation:
        where += f": EXTRAPOLATION beyond the reach of {reach:g} decades, not vouched for"
    return where


def prediction_lines(predictions: list[Prediction], reach: float, level: float = 0.8, more=None) -> list[str]:
    """Per budget: the answer with its intervals, how far beyond the data, and each approach's N_opt;
    `more(prediction)`, further lines under it (what to train)."""
    lines = []
    for p in predictions:
        e = p.answer
        if e is None:
            lines.append(f"C = {budget_text(p.budget)}: no prediction (no law was fitted)")
            continue
        lines.append(f"C = {budget_text(p.budget)} ({method_name(e.approach)}): {estimate_text(e)}")
        lines.append(f"  {reach_text(p, reach)}")
        if len(p.approaches) > 1:
            lines.append(
                "  each approach: "
                + "; ".join(f"{method_name(a.approach)} N_opt {_g(a.n_opt)}{_ci(a.n_ci)}" for a in p.approaches)
            )
        lines += [f"  {line}" for line in (more(p) if more else [])]
    if predictions:
        lines.append(f"({100 * level:.0f}% prediction intervals: docs/methods.md, 'Predicting a budget')")
    return lines


def backtest_lines(backtests) -> list[str]:
    return [f"backtest: {backtest_line(b)}" for b in backtests] or [
        "backtest: none (it needs at least 4 accepted budgets: 3 left after the largest is left out)"
    ]


def prediction_table(section) -> list[str]:
    """fit/*.md: one row a budget (the study's own, then the asked ones), then the backtests."""
    model = section.model
    if model is None or not section.predictions:
        return []
    lines = [
        "## Predictions",
        "",
        f"The compute-optimal allocation at each budget, with {100 * model.level:.0f}% prediction intervals "
        f"(answer: the approach the verdict rests on, or both where they disagree). Beyond {model.reach:g} "
        "decades of the data in C or N a prediction is an extrapolation the study cannot vouch for.",
        "",
        "| budget | answer | N_opt | D_opt (tokens) | samples | loss | tokens/param | beyond the data (C, N decades) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in section.predictions:
        e = p.answer
        if e is None:
            continue
        asked = " (asked)" if p.budget in section.asked else ""
        flag = " EXTRAPOLATION" if p.extrapolation else ""
        loss = (
            "-"
            if e.loss is None
            else f"{e.loss:.3f}" + ("" if e.loss_ci is None else f" [{e.loss_ci[0]:.3f}, {e.loss_ci[1]:.3f}]")
        )
        lines.append(
            f"| {budget_text(p.budget)}{asked} | {e.approach} | {_g(e.n_opt)}{_ci(e.n_ci)} "
            f"| {_g(e.d_opt)}{_ci(e.d_ci)} "
            f"| {_g(e.samples)} | {loss} | {_g(e.tokens_per_param)}{_ci(e.tpp_ci)} "
            f"| {p.decades_c:.1f}, {p.decades_n:.1f}{flag} |"
        )
    lines += ["", *(f"- {line}" for line in backtest_lines(section.backtests)), ""]
    return lines
