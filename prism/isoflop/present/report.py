"""Markdown for people: a FitResult said in tables and sentences, the verdict first."""

from __future__ import annotations

from prism.isoflop.fit import diagnostics, methods
from prism.isoflop.fit.approach2 import budget_text
from prism.isoflop.fit.method import chosen
from prism.isoflop.fit.misfit import LACK_OF_FIT_LEVEL
from prism.isoflop.fit.result import FitResult
from prism.isoflop.present.notfitted import approach3_not_drawn, fitted_budgets
from prism.isoflop.present.prediction import prediction_table
from prism.isoflop.records import SURFACE_KEYS


def _g(v, fmt: str = ".4g") -> str:
    return "-" if v is None else format(v, fmt)


def _ci(ci, fmt: str = ".3f") -> str:
    return "-" if not ci else f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]"


def _budget(v) -> str:
    return "-" if v is None else budget_text(v)


def _noise(diag) -> str:
    """The noise, or that there is none to measure: residuals at rounding level are no noise."""
    if diag.noise is None:
        return "-"
    if diag.noise < 1e-6:
        return f"{diag.noise:.1e}: none to measure (the losses lie on smooth curves)"
    return f"{diag.noise:.3g}"


def fit_markdown(result: FitResult | dict, lr_lines: list[str] | None = None, lr_note: str = "") -> str:
    """The fit report: verdict, noise, exclusions, each approach, the per-budget table; `lr_lines`, the
    study's learning-rate rule and a's sensitivity to it (prism.isoflop.fit.lr_sensitivity), its own section."""
    if isinstance(result, dict):
        result = FitResult.from_json(result)
    r, diag = result, result.diagnostics
    lines = ["# IsoFLOP fit", ""]
    lines += (
        _input(r)
        + _verdict(r, lr_note)
        + _settings(r)
        + _excluded(r)
        + _power_laws(r)
        + _approach3(r.approach3, fitted_budgets(r))
    )
    agree = diag.approach_agreement
    if agree.get("difference") is not None:
        lines += ["## Agreement of the approaches", "", agree["note"], ""]
    lines += _sensitivity(r)
    if r.prediction is not None:
        lines += prediction_table(r.prediction)
    if lr_lines:
        lines += ["## Learning rate", "", *(f"- {line.strip()}" for line in lr_lines), ""]
    if r.approach2 is not None:
        lines += _per_budget(r) + _lack_of_fit(r)
    if diag.size_offsets:
        lines += _size_offsets(diag)
    return "\n".join(lines)


def _input(r: FitResult) -> list[str]:
    """Which CSV, how many rows it had and how many were fitted."""
    inp = r.input
    if not inp:
        return []
    filt = ", ".join(f"{k}={val}" for k, val in inp.get("filters", {}).items()) or "none"
    return [
        f"Input `{inp.get('csv')}`: {inp.get('n_rows')} rows, {r.diagnostics.points_used} fitted "
        f"(filters: {filt}; filtered out {inp.get('filtered_out')}; {len(r.exclusions)} excluded, listed below).",
        "",
    ]


def _verdict(r: FitResult, lr_note: str = "") -> list[str]:
    """The verdict, its reasons and its interval; `lr_note`, its clause when the lr dominates a's interval."""
    v = r.verdict
    verdict = "**identifiable**" if v.identifiable else "**NOT identifiable**"
    used = methods.label(v.method)
    lines = [f"Verdict: the exponent a is {verdict} (method: {used}){lr_note}.", ""]
    lines += [f"- {reason}" for reason in v.reasons]
    lines.append("")
    if v.interval is not None:
        level = int(round(100 * r.ci_level))
        lines += [f"The verdict's {level}% interval of a: {_ci(v.interval)}, from {v.interval_source}.", ""]
    return lines


def _settings(r: FitResult) -> list[str]:
    """The noise, the objective and the bootstrap, the sizes off their curves, and the warnings."""
    diag = r.diagnostics
    objective = ""
    if "approach3" in chosen(r.method):
        objective = (
            f"Objective of Approach 3: Huber on log L with delta {r.huber_delta:g} "
            f"({'least squares in effect' if r.huber_delta >= 1 else 'robust to outlying runs'}). "
        )
    lines = [
        f"Noise: {_noise(diag)} ({diag.noise_source})"
        + (f"; the runs' median loss_se is {diag.loss_se_median:.3g}" if diag.loss_se_median is not None else "")
        + ".",
        f"{objective}Bootstrap: {r.bootstrap} resamples, seed {r.seed}. Budget check: FLOPs within "
        f"{100 * r.budget_tolerance:g}% of the budget or of the grid's FLOPs / budget trend with size.",
        "",
    ]
    off = [s for s in diag.size_offsets if s.flagged]
    if off:
        lines += [
            'Sizes off their curves at every budget (not independent noise; "Sizes across budgets"): '
            + ", ".join(f"{s.label} {s.mean:+.3f} ({s.t:+.1f} s.e.)" for s in off)
            + ".",
            "",
        ]
    for w in r.warnings:
        lines.append(f"Warning: {w}.")
    if r.warnings:
        lines.append("")
    return lines


