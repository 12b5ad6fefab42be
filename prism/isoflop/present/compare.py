"""Two studies of the same grid, side by side: does the wsd shortcut give the cosine study's answer?

`prism isoflop compare --study-a COSINE_DIR --study-b WSD_DIR` reads each study's fit
(`{dir}/{family}/fit/{regime}.json`), runs table (`runs.csv`) and plan, and writes a
markdown report: the exponent a of each approach with its interval and whether the
intervals overlap, every run's loss at its budget in both and their relative
difference (the target: within 1%), and the FLOPs each study spent (the wsd study's
with shared prefixes counted once, from its plan).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.core.ids import parse_run_id
from prism.core.studylayout import FamilyFolder
from prism.isoflop.design.trajectories import DEFAULT_COOLDOWN_FRACTION, plan_trajectories, saving
from prism.isoflop.fit.result import FitResult
from prism.isoflop.fitread import read_fit
from prism.isoflop.planread import plan_mapping
from prism.isoflop.runs.table import read_rows

LOSS_TOLERANCE = 0.01


@dataclass(frozen=True)
class Exponent:
    method: str
    a: float | None
    ci: tuple[float, float] | None


def _read_fit(folder: Path, regime: str) -> FitResult:
    return read_fit(FamilyFolder(folder).fit_file(regime), missing="run `snakemake fit_FAMILY` for that study first")


def exponents(fit: FitResult) -> list[Exponent]:
    """Each fitted method's a and interval (the approaches, then any other registered method)."""
    parts = [("Approach 2", fit.approach2), ("Approach 3", fit.approach3)]
    parts += [(m.label, m) for m in fit.methods]
    out = []
    for name, part in parts:
        if part is not None and part.a is not None:
            ci = part.a_ci
            out.append(Exponent(name, float(part.a), (float(ci[0]), float(ci[1])) if ci else None))
    return out


def run_losses(study: Path, family: str) -> dict[str, dict]:
    """{run_id: {loss, loss_se, status, warmup}} of a study's runs.

    From each run's metrics.json (`loss`: the final evaluation at the budget, with its
    standard error; `warmup`: its warm-up steps) where there is one, else from runs.csv
    (no warm-up). The final evaluation is what a wsd branch must match: a mean over the
    last evaluations of a run would mix a branch's stable phase into it.
    """
    folder = FamilyFolder(study / family)
    if not folder.runs_table.is_file():
        raise PrismError(f"{folder.runs_table}: no runs table (run `snakemake collect_FAMILY` for that study first)")
    out = {}
    for row in read_rows(folder.runs_table):
        out[row["run_id"]] = {
            "loss": _number(row.get("loss") or row.get("final_eval_loss")),
            "loss_se": _number(row.get("loss_se")),
            "status": row.get("status", ""),
            "warmup": None,
        }
    for run_id, entry in out.items():
        try:
            metrics = json.loads(folder.run_metrics(run_id).read_text())
        except (OSError, ValueError):
            continue
        if _number(metrics.get("loss")) is not None:
            entry["loss"], entry["loss_se"] = _number(metrics["loss"]), _number(metrics.get("loss_se"))
        entry["warmup"] = _number(metrics.get("warmup"))
    return out


def warmup_note(runs_a: dict, runs_b: dict, common: list[str], label_a: str, label_b: str) -> list[str]:
    """A paragraph when the common runs warmed up differently: then a per-run difference is not the
    schedule's alone (in a run of a few hundred steps a longer warm-up is worth several per cent)."""
    pairs = [(runs_a[r]["warmup"], runs_b[r]["warmup"]) for r in common]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not pairs or all(a == b for a, b in pairs):
        return []

    def span(values) -> str:
        values = list(values)
        lo, hi = int(min(values)), int(max(values))
        return f"{lo}" if lo == hi else f"{lo}-{hi}"

    return [
        "",
        f"Warm-up: the runs warmed up differently ({label_a} {span(a for a, _ in pairs)} steps, {label_b} "
        f"{span(b for _, b in pairs)}), so a per-run difference is the schedule's and the warm-up's, the "
        "more so the shorter the run (a study trained now gives every run the plan's warm-up, and "
        "`tools/bench_schedules.py` trains both schedules with one).",
    ]


def _number(value) -> float | None:
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def overlap(x: tuple[float, float] | None, y: tuple[float, float] | None) -> bool | None:
    if x is None or y is None:
        return None
    return max(x[0], y[0]) <= min(x[1], y[1])


def study_flops(study: Path, family: str, cooldown_fraction: float | None = None) -> tuple[float, float] | None:
    """(cosine FLOPs, wsd FLOPs) of the study's plan: the same grid run both ways.

    `cooldown_fraction` None: the one the plan recorded (its `schedules`), which is the study's.
    """
    plan = plan_mapping(FamilyFolder(study / family).plan)
    if plan is None:
        return None
    if cooldown_fraction is None:
        cooldown_fraction = (plan.get("schedules") or {}).get("cooldown_fraction", DEFAULT_COOLDOWN_FRACTION)
    s = saving(plan_trajectories(plan, cooldown_fraction))
    return s.cosine_flops, s.wsd_flops


