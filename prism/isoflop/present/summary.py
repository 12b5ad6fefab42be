"""A fitted study's answer in a few lines, for the terminal (`prism isoflop summary`, Snakemake's onsuccess).

Reads what the workflow wrote in a family folder: `fit/REGIME.json` (the fit, a `FitResult`),
`runs.csv` (the runs, with their status and wall times), `plots/REGIME/` (the
figures) and the training jobs' `time` records in their metrics.json (the study's
training FLOP/s end to end against the peak, and where the jobs' time went). A
missing or unreadable file is said in its line, never fatal: the summary runs after a
successful workflow and must not turn it into a failure.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
import re
from pathlib import Path

from prism.core.errors import PrismError
from prism.core.ids import format_budget
from prism.core.studylayout import FamilyFolder
from prism.isoflop.design.plantext import dropped_lines
from prism.isoflop.design.totrain import study_plan
from prism.isoflop.fit.diagnostics import MIN_BUDGETS
from prism.isoflop.fitread import read_fit
from prism.isoflop.planread import PlanUnreadable, plan_mapping
from prism.isoflop.present.notfitted import approach3_answers, approach3_not_drawn, fitted_budgets
from prism.isoflop.present.prediction import backtest_lines, prediction_lines
from prism.isoflop.present.predictread import train_lines
from prism.isoflop.runs.table import read_rows
from prism.train.timing import study_timing, timing_lines


def _ci(value, ci) -> str:
    if value is None:
        return "n/a"
    text = f"{value:.3f}"
    if ci and all(c is not None for c in ci):
        text += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
    return text


def _num(text) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _budgets(values) -> str:
    out = []
    for v in values or []:
        try:
            out.append(format_budget(float(v)))
        except (TypeError, ValueError):
            out.append(str(v))
    return ", ".join(out) or "none"


def fit_lines(fit, lr_note: str = "", plan: dict | None = None) -> list[str]:
    """The exponents with their intervals, the verdict and its main reason, the budgets and runs left out.

    `fit` is a `FitResult` (prism.isoflop.fit.result); `lr_note`, the verdict's clause when the learning
    rate's share dominates a's interval (`LrShare.verdict_note`); `plan`, the study's plan.yaml, whose
    shape rule names the sizes to train at each predicted budget.
    """
    pct = f"{100 * fit.ci_level:.0f}%"
    lines = []
    a2, a3 = fit.approach2, fit.approach3
    if a2 is not None and a2.a is None:  # "a = n/a" read as a crash: say why in words
        lines.append(f"  Approach 2: no exponent: {len(fit.diagnostics.budgets_used)} budget(s) with a minimum inside "
                     "their grid, a line needs at least 2 (each budget's reason below)")  # fmt: skip
    elif a2 is not None:
        lines.append(
            f"  Approach 2: a = {_ci(a2.a, a2.a_ci)}, b = {_ci(a2.b, a2.b_ci)}"
            f" ({pct} intervals{', ' + a2.interval_method if a2.interval_method else ''})"
        )
    if a3 is not None:
        if approach3_answers(a3):
            lines.append(f"  Approach 3: a = {_ci(a3.a, a3.a_ci)}, b = {_ci(a3.b, a3.b_ci)}")
        elif a3.a is not None:
            lines.append(f"  Approach 3: {approach3_not_drawn(a3, fitted_budgets(fit), MIN_BUDGETS)}")
        else:
            lines.append(f"  Approach 3: no fit ({a3.reason or a3.convergence_note or 'not converged'})")
    v = fit.verdict
    lines.append(
        f"  verdict: {'identifiable' if v.identifiable else 'NOT identifiable'}"
        + (f": {v.reasons[0]}" if v.reasons else "")
        + lr_note
    )
    if fitted_budgets(fit) < MIN_BUDGETS:  # the smoke study's grid: a check of the pipeline, said as one
        lines.append(
            f"  {fitted_budgets(fit)} budget(s) cannot determine an exponent (it needs {MIN_BUDGETS}): this grid "
            "checks that the pipeline runs end to end, and it did"
        )
    interval = v.interval
    if interval and all(isinstance(x, (int, float)) and math.isfinite(x) for x in interval):
        lo, hi = interval
        lines.append(
            f"  interval of a used by the verdict: [{lo:.3f}, {hi:.3f}] (width {hi - lo:.3f}; "
            f"{v.interval_source or 'bootstrap'})"
        )
    lines += verdict_robustness_lines(fit)
    lines += [f"  {line}" for line in answer_lines(fit, plan)]
    lines.append(f"  budgets accepted: {_budgets(fit.diagnostics.budgets_used)}")
    for dropped in fit.diagnostics.budgets_dropped or []:
        lines.append(f"  budget {_budgets([dropped.get('budget')])} rejected: {dropped.get('reason')}")
    off = [s for s in fit.diagnostics.size_offsets if s.flagged]
    if off:
        lines.append(
            "  sizes off their curves at every budget (not independent noise): "
            + ", ".join(f"{s.label} {s.mean:+.3f}" for s in off)
        )
    for ex in fit.exclusions:
        if ex.kind != "status":  # runs not ok are listed from runs.csv below
            lines.append(f"  excluded by the fit {ex.run_id} ({ex.kind}): {ex.reason}")
    return lines


def answer_lines(fit, plan: dict | None = None) -> list[str]:
    """What to train at the budgets the config asked (`fit.predict`): the allocation, and with the study's
    plan the nearest sizes of its shape rule; then the backtest."""
    section = fit.prediction
    if section is None or section.model is None:
        return []
    asked = [p for p in section.predictions if p.budget in section.asked]
    more = train_lines(plan, section.model)
    return prediction_lines(asked, section.model.reach, section.model.level, more) + backtest_lines(section.backtests)


def _span(values: list[float]) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.3f}" if hi - lo < 5e-4 else f"{lo:.3f}-{hi:.3f}"


def verdict_robustness_lines(fit) -> list[str]:
    """Whether the approaches disagree (the interval then spans both), and how a moves under the choices
    a reader would question (`FitResult.sensitivity`), with those the verdict's interval does not hold."""
    heads = ("Approach 2 and Approach 3 disagree", "Approach 2 misfits", "Approach 3 misfits")
    lines = [f"  {r}" for r in fit.verdict.reasons if r.startswith(heads)]
    moves = [m for m in fit.sensitivity if m.a is not None]
    if not moves:
        return lines
    parts = []
    for choice in dict.fromkeys(m.choice for m in moves):
        # the window and the threshold are named by what they were changed to; the others by the choice
        label = next(m.detail for m in moves if m.choice == choice) if choice in ("window", "huber") else choice
        per = [
            f"{_span([m.a for m in moves if m.choice == choice and m.approach == name])} {label}"
            for name, label in (("approach2", "A2"), ("approach3", "A3"))
            if any(m.choice == choice and m.approach == name for m in moves)
        ]
        parts.append(f"{label} " + ", ".join(per))
    lines.append("  a under other choices: " + "; ".join(parts) + f": {_held_text(fit.verdict, moves)}")
    return lines