def _excluded(r: FitResult) -> list[str]:
    if not r.exclusions:
        return []
    lines = ["## Excluded runs", "", "| run | budget | N | loss | why |", "|---|---|---|---|---|"]
    for e in r.exclusions:
        lines.append(f"| {e.run_id} | {_budget(e.budget)} | {_g(e.params, '.3g')} | {_g(e.loss, '.4f')} | {e.reason} |")
    return lines + [""]


def _power_laws(r: FitResult) -> list[str]:
    """Both approaches' exponents, then what Approach 2's interval covers and whether the law bends."""
    a2, a3 = r.approach2, r.approach3
    level = int(round(100 * r.ci_level))
    lines = [
        "## Power laws",
        "",
        f"| method | a (N_opt ~ C^a) | a {level}% interval | a leaving one budget out | b (D_opt ~ C^b) | b interval |",
        "|---|---|---|---|---|---|",
    ]
    if a2 is not None:
        lines.append(
            f"| Approach 2 | {_g(a2.a, '.4f')} | {_ci(a2.a_ci)} | {_ci(a2.a_loo)} | {_g(a2.b, '.4f')} | "
            f"{_ci(a2.b_ci)} |"
        )
    if a3 is not None and a3.a is not None:
        lines.append(f"| Approach 3 | {a3.a:.4f} | {_ci(a3.a_ci)} | - | {_g(a3.b, '.4f')} | {_ci(a3.b_ci)} |")
    lines += [f"| {m.label} | {_g(m.a, '.4f')} | {_ci(m.a_ci)} | - | - | - |" for m in r.methods]
    lines.append("")
    for m in r.methods:
        how = f"{m.label}'s interval of a: {m.interval_method}" if m.a_ci is not None else f"{m.label}: {m.reason}"
        lines += [f"{how}.", ""]
    if a3 is not None and a3.a_ci is not None and a3.a_interval_method:
        boot = f"; the bootstrap over runs gives {_ci(a3.a_ci_bootstrap)}" if a3.a_ci_bootstrap else ""
        lines += [f"Approach 3's interval of a: {a3.a_interval_method}{boot}.", ""]
    if a2 is None or a2.a is None:
        return lines
    lines += [
        f"Approach 2's interval of a: {a2.interval_method}. It covers the scatter of the per-budget minima "
        f"around the power law as well as each minimum's noise. For comparison, the within-budget bootstrap "
        f"over runs alone gives {_ci(a2.a_ci_bootstrap)} (noise within budgets only), and leaving one budget "
        f"out moves a over {_ci(a2.a_loo)}.",
        "",
    ]
    if a2.curvature:
        cv = a2.curvature
        lines += [
            f"A straight power law is an assumption: a quadratic term in log C adds {cv['c2']:+.3g} "
            f"(t = {cv['t']:+.2f}, p = {cv['p']:.2g}, {cv['dof']} degrees of freedom)"
            + ("; the exponent changes with C." if cv["p"] < 0.01 else "; no sign of a bend."),
            "",
        ]
    return lines


def _sensitivity(r: FitResult) -> list[str]:
    """How a moves under the choices a reader would question, against the verdict's interval."""
    if not r.sensitivity:
        return []
    lines = [
        "## Sensitivity of a",
        "",
        f"a under the choices a reader would question, against the verdict's interval {_ci(r.verdict.interval)}. "
        f"The same runs analysed otherwise ({_stretching(r)}) are the methods' answer too: the interval is "
        "stretched to hold them. A budget or the grid's edges left out lose runs, and their noise: they are "
        "placed, not held.",
        "",
        "| choice | which | approach | a | outside the interval by | stretches |",
        "|---|---|---|---|---|---|",
    ]
    for m in r.sensitivity:
        approach = methods.label(m.approach)
        outside = "-" if m.outside is None else ("inside" if not m.outside else f"{m.outside:.3f}")
        stretches = "yes" if m.stretches else "no"
        lines.append(f"| {m.choice} | {m.detail} | {approach} | {_g(m.a, '.3f')} | {outside} | {stretches} |")
    return lines + [""]


def _stretching(r: FitResult) -> str:
    """The stretching moves' choices in words: the other window, the other Huber threshold (what was fitted)."""
    names = {"window": "the other window of sizes", "huber": "the other Huber threshold"}
    return " or ".join(dict.fromkeys(names.get(m.choice, m.choice) for m in r.sensitivity if m.stretches)) or "none"