def compare_markdown(
    study_a: str | Path,
    study_b: str | Path,
    family: str,
    regime: str = "e2e",
    label_a: str = "cosine",
    label_b: str = "wsd",
    cooldown_fraction: float | None = None,
) -> str:
    a_dir, b_dir = Path(study_a), Path(study_b)
    fit_a, fit_b = _read_fit(a_dir / family, regime), _read_fit(b_dir / family, regime)
    lines = [
        f"# {label_a} vs {label_b}: {family}, {regime}",
        "",
        f"Studies: {label_a} `{a_dir}`, {label_b} `{b_dir}`.",
        "",
    ]
    lines += _exponents(fit_a, fit_b, label_a, label_b)
    lines += _losses(run_losses(a_dir, family), run_losses(b_dir, family), label_a, label_b)
    flops = study_flops(b_dir, family, cooldown_fraction)
    if flops:
        lines += [
            "",
            "## Compute",
            "",
            f"The {label_b} study's grid run as independent cosine runs: {flops[0]:.3g} FLOPs; as wsd "
            f"trajectories with branches (each prefix once): {flops[1]:.3g} FLOPs, "
            f"{flops[1] / flops[0]:.1%} of it.",
        ]
    return "\n".join(lines) + "\n"


def _exponent_cell(e) -> str:
    if e is None or e.a is None:
        return "- | -"
    return f"{e.a:.4f} | " + (f"[{e.ci[0]:.3f}, {e.ci[1]:.3f}]" if e.ci else "-")


def _exponents(fit_a, fit_b, label_a: str, label_b: str) -> list[str]:
    """Each approach's exponent in both studies, and whether their intervals overlap."""
    lines = [
        "## Exponent a (N_opt ~ C^a)",
        "",
        f"| method | {label_a} a | interval | {label_b} a | interval | intervals overlap |",
        "|---|---|---|---|---|---|",
    ]
    ea, eb = {e.method: e for e in exponents(fit_a)}, {e.method: e for e in exponents(fit_b)}
    verdicts = []
    for method in sorted(set(ea) | set(eb)):
        x, y = ea.get(method), eb.get(method)
        both = overlap(x.ci if x else None, y.ci if y else None)
        verdicts.append(both)
        said = "-" if both is None else ("yes" if both else "NO")
        lines.append(f"| {method} | {_exponent_cell(x)} | {_exponent_cell(y)} | {said} |")
    agree = [v for v in verdicts if v is not None]
    return lines + [
        "",
        (
            "The exponents agree within their intervals."
            if agree and all(agree)
            else "The exponents do NOT agree within their intervals."
            if agree
            else "No intervals to compare (too few budgets or no bootstrap)."
        ),
        "",
    ]


def _losses(runs_a: dict, runs_b: dict, label_a: str, label_b: str) -> list[str]:
    """The final loss of every run both studies have, their differences, and the warm-up note."""
    common = sorted(set(runs_a) & set(runs_b), key=lambda r: (parse_run_id(r).flops, r))
    lines = [
        "## Loss at each budget (the final evaluation)",
        "",
        f"| run | {label_a} | {label_b} | relative difference | difference / its standard error |",
        "|---|---|---|---|---|",
    ]
    diffs = []
    for rid in common:
        la, lb = runs_a[rid]["loss"], runs_b[rid]["loss"]
        if la is None or lb is None:
            lines.append(f"| {rid} | {la if la is not None else '-'} | {lb if lb is not None else '-'} | - | - |")
            continue
        d = (lb - la) / la
        diffs.append(d)
        se_a, se_b = runs_a[rid]["loss_se"], runs_b[rid]["loss_se"]
        # Both evaluate the same held-out samples, so this overstates the noise of the difference.
        z = "-" if not se_a or not se_b else f"{(lb - la) / (se_a**2 + se_b**2) ** 0.5:+.2f}"
        lines.append(f"| {rid} | {la:.4f} | {lb:.4f} | {d:+.2%} | {z} |")
    only = sorted(set(runs_a) ^ set(runs_b))
    if only:
        lines += ["", f"In one study only: {', '.join(only)}."]
    if diffs:
        worst = max(diffs, key=abs)
        mean = sum(abs(d) for d in diffs) / len(diffs)
        within = sum(abs(d) <= LOSS_TOLERANCE for d in diffs)
        lines += [
            "",
            f"{len(diffs)} runs in both: mean |difference| {mean:.2%}, largest {worst:+.2%}; "
            f"{within} of {len(diffs)} within {LOSS_TOLERANCE:.0%}.",
        ]
    return lines + warmup_note(runs_a, runs_b, common, label_a, label_b)


def compare(study_a: str | Path, study_b: str | Path, family: str, out: str | Path | None = None, **kwargs) -> str:
    text = compare_markdown(study_a, study_b, family, **kwargs)
    if out:
        write_text_atomic(Path(out), text)
    return text
