"""Markdown for people: the fit JSON (and the plan forecast) said in tables and sentences."""

from __future__ import annotations

from prism.isoflop.records import format_budget


def _g(v, fmt: str = ".4g") -> str:
    return "-" if v is None else format(v, fmt)


def _ci(ci, fmt: str = ".3f") -> str:
    return "-" if not ci else f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]"


def fit_markdown(result: dict) -> str:
    """The fit report: verdict first, then each approach, then the per-budget table."""
    inp, diag = result.get("input", {}), result["diagnostics"]
    level = int(round(100 * result.get("ci_level", 0.8)))
    lines = ["# IsoFLOP fit", ""]
    if inp:
        filt = ", ".join(f"{k}={v}" for k, v in inp.get("filters", {}).items()) or "none"
        status = ", ".join(f"{k}: {v['count']}" for k, v in inp.get("excluded_status", {}).items()) or "none"
        lines += [
            f"Input `{inp.get('csv')}`: {inp.get('n_rows')} rows, {inp.get('n_used')} used "
            f"(filters: {filt}; filtered out {inp.get('filtered_out')}; status not ok: {status}; "
            f"empty/NaN values: {inp.get('excluded_nan', {}).get('count', 0)}).",
            "",
        ]
    verdict = "**identifiable**" if diag["identifiable"] else "**NOT identifiable**"
    lines += [f"Verdict: the exponent is {verdict}.", ""]
    lines += [f"- {r}" for r in diag["reasons"]]
    lines += [
        "",
        f"Noise estimate: {_g(diag['noise'], '.3g')} ({diag['noise_source']}). "
        f"Bootstrap: {result['bootstrap']} resamples, seed {result['seed']}, {level}% intervals.",
        "",
    ]
    if diag.get("a_interval_source"):
        lines += [f"The verdict's interval of a: {diag['a_interval_source']}.", ""]
    a2, a3 = result.get("approach2"), result.get("approach3")
    lines += ["## Power laws", "", "| method | a (N_opt ~ C^a) | a interval | b (D_opt ~ C^b) | b interval |", "|---|---|---|---|---|"]
    if a2:
        lines.append(f"| Approach 2 | {_g(a2['a'], '.4f')} | {_ci(a2['a_ci'])} | {_g(a2['b'], '.4f')} | {_ci(a2['b_ci'])} |")
    if a3 and a3.get("a") is not None:
        lines.append(f"| Approach 3 | {a3['a']:.4f} | {_ci(a3['a_ci'])} | {a3['b']:.4f} | {_ci(a3['b_ci'])} |")
    lines.append("")
    if a3 and a3.get("a") is not None:
        lines += [
            "## Approach 3: L(N, D) = E + A / N^alpha + B / D^beta",
            "",
            "| parameter | value | interval |",
            "|---|---|---|",
        ]
        for key in ("E", "A", "B", "alpha", "beta"):
            lines.append(f"| {key} | {a3[key]:.4g} | {_ci(a3.get(key + '_ci'), '.4g')} |")
        conv = "converged" if a3["converged"] else "**NOT converged**"
        lines += [
            "",
            f"Optimiser: {conv}; objective {a3['objective']:.6e} (Huber, delta 1e-3, on log L), "
            f"{a3['n_local']} of {a3['n_starts']} grid starts optimised; {a3['convergence_note']}.",
            "",
        ]
    elif a3:
        lines += ["## Approach 3", "", f"Not fitted: {a3.get('reason')}", ""]
    agree = diag["approach_agreement"]
    if agree.get("difference") is not None:
        lines += ["## Agreement of the approaches", "", agree["note"], ""]
    if a2:
        lines += [
            "## Approach 2: per budget",
            "",
            "| budget C | runs | N range | spread (decades) | N_opt | D_opt | loss at min | SNR | accepted | reason |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        snr = {b["budget"]: b["snr"] for b in diag["budgets"]}
        for f in a2["per_budget"]:
            lines.append(
                f"| {format_budget(f['budget'])} | {f['n_points']} | {f['n_min']:.3g}-{f['n_max']:.3g} | "
                f"{f['n_spread_decades']:.2f} | {_g(f['n_opt'], '.3g')} | {_g(f['d_opt'], '.3g')} | "
                f"{_g(f['loss_min'], '.4f')} | {_g(snr.get(f['budget']), '.1f')} | "
                f"{'yes' if f['accepted'] else 'no'} | {f['reason']} |"
            )
        lines.append("")
    return "\n".join(lines)