def _approach3(a3, n_budgets: int = 0) -> list[str]:
    """Approach 3's surface and its optimiser, or why it was not fitted (`n_budgets`: the fit's budgets)."""
    if a3 is None:
        return []
    if not a3.fitted:
        return ["## Approach 3", "", f"Not fitted: {a3.reason}", ""]
    lines = [
        "## Approach 3: L(N, D) = E + A / N^alpha + B / D^beta",
        "",
        "| parameter | value | interval |",
        "|---|---|---|",
    ]
    for key in SURFACE_KEYS:
        lines.append(f"| {key} | {getattr(a3, key):.4g} | {_ci(getattr(a3, key + '_ci'), '.4g')} |")
    conv = "converged" if a3.converged else "**NOT converged**"
    if not a3.converged:  # its numbers above are no answer: say so in words, as the summary does
        lines += ["", f"Approach 3 gives {approach3_not_drawn(a3, n_budgets, diagnostics.MIN_BUDGETS)}."]
    return lines + [
        "",
        f"Optimiser: {conv}; objective {a3.objective:.6e} (Huber, delta {a3.huber_delta:g}, on log L), "
        f"{a3.n_local} of {a3.n_starts} grid starts optimised; {a3.convergence_note}.",
        "",
    ]


def _per_budget(r: FitResult) -> list[str]:
    """Approach 2's table: one row per budget."""
    a2, diag = r.approach2, r.diagnostics
    lines = [
        "## Approach 2: per budget",
        "",
        "| budget C | runs | N range | spread (decades) | N_opt | N_opt interval | D_opt | loss at min | "
        "noise | SNR | accepted | reason |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = {b.budget: b for b in diag.budgets}
    minima = {m.budget: m for m in a2.minima}
    for f in a2.per_budget:
        b, m = rows.get(f.budget), minima.get(f.budget)
        lines.append(
            f"| {budget_text(f.budget)} | {f.n_points} | {f.n_min:.3g}-{f.n_max:.3g} | "
            f"{f.n_spread_decades:.2f} | {_g(f.n_opt, '.3g')} | {_ci(m.n_opt_ci if m else None, '.3g')} | "
            f"{_g(f.d_opt, '.3g')} | {_g(f.loss_min, '.4f')} | {_g(b.noise if b else None, '.3g')} | "
            f"{_g(b.snr if b else None, '.1f')} | {'yes' if f.accepted else 'no'} | {_budget_reason(f)} |"
        )
    return lines + [""]


def _budget_reason(f) -> str:
    if f.accepted and f.windowed:
        full = (
            f"; the full grid's vertex {f.full_n_opt:.3g}" if f.full_n_opt else "; the full grid's has none inside it"
        )
        return f"ok, on {f.window_sizes} of its {f.n_sizes} sizes (lack of fit beyond them){full}"
    return f.reason


def _lack_of_fit(r: FitResult) -> list[str]:
    """Per budget: the noise where the parabola fits beside the full grid's scatter, misfit included."""
    a2, rows = r.approach2, {b.budget: b for b in r.diagnostics.budgets}
    if not any(f.lack_of_fit_p is not None or f.n_window is not None for f in a2.per_budget):
        return []  # a fit JSON from before windows
    lines = [
        "## Approach 2: lack of fit and noise per budget",
        "",
        f"Lack of fit: the parabola's residual sum of squares beyond a quartic's against the noise of "
        f"neighbouring sizes (p < {LACK_OF_FIT_LEVEL:g}: the curve is no parabola there). The minimum above is "
        "fitted on the sizes shown; the full grid's parabola is given for comparison, its residual std being "
        "noise plus misfit. Residual signs are the full grid's, ordered by N.",
        "",
        "| budget C | sizes fitted | N range fitted | noise there | full-grid residual std | lack of fit p (full) "
        "| residual signs | runs test p | full-grid N_opt |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in a2.per_budget:
        b = rows.get(f.budget)
        fitted = "-" if f.window_sizes is None else f"{f.window_sizes} of {f.n_sizes}"
        rng = "-" if f.window_n_min is None else f"{f.window_n_min:.3g}-{f.window_n_max:.3g}"
        lines.append(
            f"| {_budget(f.budget)} | {fitted} | {rng} | {_g(b.noise if b else None, '.3g')} | "
            f"{_g(b.full_grid_noise if b else None, '.3g')} | {_g(f.lack_of_fit_p, '.2g')} | "
            f"{f.residual_signs or '-'} | {_g(f.runs_p, '.2g')} | {_g(f.full_n_opt, '.3g')} |"
        )
    lines.append("")
    return lines


def _size_offsets(diag) -> list[str]:
    lines = [
        "## Sizes across budgets",
        "",
        f"Each size's loss minus its budget's parabola, at every accepted budget where it ran (sizes at "
        f"{diagnostics.MIN_OFFSET_BUDGETS} budgets or more). The noise treats these residuals as independent; a "
        f"size whose mean is {diagnostics.OFFSET_K:g} standard errors (noise / sqrt(budgets)) or more from zero "
        "is off its curves at every budget: its shape trains better or worse than its neighbours' (or, in a wsd "
        "study, its branches share one trajectory's luck), and it moves every budget's minimum the same way.",
        "",
        "| size | N | residual per budget | mean | mean / s.e. | off at every budget |",
        "|---|---|---|---|---|---|",
    ]
    for s in diag.size_offsets:
        per = ", ".join(f"{c}: {r:+.3f}" for c, r in s.residuals.items())
        flag = "yes" if s.flagged else "no"
        lines.append(f"| {s.label} | {s.params:.3g} | {per} | {s.mean:+.3f} | {s.t:+.1f} | {flag} |")
    lines.append("")
    return lines