def _held_text(verdict, moves) -> str:
    """How many moves the verdict's interval leaves out, counting only the approaches heard: a
    silenced approach's moves are shown but decide nothing, so they are not counted."""
    heard = verdict.heard
    counted = [m for m in moves if not heard or m.approach in heard]
    silenced = sorted({m.approach for m in moves} - {m.approach for m in counted})
    out = [m for m in counted if m.outside]
    text = (
        "all inside the verdict's interval"
        if not out
        else f"{len(out)} of {len(counted)} outside the verdict's interval (largest {max(m.outside for m in out):.3f})"
    )
    if silenced:
        names = " and ".join(f"A{a[-1]}" for a in silenced)
        text += f" ({names}'s moves not counted: it misfits)"
    return text


def lr_share(folder: Path, fit, plan: dict | None):
    """The learning-rate rule of the study and, for a fitted one or against a previous round's sweep, a's
    sensitivity to it: an `LrShare` (prism.isoflop.fit.lr_sensitivity), its lines and whether it dominates."""
    from prism.isoflop.present.fitfiles import a_interval, family_lr_share  # noqa: PLC0415 lazy: numpy, the runs

    return family_lr_share(folder, a_interval(fit), plan)


def runs_lines(csv_path: Path) -> list[str]:
    """Runs not fitted (collapsed, stale, incomplete, error) and runs with warnings; estimate against actual time."""
    if not csv_path.is_file():
        return [f"  runs: {csv_path} not found"]
    rows = read_rows(csv_path)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.get("status", "")] = counts.get(r.get("status", ""), 0) + 1
    # Runs whose metrics.json predates the record computed in fp32 (the only precision there was).
    precisions = sorted({r.get("precision") or "fp32" for r in rows if r.get("status") == "ok"})
    computed = f"; computed in {' and '.join(precisions)}" if precisions else ""
    paths = sorted({r["kernel_path"] for r in rows if r.get("status") == "ok" and r.get("kernel_path")})
    if paths:
        computed += f"; kernels {' and '.join(paths)}" + (" (MIXED: losses differ by rounding)" * (len(paths) > 1))
    lines = [f"  runs: {len(rows)} (" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + f"){computed}"]
    for r in rows:
        if r.get("status") not in ("ok", ""):
            lines.append(f"  left out {r.get('run_id')} ({r.get('status')}): {r.get('note', '')}")
        elif r.get("warnings"):
            lines.append(f"  warning {r.get('run_id')}: {r['warnings']}")
    est = [_num(r.get("est_wall_s")) for r in rows if r.get("status") == "ok"]
    act = [_num(r.get("wall_s")) for r in rows if r.get("status") == "ok"]
    if est and all(v is not None for v in est) and all(v is not None for v in act):
        lines.append(
            f"  time in runs, the ok runs' added up (not the study's wall time): their steps estimated "
            f"{sum(est) / 60:.1f} min, the runs took {sum(act) / 60:.1f} min (x{sum(act) / max(sum(est), 1e-9):.2f}: "
            "start-up and evaluation on top)"
        )
    return lines


