"""Approach 2 on every published study in tests/data/scaling/isoflops_public.csv: a, its interval's
width, the noise, the verdict and how many budgets were fitted on a window, with and without the
studies' own QC outliers (`python tools/fit_published.py [--span auto|full]`)."""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

from prism.isoflop.fit.fit import fit_records
from prism.isoflop.records import RunRecord

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "scaling" / "isoflops_public.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--span", default="auto", choices=("auto", "full"))
    args = ap.parse_args()
    with DATA.open() as fh:
        by_experiment = defaultdict(list)
        for row in csv.DictReader(fh):
            by_experiment[row["experiment"]].append(row)
    for name, rows in by_experiment.items():
        for label, keep in (("all", rows), ("clean", [r for r in rows if r["outlier"] == "False"])):
            recs = [
                RunRecord(f"row{i}", float(r["params"]), float(r["tokens"]), float(r["loss"]), float(r["budget"]))
                for i, r in enumerate(keep)
            ]
            fit = fit_records(recs, method="approach2", bootstrap=0, span=args.span)
            a2 = fit.approach2
            width = f"{a2.a_ci[1] - a2.a_ci[0]:.3f}" if a2.a_ci else "-"
            windowed = sum(f.windowed for f in a2.per_budget)
            print(
                f"{name} {label}: {len(keep)} runs, a = {a2.a:.3f} (interval {width} wide), noise "
                f"{fit.diagnostics.noise:.4f}, {'identifiable' if fit.identifiable else 'NOT identifiable'}, "
                f"{windowed} of {len(a2.per_budget)} budgets on a window"
            )


if __name__ == "__main__":
    main()
