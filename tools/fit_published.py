"""Every published study in an isoflops_public.csv fitted as a user would (`prism isoflop fit`),
with and without the studies' own QC outliers, against a standard method and the published exponent.

    python tools/fit_published.py [--csv PATH] [--method both|approach2|approach3] [--span auto|full]
                                  [--bootstrap 1000]

Per study: the runs kept by the fit's checks, Approach 2 and 3 with their intervals, the verdict
and its interval, the textbook Approach 2 on every run (a parabola per budget in log N through
every size, a power law through the minima: no checks, no window, no outliers), how far the
verdict's interval leaves that estimate out, and the published exponent where there is one
(Hoffmann et al.'s Approach 2 for Chinchilla, the Llama 3 paper's N_opt = 0.29 C^0.53).
The CSV defaults to the copy under tests/data (the same file the project's tests read).
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from prism.isoflop.fit import approach2
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import RunRecord

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "scaling" / "isoflops_public.csv"
# The exponent a each study's authors published, by the experiment's prefix.
PUBLISHED = {"epochai_chinchilla": 0.49, "ml_scalefit": 0.49, "llama_3": 0.53}


def textbook_a(recs: list[RunRecord]) -> float | None:
    """Approach 2 as the papers run it: every run, every size, no checks."""
    n, d, loss, c = (np.array([getattr(r, k) for r in recs], float) for k in ("params", "tokens", "loss", "budget"))
    law = approach2.fit_approach2(n, d, loss, c, window="full", lean=False).n_law
    return law.exponent if law else None


def _ci(v, ci) -> str:
    return "-" if v is None else f"{v:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def line(name: str, label: str, recs: list[RunRecord], args) -> str:
    fit = fit_records(recs, method=args.method, bootstrap=args.bootstrap, span=args.span)
    a2, a3, v = fit.approach2, fit.approach3, fit.verdict
    std = textbook_a(recs)
    lo, hi = v.interval if v.interval else (float("nan"), float("nan"))
    out_by = max(lo - std, std - hi, 0.0) if std is not None else float("nan")
    pub = next((p for k, p in PUBLISHED.items() if name.startswith(k)), None)
    held = "" if pub is None else f"; published {pub:.2f} {'held' if lo <= pub <= hi else 'NOT held'}"
    return (
        f"{name} {label}: {fit.diagnostics.points_used} of {len(recs)} runs fitted; "
        f"A2 {_ci(a2.a if a2 else None, a2.a_ci if a2 else None)}; "
        f"A3 {_ci(a3.a if a3 else None, a3.a_ci if a3 else None)}; "
        f"{'identifiable' if v.identifiable else 'NOT identifiable'} [{lo:.3f}, {hi:.3f}] ({v.rests_on}); "
        f"textbook A2 {std:.3f}, outside the interval by {out_by:.3f}{held}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=DATA)
    ap.add_argument("--method", default="both", choices=("approach2", "approach3", "both"))
    ap.add_argument("--span", default="auto", choices=("auto", "full"))
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    with args.csv.open() as fh:
        by_experiment = defaultdict(list)
        for row in csv.DictReader(fh):
            by_experiment[row["experiment"]].append(row)
    for name, rows in by_experiment.items():
        for label, keep in (("all", rows), ("clean", [r for r in rows if r["outlier"] == "False"])):
            recs = [
                RunRecord(f"row{i}", float(r["params"]), float(r["tokens"]), float(r["loss"]), float(r["budget"]))
                for i, r in enumerate(keep)
            ]
            print(line(name, label, recs, args), flush=True)


if __name__ == "__main__":
    main()