def job_times(folder: Path) -> list[dict]:
    """The `time` records of a family's training jobs: its runs and (wsd) its trajectory segments."""
    records = []
    for path in [*folder.glob("runs/*/metrics.json"), *folder.glob("stable/*/*/metrics.json")]:
        try:
            record = json.loads(path.read_text()).get("time")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def plan_dropped(path: Path) -> list[str]:
    """The sizes the plan dropped from a budget, and why (`plantext.dropped_lines`); nothing without a plan."""
    try:
        plan = plan_mapping(path)
        return dropped_lines(plan) if plan is not None else []
    except PlanUnreadable as err:
        return [f"plan {err}"]
    except (KeyError, TypeError, ValueError) as err:
        return [f"plan {path}: unreadable ({type(err).__name__})"]


def summarize(family_dirs: list[str | Path]) -> str:
    """The summary of every fit under each family folder."""
    out = []
    for folder in map(Path, family_dirs):
        fits = sorted(FamilyFolder(folder).fit_dir.glob("*.json"))
        if not fits:
            out.append(f"{folder}: no fit yet (fit/*.json)")
            continue
        plan = study_plan(folder)
        for path in fits:
            regime = path.stem
            out.append(f"== {folder.name} ({regime}): {path}")
            try:
                fit = read_fit(path)
            except PrismError as err:
                out.append(f"  unreadable: {err}")
                continue
            try:
                lr = lr_share(folder, fit, plan)
                out += fit_lines(fit, lr.verdict_note(), plan)
                out += lr.lines
                out += runs_lines(FamilyFolder(folder).runs_table)
            except (KeyError, TypeError, ValueError, AttributeError, OSError, csv.Error) as err:
                out.append(f"  (not summarised: {type(err).__name__}: {err}; see {path.with_suffix('.md')})")
            plots = folder / "plots" / regime
            figures = sorted(p.name for p in plots.glob("*.png")) if plots.is_dir() else []
            out.append(f"  figures: {plots}/ ({', '.join(figures)})" if figures else f"  figures: none in {plots}/")
            md = path.with_suffix(".md")
            if md.is_file():
                out.append(f"  report: {md}")
        out += [f"  {line}" for line in plan_dropped(FamilyFolder(folder).plan)]
        out.append(f"== {folder.name}: time")
        out += timing_lines(study_timing(job_times(folder)))
    return "\n".join(out)


def _inline(text: str) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)


def markdown_html(text: str) -> str:
    """The fit report's Markdown as HTML: headings, paragraphs, lists and pipe tables (all it uses)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            out.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(set(c) <= set("-: ") for c in cells):
                    rows.append(cells)
                i += 1
            head, *body = rows or [[]]
            out.append(
                "<table><tr>"
                + "".join(f"<th>{_inline(c)}</th>" for c in head)
                + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
                + "</table>"
            )
        elif line.lstrip().startswith(("- ", "* ")):
            items = []
            while i < len(lines) and lines[i].lstrip().startswith(("- ", "* ")):
                items.append(f"<li>{_inline(lines[i].lstrip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "- ", "* ")):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(para))}</p>")
    return "\n".join(out)


STYLE = (
    "body{font-family:sans-serif;margin:1.5em;max-width:70em}table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #bbb;padding:.2em .5em;font-size:90%}th{background:#eee}"
    "pre{background:#f6f6f6;padding:.8em;white-space:pre-wrap}"
)


def summary_html(family_dirs: list[str | Path]) -> str:
    """One self-contained page: the summary, then each fit's report (its tables) as HTML."""
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>IsoFLOP study</title><style>{STYLE}</style>"
        "</head><body>",
        "<h1>Study summary</h1>",
    ]
    # The figures are beside this page in the report (and not drawn yet when the fit writes it).
    text = "\n".join(
        line for line in summarize(family_dirs).splitlines() if not line.startswith(("  figures:", "  report:"))
    )
    parts.append(f"<pre>{html.escape(text)}</pre>")
    for folder in map(Path, family_dirs):
        for md in sorted((folder / "fit").glob("*.md")):
            parts.append(f"<hr><p><code>{html.escape(str(md))}</code></p>")
            parts.append(markdown_html(md.read_text()))
    parts.append("</body></html>")
    return "\n".join(parts)


ANSWER = "answer.html"
ANSWER_FIGURES = ("isoflop_curves.png", "scaling_laws.png")


def answer_html(fit_json: str | Path, plots_dir: str | Path) -> str:
    """The study's answer as an HTML fragment: the verdict, the exponents with intervals and the figures.

    The report's first page includes it (rules/report/workflow.rst), so the report opens on
    the answer; the figures are data URIs so the fragment needs nothing beside it.
    """
    fit = read_fit(fit_json)
    verdict = "identifiable" if fit.verdict.identifiable else "NOT identifiable"
    reason = f": {fit.verdict.reasons[0]}" if fit.verdict.reasons else ""
    fit_path = Path(fit_json).resolve()
    family = fit_path.parent.parent.name if fit_path.parent.name == "fit" else ""
    title = f"{family}, {fit_path.stem}" if family else fit_path.stem
    parts = [
        f"<div class='prism-answer'><h2>The answer ({html.escape(title)})</h2>",
        f"<p><b>verdict: {verdict}</b>{html.escape(reason)}</p>",
        "<pre style='white-space:pre-wrap'>"
        + html.escape("\n".join(line.strip() for line in fit_lines(fit)))
        + "</pre>",
    ]
    for name in ANSWER_FIGURES:
        path = Path(plots_dir) / name
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode()
            parts.append(f"<p><img alt='{name}' src='data:image/png;base64,{data}' style='max-width:100%'></p>")
    parts.append("</div>")
    return "\n".join(parts)
